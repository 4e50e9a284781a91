"""signoff for pydantic-ai agents, including the drop-in API of pydantic-ai-blocking-approval."""

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

__all__ = [
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
