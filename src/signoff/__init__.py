"""signoff: make AI agents ask a person before their tool calls do something that matters."""

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
