"""The agent frameworks the demo can run on, with the same tools, grammar and wallet on each."""

from __future__ import annotations

from typing import Any, Final

from signoff.demo.agent import demo_agent
from signoff.demo.tools import Wallets

RUNTIMES: Final = ("pydantic-ai", "adk", "langgraph", "openai-agents")


def demo_agent_for(runtime: str, *, model: str | None = None, wallets: Wallets | None = None) -> Any:
    """The demo agent on `runtime`; `model` is a model string of that framework (scripted without one)."""
    if runtime == "pydantic-ai":
        return demo_agent(model, wallets)
    if runtime == "adk":
        from signoff.demo.adk import demo_adk_agent  # the adk extra is optional

        return demo_adk_agent(model, wallets)
    if runtime == "langgraph":
        from signoff.demo.langgraph import demo_langgraph_agent  # the langchain extra is optional

        return demo_langgraph_agent(model, wallets)
    if runtime == "openai-agents":
        from signoff.demo.openai_agents import demo_openai_agent  # the openai-agents extra is optional

        return demo_openai_agent(model, wallets)
    raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
