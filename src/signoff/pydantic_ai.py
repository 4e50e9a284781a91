"""The short import path: `from signoff.pydantic_ai import ApprovalToolset` replaces the 0.8.0 import."""

from signoff.integrations.pydantic_ai import (
    AgentChat,
    ApprovalCallback,
    ApprovalController,
    ApprovalDecision,
    ApprovalMemory,
    ApprovalRequest,
    ApprovalResult,
    ApprovalToolset,
    Signoff,
    SignoffToolset,
    SupportsApprovalDescription,
    SupportsNeedsApproval,
)

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
