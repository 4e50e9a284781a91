"""The tools of a pydantic-ai agent that the browser runs (seed 001), as a signoff chat lists them.

An external tool (`ExternalToolset`) is one the run leaves for the client: the chat hands its call to the
browser and waits for the result. An acknowledged one (`acknowledged`, see
`integrations.chat.acknowledged`) is an ordinary function tool that returns the acknowledgment, marked
so the chat lists it for the browser, which acts on its call as it sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai import Tool
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, FunctionToolset

from signoff.integrations.framework import BrowserToolInfo

ACKNOWLEDGED = {"signoff": "acknowledged"}
"""The tool metadata that marks an acknowledged browser tool."""


def acknowledged(func: Callable[..., Any], *, name: str | None = None) -> Tool[Any]:
    """A browser tool the server answers at once with what `func` returns (its name, docstring and
    parameters are the tool's), while the browser acts on the call as it sees it. Put it in a
    `FunctionToolset`; the policy must allow it outright."""
    return Tool(func, name=name, metadata=ACKNOWLEDGED)


def browser_tools(agent: AbstractAgent[Any, Any]) -> tuple[BrowserToolInfo, ...]:
    """The agent's external tools, and its acknowledged ones."""
    found: list[BrowserToolInfo] = []

    def collect(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, ExternalToolset):
            found.extend(
                BrowserToolInfo(d.name, d.description or "", d.parameters_json_schema)
                for d in toolset.tool_defs
            )
        elif isinstance(toolset, FunctionToolset):
            found.extend(
                BrowserToolInfo(t.name, t.description or "", t.tool_def.parameters_json_schema, True)
                for t in toolset.tools.values()
                if t.metadata == ACKNOWLEDGED
            )

    for toolset in getattr(agent, "toolsets", ()):
        toolset.apply(collect)
    return tuple(found)
