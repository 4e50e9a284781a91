"""The short import path: `from signoff.pydantic_ai import ApprovalToolset` replaces the 0.8.0 import."""

from signoff.integrations.pydantic_ai import (
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
