"""signoff: make AI agents ask a person before their tool calls do something that matters.

Its names load when first used: `signoff hook claude-code` runs once per tool call, and must not pay for
the gate, the ledger and pydantic-ai to start."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from signoff.approvers import Approver, TerminalApprover
    from signoff.core.approval import Approval, State
    from signoff.core.call import ToolCall
    from signoff.core.decision import Decision
    from signoff.core.errors import (
        AlreadyConsumed,
        AlreadyDecided,
        AlreadyVoted,
        CallMismatch,
        IllegalTransition,
        LedgerUnavailable,
        LedgerUnwritable,
        NotAnApprover,
        NotFound,
        PolicyError,
        SignoffError,
        StaleChat,
        TaskFinished,
        Unstorable,
    )
    from signoff.core.grant import Grant
    from signoff.core.policy import Policy, Rule, Ruling
    from signoff.core.principal import Authority, Principal
    from signoff.core.task import Task, TaskState
    from signoff.gate import Allowed, Cancelled, Denied, Expired, Gate, Outcome, Pending, Refused
    from signoff.ledger import Ledger, MemoryLedger, SqliteLedger, open_ledger
    from signoff.tasks import TaskCancelled, Tasks, long_running, progress

_WHERE = {
    "Allowed": "signoff.gate",
    "AlreadyConsumed": "signoff.core.errors",
    "AlreadyDecided": "signoff.core.errors",
    "AlreadyVoted": "signoff.core.errors",
    "Approval": "signoff.core.approval",
    "Approver": "signoff.approvers",
    "Authority": "signoff.core.principal",
    "CallMismatch": "signoff.core.errors",
    "Cancelled": "signoff.gate",
    "Decision": "signoff.core.decision",
    "Denied": "signoff.gate",
    "Expired": "signoff.gate",
    "Gate": "signoff.gate",
    "Grant": "signoff.core.grant",
    "IllegalTransition": "signoff.core.errors",
    "Ledger": "signoff.ledger",
    "LedgerUnavailable": "signoff.core.errors",
    "LedgerUnwritable": "signoff.core.errors",
    "MemoryLedger": "signoff.ledger",
    "NotAnApprover": "signoff.core.errors",
    "NotFound": "signoff.core.errors",
    "Outcome": "signoff.gate",
    "Pending": "signoff.gate",
    "Policy": "signoff.core.policy",
    "PolicyError": "signoff.core.errors",
    "Principal": "signoff.core.principal",
    "Refused": "signoff.gate",
    "Rule": "signoff.core.policy",
    "Ruling": "signoff.core.policy",
    "SignoffError": "signoff.core.errors",
    "SqliteLedger": "signoff.ledger",
    "StaleChat": "signoff.core.errors",
    "State": "signoff.core.approval",
    "Task": "signoff.core.task",
    "TaskCancelled": "signoff.tasks",
    "TaskFinished": "signoff.core.errors",
    "TaskState": "signoff.core.task",
    "Tasks": "signoff.tasks",
    "TerminalApprover": "signoff.approvers",
    "ToolCall": "signoff.core.call",
    "Unstorable": "signoff.core.errors",
    "long_running": "signoff.tasks",
    "open_ledger": "signoff.ledger",
    "progress": "signoff.tasks",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = [
    "AlreadyConsumed",
    "AlreadyDecided",
    "AlreadyVoted",
    "Allowed",
    "Approval",
    "Approver",
    "Authority",
    "CallMismatch",
    "Cancelled",
    "Decision",
    "Denied",
    "Expired",
    "Gate",
    "Grant",
    "IllegalTransition",
    "Ledger",
    "LedgerUnavailable",
    "LedgerUnwritable",
    "MemoryLedger",
    "NotAnApprover",
    "NotFound",
    "Outcome",
    "Pending",
    "Policy",
    "PolicyError",
    "Principal",
    "Refused",
    "Rule",
    "Ruling",
    "SignoffError",
    "SqliteLedger",
    "StaleChat",
    "State",
    "Task",
    "TaskCancelled",
    "TaskFinished",
    "TaskState",
    "Tasks",
    "TerminalApprover",
    "ToolCall",
    "Unstorable",
    "long_running",
    "open_ledger",
    "progress",
]
