"""`--agent module:attribute`: find the agent a user wants served, and the chat that serves it.

A pydantic-ai `Agent` and a Google ADK agent are both accepted; ADK is imported only for an ADK agent, so
`pip install signoff` without the `adk` extra serves pydantic-ai agents as before. Any other framework is
served through its own `Framework` (see `integrations.chat.driver`): an agent with a `signoff_framework(gate)`
method is served by what it returns, so adding a framework needs nothing here.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import Model

from signoff.core.errors import SignoffError
from signoff.gate import Gate
from signoff.integrations.chat.driver import ChatDriver
from signoff.integrations.chat.reply import Chat
from signoff.integrations.pydantic_ai.chat import AgentChat, Deps


class AgentNotFound(SignoffError):
    """The `module:attribute` given does not name an agent."""


def load_agent(spec: str) -> Any:
    """Import `module:attribute`, looking in the working directory first, as uvicorn does for apps."""
    agent = load_attribute(spec, "--agent", "myapp.agents:agent")
    known = (_is_adk, _is_langgraph, _is_openai_agent, _has_framework)
    if not isinstance(agent, AbstractAgent) and not any(found(agent) for found in known):
        raise AgentNotFound(
            f"--agent {spec}: a {type(agent).__name__}, not a pydantic-ai Agent, a Google ADK agent, an"
            " OpenAI Agents SDK Agent or a compiled LangGraph graph"
        )
    return agent


def load_deps(spec: str) -> Deps:
    """`--deps module:function`: what makes a pydantic-ai agent's deps for each run (a class counts)."""
    made = load_attribute(spec, "--deps", "myapp.agents:make_deps")
    if not callable(made):
        raise AgentNotFound(f"--deps {spec}: not a function that makes the deps")
    return made  # type: ignore[no-any-return]


def load_attribute(spec: str, option: str, example: str) -> Any:
    """Import `module:attribute` for `option`, looking in the working directory first, as uvicorn does for
    apps; `AgentNotFound` says what could not be found, in one line."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise AgentNotFound(f"{option} {spec}: must be module:attribute, such as {example}")
    try:
        module = importlib.import_module(module_name)
    except SyntaxError as exc:
        raise AgentNotFound(
            f"{option} {spec}: {exc.filename}: invalid Python: {exc.msg} (at line {exc.lineno}, column"
            f" {exc.offset})"
        ) from None
    except ImportError as exc:
        raise AgentNotFound(f"{option} {spec}: cannot import {module_name}: {exc}") from exc
    if not hasattr(module, attribute):
        raise AgentNotFound(f"{option} {spec}: {module_name} has no attribute {attribute}")
    return getattr(module, attribute)


def _is_adk(agent: object) -> bool:
    return type(agent).__module__.startswith("google.adk.")


def _is_langgraph(agent: object) -> bool:
    """A compiled graph (`create_agent`'s result among them); LangGraph is imported only for one."""
    return type(agent).__module__.startswith("langgraph.")


def _is_openai_agent(agent: object) -> bool:
    """An Agents SDK `Agent`: its package (`agents`) is imported already wherever one was made."""
    kind = getattr(sys.modules.get("agents"), "Agent", None)
    return isinstance(kind, type) and kind.__module__ == "agents.agent" and isinstance(agent, kind)


def _has_framework(agent: object) -> bool:
    return callable(getattr(agent, "signoff_framework", None))


def chat_for(
    agent: Any,
    gate: Gate,
    *,
    model: Model | str | None,
    deps: Deps | None = None,
    signing_key: bytes,
    browser_timeout: float,
) -> Chat:
    """The chat that serves `agent`, whichever framework built it; `deps` makes a pydantic-ai agent's
    deps for each run."""
    if _has_framework(agent):
        if model is not None:
            raise AgentNotFound("--model picks a pydantic-ai model; give this agent its model in code")
        framework = agent.signoff_framework(gate)
        return ChatDriver(framework, gate, signing_key=signing_key, browser_timeout=browser_timeout)
    if _is_adk(agent):
        from signoff.integrations.adk import AdkChat

        if model is not None:
            raise AgentNotFound("--model picks a pydantic-ai model; give an ADK agent its model in code")
        return AdkChat(agent, gate, signing_key=signing_key, browser_timeout=browser_timeout)
    if _is_openai_agent(agent):
        from signoff.openai_agents import OpenAIAgentsChat

        if model is not None:
            raise AgentNotFound(
                "--model picks a pydantic-ai model; give an Agents SDK agent its model in code"
            )
        return OpenAIAgentsChat(agent, gate, signing_key=signing_key, browser_timeout=browser_timeout)
    if _is_langgraph(agent):
        from signoff.langchain import LangGraphChat

        if model is not None:
            raise AgentNotFound("--model picks a pydantic-ai model; give a LangGraph graph its model in code")
        return LangGraphChat(agent, gate, signing_key=signing_key, browser_timeout=browser_timeout)
    return AgentChat(
        agent, gate, model=model, deps=deps, signing_key=signing_key, browser_timeout=browser_timeout
    )
