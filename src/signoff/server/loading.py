"""`--agent module:attribute`: find the agent a user wants served."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from pydantic_ai.agent import AbstractAgent

from signoff.core.errors import SignoffError


class AgentNotFound(SignoffError):
    """The `module:attribute` given does not name an agent."""


def load_agent(spec: str) -> AbstractAgent[Any, Any]:
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
    if not isinstance(agent, AbstractAgent):
        raise AgentNotFound(f"{spec} is {type(agent).__name__}, not a pydantic-ai Agent")
    return agent
