"""signoff for pydantic-ai agents, including the drop-in API of pydantic-ai-blocking-approval."""

from signoff.integrations.pydantic_ai.chat import AgentChat
from signoff.integrations.pydantic_ai.compat import (
    ApprovalCallback,
    ApprovalController,
    ApprovalDecision,
    ApprovalMemory,
    ApprovalRequest,
    ApprovalResult,
    ApprovalToolset,
    SupportsApprovalDescription,
    SupportsNeedsApproval,
)
from signoff.integrations.pydantic_ai.toolset import Signoff, SignoffToolset

__all__ = [
    "AgentChat",
    "Signoff",
    "SignoffToolset",
    "ApprovalCallback",
    "ApprovalController",
    "ApprovalDecision",
    "ApprovalMemory",
    "ApprovalRequest",
    "ApprovalResult",
    "ApprovalToolset",
    "SupportsApprovalDescription",
    "SupportsNeedsApproval",
]
