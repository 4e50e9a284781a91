"""The API of pydantic-ai-blocking-approval 0.8.0, so its users switch by changing one import.

Names, constructor signatures, decisions, session memory and error messages match 0.8.0, because code
written for it (and the tests around that code) match on them: a denial is still a `PermissionError` whose
text the agent's caller may parse. What changes is the toolset's place in pydantic-ai: `ApprovalToolset` is
a `WrapperToolset`, so per-run copies, instructions, `apply` and `visit_and_replace` reach the toolset it
wraps, where the 0.8.0 class was an opaque leaf.

Underneath, every asked call passes signoff's gate, so 0.8.0 users get its guarantees: the call is an
approval in a ledger (a `MemoryLedger` unless `ledger=` names another), the callback's answer is a recorded
decision, an approved call runs once under the single-use claim, and all of it is in the audit. The mode is
a `Policy` mode (`approve_all`, `strict`), and the session memory is kept as session grants in that ledger
(one chat per memory; clearing the memory moves it to a new chat, so the old grants match nothing, and it
revokes them).

Callbacks are called inline on the event loop, and their result is awaited when it is awaitable, as in
0.8.0, rather than as the gate's approvers: `signoff.approvers.call_approver` moves sync callbacks to a
worker thread (a 0.8.0 callback may touch loop-bound objects, and a nested approved call made from it
would then run without a loop), and it turns the callback's exceptions into an abstention where 0.8.0 let
them through unchanged. So the toolset asks the gate without waiting, asks the callback itself, records the
answer in the ledger, and asks the gate again. Only `is_async` is reused, so that `request_approval_sync`
also refuses callables whose `__call__` is async.
"""

from signoff.compat.models import (
    ApprovalCallback,
    ApprovalController,
    ApprovalDecision,
    ApprovalMemory,
    ApprovalRequest,
    ApprovalResult,
    SupportsApprovalDescription,
    SupportsNeedsApproval,
)
from signoff.compat.toolset import ApprovalToolset

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
