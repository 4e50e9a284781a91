"""Typed errors: every refusal an integration must tell apart has its own class.

They all derive from `SignoffError`, so a caller (the CLI, the server) can turn any of them into one clear
line or a 4xx without a traceback, while code that cares can catch exactly the case it handles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from signoff.core.approval import Approval, State


class SignoffError(Exception):
    """Base of every error signoff raises on purpose."""


class InvalidCall(SignoffError, ValueError):
    """A tool call whose arguments cannot be put in canonical JSON (NaN, non-string keys, objects)."""


class InvalidDecision(SignoffError, ValueError):
    """A decision that makes no sense on its own, such as a denial that asks to be remembered."""


class WeakKey(SignoffError, ValueError):
    """An audit key too short to keep the chain unforgeable."""


class InvalidPrincipal(SignoffError, ValueError):
    """A principal's name, a role or a rule's approvers that cannot be used."""


class PrincipalExists(SignoffError):
    """A principal with that name is registered already (revoked ones keep their name)."""


class PolicyError(SignoffError, ValueError):
    """A policy that cannot be loaded. The message names the source, the key or line, and the fault."""


class LedgerUnavailable(SignoffError, ConnectionError):
    """The ledger cannot be reached or opened. The message names which ledger and why."""


class LedgerUnwritable(LedgerUnavailable):
    """The ledger answers but stores nothing now: its disk is full, it is read-only, or its server is out
    of memory. Nothing of the write was stored, so it can be made again once the cause is gone: an outage
    like any other (a 503), though reads may still be answered, so only a write can tell that it ended."""

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(f"the ledger can't write: {why}")


class LedgerWiped(LedgerUnavailable):
    """The ledger lost everything it held: the epoch marker written when it was created is gone, or
    another ledger's (a Redis flushed, or restarted without persistence). Unlike other outages it does not
    end when the server answers again: what it answers is no longer this ledger, so nothing is read from it
    or written to it until the process is restarted. `gone` is what each waiter on a pending approval is
    told."""

    def gone(self, approval_id: str) -> LedgerWiped:
        """This error as the waiter on `approval_id` is told it."""
        return LedgerWiped(f"approval {approval_id} is gone: {self}")


class Unstorable(SignoffError, ValueError):
    """A value the ledger's database refuses, such as a NUL character in PostgreSQL text."""


class NotFound(SignoffError, LookupError):
    """No approval or grant with that id."""


class IllegalTransition(SignoffError):
    """A state change the approval state machine does not allow, such as consuming a denied approval."""

    def __init__(self, approval_id: str, state: State, action: str, message: str = "") -> None:
        self.approval_id = approval_id
        self.state = state
        self.action = action
        super().__init__(message or f"cannot {action} approval {approval_id}: it is {state}")


class AlreadyDecided(IllegalTransition):
    """A decision lost the race: another landed first. `winner` is the approval as that decision left it."""

    def __init__(self, winner: Approval, action: str = "decide") -> None:
        self.winner = winner
        by = winner.settled_by(owner="the chat's user")
        message = f"approval {winner.id} was already decided: {winner.state} by {by}"
        super().__init__(winner.id, winner.state, action, message)


class NotAnApprover(SignoffError):
    """The principal may not decide this approval: its rule names other approvers, or it asked itself."""

    def __init__(self, approval: Approval, principal_id: str, message: str = "") -> None:
        self.approval = approval
        self.principal_id = principal_id
        default = f"{principal_id} may not decide approval {approval.id}: it waits for {approval.awaited}"
        super().__init__(message or default)


class EditNotAdmitted(NotAnApprover):
    """An edit whose call the policy asks about under a rule that does not admit the editor: the edit
    would carry more authority than its maker has."""

    def __init__(self, approval: Approval, principal_id: str, needs: str) -> None:
        message = f"{principal_id} may not make this edit: the edited call needs {needs}"
        super().__init__(approval, principal_id, message)


class MayNotRemember(NotAnApprover):
    """A decision asking to be remembered for every chat (`always`) from a principal that is neither an
    admin nor holds a role the rule's `remember_always` lists: such a grant answers for others' chats."""

    def __init__(self, approval: Approval, principal_id: str) -> None:
        message = (
            f"{principal_id} may not remember approval {approval.id} for every chat: that takes an admin"
            " or a role its rule lists in remember_always"
        )
        super().__init__(approval, principal_id, message)


class EditRefused(SignoffError):
    """An edit whose call the policy denies outright: the approval stays pending, as it was."""

    def __init__(self, approval: Approval, reason: str) -> None:
        self.approval = approval
        self.reason = reason
        super().__init__(f"the policy denies the edited call ({reason}); approval {approval.id} still waits")


class AlreadyVoted(IllegalTransition):
    """The principal approved this approval already: a quorum counts distinct principals."""

    def __init__(self, approval: Approval, principal_id: str) -> None:
        super().__init__(
            approval.id,
            approval.state,
            "approve",
            f"{principal_id} approved {approval.id} already; it waits for {approval.awaited}",
        )


class Spent(IllegalTransition):
    """A bearer credential (an email review link, a sealed MCP state) used again: its first use spent it."""

    def __init__(self, approval: Approval, credential: str) -> None:
        self.approval = approval
        self.credential = credential
        kind = _BEARERS.get(credential.partition(":")[0], "the credential")
        message = f"{kind} was used already on approval {approval.id}: it decides nothing more"
        super().__init__(approval.id, approval.state, "spend", message)


_BEARERS = {"email": "this review link", "mcp": "this requestState"}
"""Bearer credentials' ids start with their kind (`email:<notice>/<principal>`, `mcp:<nonce>`)."""


class Unproven(SignoffError):
    """The approval's state claims an approval its recorded decisions do not prove (their MACs fail, or
    too few distinct approvers are proven): the database was written around signoff, and nothing runs."""

    def __init__(self, approval_id: str, why: str) -> None:
        self.approval_id = approval_id
        self.why = why
        super().__init__(f"approval {approval_id} is not proven: {why}; the call does not run")


class AlreadyConsumed(IllegalTransition):
    """The single-use claim on an approved call was already taken: the tool must not run again."""

    def __init__(self, approval: Approval) -> None:
        self.approval = approval
        super().__init__(approval.id, approval.state, "consume", f"approval {approval.id} was already used")


class AlreadyRevoked(SignoffError):
    """The grant was revoked before."""


class CallMismatch(SignoffError):
    """A call presented for an approval differs from the call that was approved (other tool, id or args)."""


class StaleChat(SignoffError):
    """A chat's stored state changed after it was read: another request for the same chat saved first."""


class TaskFinished(SignoffError):
    """A change to a task that has already ended: it completed, failed or was cancelled."""

    def __init__(self, task_id: str, state: str, action: str) -> None:
        self.task_id = task_id
        self.state = state
        super().__init__(f"cannot {action} task {task_id}: it already {_ENDED.get(state, state)}")


_ENDED = {"completed": "completed", "failed": "failed", "cancelled": "was cancelled"}


class NoticeBusy(SignoffError):
    """A worker is delivering the notice right now: it is its to settle."""
