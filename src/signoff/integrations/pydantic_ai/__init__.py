"""signoff for pydantic-ai agents, including the drop-in API of pydantic-ai-blocking-approval."""

from signoff import compat
from signoff.compat import *  # noqa: F403 - the drop-in API, exactly as compat exports it
from signoff.integrations.pydantic_ai.browser import acknowledged
from signoff.integrations.pydantic_ai.chat import AgentChat
from signoff.integrations.pydantic_ai.toolset import Signoff, SignoffToolset

__all__ = ["AgentChat", "acknowledged", "Signoff", "SignoffToolset", *compat.__all__]
