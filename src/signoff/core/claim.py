"""The single-use claim: an approved call consumed exactly once, by exactly the approved call, just before
it runs, and only under decisions whose proofs hold; and the bearer credentials that ride on the run it let
start (an MCP upstream's own input rounds), each spent once. Steps of `core.approval`'s state machine, in a
module of their own: what lets a call run, apart from how people decide."""

from __future__ import annotations

from signoff.core.approval import Approval, ApprovalEvent, State, move
from signoff.core.audit import AuditEvent, Keyring
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyConsumed, CallMismatch, Spent, Unproven
from signoff.core.proof import unproven


def consume(
    approval: Approval, call: ToolCall, actor: str, now: float, keyring: Keyring
) -> tuple[Approval, AuditEvent]:
    """Take the single-use claim to run `call`, which must be exactly the approved call, approved by
    decisions whose proofs hold under `keyring`: a state written into the table by hand runs nothing."""
    if approval.state is State.CONSUMED:
        raise AlreadyConsumed(approval)
    if approval.state is State.APPROVED and (why := unproven(keyring, approval)) is not None:
        raise Unproven(approval.id, why)
    _check(approval, call)
    return move(
        approval, ApprovalEvent.CONSUME, "consume", actor, now, {"digest": call.digest},
        consumed_at=now, consumed_by=actor,
    )  # fmt: skip


def spend(
    approval: Approval, call: ToolCall, credential: str, actor: str, now: float
) -> tuple[Approval, AuditEvent]:
    """Spend `credential`, a bearer credential that rides on `call`, the call this approval's claim let run
    (an MCP upstream's own input round): once, only after the claim was taken, and only for exactly that
    call. Raises `Spent` for a second use, `IllegalTransition` before the claim, `CallMismatch` for
    another call."""
    if credential in approval.spent:
        raise Spent(approval, credential)
    if approval.state is State.CONSUMED:
        _check(approval, call)
    return move(
        approval, ApprovalEvent.SPEND, "spend", actor, now, {"credential": credential},
        spent=(*approval.spent, credential),
    )  # fmt: skip


def _check(approval: Approval, call: ToolCall) -> None:
    approved = approval.approved_call
    if (call.call_id, call.tool, call.digest) != (approved.call_id, approved.tool, approved.digest):
        raise CallMismatch(
            f"call {call.call_id} ({call.tool}) is not the call approval {approval.id} approved"
        )
