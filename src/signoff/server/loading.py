"""`--agent module:attribute`: find the agent a user wants served, and the chat that serves it.

A pydantic-ai `Agent` and a Google ADK agent are both accepted; ADK is imported only for an ADK agent, so
`pip install signoff` without the `adk` extra serves pydantic-ai agents as before.
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
from signoff.integrations.chat import Chat
from signoff.integrations.pydantic_ai.chat import AgentChat


class AgentNotFound(SignoffError):
    """The `module:attribute` given does not name an agent."""


def load_agent(spec: str) -> Any:
    """Import `module:attribute`, looking in the working directory first, as uvicorn does for apps."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise AgentNotFound(f"--agent must look like module:attribute, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentNotFound(f"cannot import {module_name!r} for --agent: {exc}") from exc
    agent = getattr(module, attribute, None)
    if not isinstance(agent, AbstractAgent) and not _is_adk(agent):
        raise AgentNotFound(
            f"{spec} is {type(agent).__name__}, not a pydantic-ai Agent or a Google ADK agent"
        )
    return agent


def _is_adk(agent: object) -> bool:
    return type(agent).__module__.startswith("google.adk.")


def chat_for(
    agent: Any, gate: Gate, *, model: Model | str | None, signing_key: bytes, browser_timeout: float
) -> Chat:
    """The chat that serves `agent`, whichever framework built it."""
    if _is_adk(agent):
        from signoff.integrations.adk import AdkChat

        if model is not None:
            raise AgentNotFound("--model picks a pydantic-ai model; give an ADK agent its model in code")
        return AdkChat(agent, gate, signing_key=signing_key, browser_timeout=browser_timeout)
    return AgentChat(agent, gate, model=model, signing_key=signing_key, browser_timeout=browser_timeout)
