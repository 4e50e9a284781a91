"""The single-use claim: an approved call consumed exactly once, by exactly the approved call, just before
it runs, and only under decisions whose proofs hold; the bearer credentials that ride on the run it let
start (an MCP upstream's own input rounds), each spent once; and how the run ended. Steps of
`core.approval`'s state machine, in a module of their own: what lets a call run, apart from how people
decide.

The claim records that the call started, and where (`worker`), in the write that takes it; `finish`
records how it ended. A process that dies between the two leaves a call that started and whose outcome
nobody knows: what the model is then told is exactly that (`unknown`), never that the call was refused,
since it may well have done what it does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from signoff.core.approval import Approval, ApprovalEvent, CallOutcome, State, move
from signoff.core.audit import AuditEvent, Keyring
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyConsumed, CallMismatch, IllegalTransition, Spent, Unproven
from signoff.core.proof import unproven


def consume(
    approval: Approval, call: ToolCall, actor: str, now: float, keyring: Keyring, worker: str = ""
) -> tuple[Approval, AuditEvent]:
    """Take the single-use claim to run `call`, which must be exactly the approved call, approved by
    decisions whose proofs hold under `keyring`: a state written into the table by hand runs nothing.
    `worker` is the process that will run it."""
    if approval.state is State.CONSUMED:
        raise AlreadyConsumed(approval)
    if approval.state is State.APPROVED and (why := unproven(keyring, approval)) is not None:
        raise Unproven(approval.id, why)
    _check(approval, call)
    detail: dict[str, object] = {"digest": call.digest, **({"worker": worker} if worker else {})}
    return move(
        approval, ApprovalEvent.CONSUME, "consume", actor, now, detail,
        consumed_at=now, consumed_by=actor, worker=worker,
    )  # fmt: skip


def finish(
    approval: Approval, call: ToolCall, outcome: CallOutcome, actor: str, now: float
) -> tuple[Approval, AuditEvent]:
    """Record how the call the claim let run ended: once, and only for exactly that call."""
    if approval.state is not State.CONSUMED or approval.outcome is not None:
        raise IllegalTransition(approval.id, approval.state, "finish")
    _check(approval, call)
    detail: dict[str, object] = {"ok": outcome.ok}
    if not outcome.ok:
        detail["error"] = outcome.result
    return move(approval, ApprovalEvent.FINISH, "finish", actor, now, detail, outcome=outcome)


MAX_KEPT = 16 * 1024
"""Bytes of a call's result, as JSON, that its outcome keeps: enough for what a model reads back, and a
ledger record stays small."""


def kept(outcome: CallOutcome) -> CallOutcome:
    """`outcome` as the ledger keeps it: its result as JSON values (what JSON can't say, as text), or, past
    `MAX_KEPT` bytes, a note of its size instead."""
    encoded = msgspec.json.encode(outcome.result, enc_hook=_as_json)
    if len(encoded) > MAX_KEPT:
        note = f"a result of {len(encoded)} bytes, too big to keep"
        return msgspec.structs.replace(outcome, result=note, kept=False)
    return msgspec.structs.replace(outcome, result=msgspec.json.decode(encoded))


def _as_json(value: Any) -> Any:
    """What JSON can say of a value msgspec can't encode: a pydantic model's dump, or its text."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else str(value)


def unknown(approval: Approval) -> str:
    """What the model is told of a claimed call whose outcome was never recorded: that it started, when
    and where, and that nobody knows how it ended."""
    started = datetime.fromtimestamp(approval.consumed_at or 0.0, UTC).strftime("%H:%M:%S UTC")
    where = f" by worker {approval.worker}" if approval.worker else ""
    return (
        f"{approval.call.tool} was started at {started}{where} and its outcome was not recorded: it may or"
        " may not have taken effect; check before trying it again"
    )


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
