"""The approval and its state machine.

Transitions are pure functions from one immutable `Approval` to the next plus the `AuditEvent` that records
it. The ledgers only make them atomic and durable; they never decide what is legal. That keeps one state
machine for every backend, testable without I/O (like h11's connection state).
"""

from __future__ import annotations

import secrets
from enum import StrEnum
from typing import Literal

import msgspec

from signoff.core.audit import AuditEvent
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import AlreadyConsumed, AlreadyDecided, CallMismatch, IllegalTransition

OnTimeout = Literal["deny", "allow"]
TIMEOUT_ACTOR = "signoff:timeout"


class State(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    CONSUMED = "consumed"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.PENDING: frozenset({State.APPROVED, State.DENIED, State.EXPIRED, State.CANCELLED}),
    State.APPROVED: frozenset({State.CONSUMED}),
}


def new_approval_id() -> str:
    """160 random bits: unguessable, so knowing a chat never lets anyone address its approvals."""
    return "apr_" + secrets.token_urlsafe(20)


class Approval(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The ledger record of one asked call."""

    id: str
    chat_id: str
    call: ToolCall
    digest: str
    description: str
    rule: str
    created_at: float
    deadline: float | None = None
    on_timeout: OnTimeout = "deny"
    state: State = State.PENDING
    decision: Decision | None = None
    decided_at: float | None = None
    closed_by: str = ""
    closed_reason: str = ""
    consumed_at: float | None = None
    consumed_by: str = ""

    @property
    def approved_call(self) -> ToolCall:
        """The call that may run: the edited one when the decision edited the arguments."""
        if self.decision is not None and self.decision.args is not None:
            return self.call.with_args(self.decision.args)
        return self.call

    @property
    def by(self) -> str:
        """Who settled it: the decider, the canceller, or signoff itself for a deadline."""
        return self.decision.by if self.decision else self.closed_by

    @property
    def reason(self) -> str:
        return self.decision.reason if self.decision else self.closed_reason

    def is_due(self, now: float) -> bool:
        return self.state is State.PENDING and self.deadline is not None and now >= self.deadline


def open_approval(
    call: ToolCall,
    *,
    chat_id: str,
    description: str,
    rule: str,
    now: float,
    deadline: float | None = None,
    on_timeout: OnTimeout = "deny",
    actor: str = "signoff:gate",
) -> tuple[Approval, AuditEvent]:
    approval = Approval(
        id=new_approval_id(),
        chat_id=chat_id,
        call=call,
        digest=call.digest,
        description=description,
        rule=rule,
        created_at=now,
        deadline=None if deadline is None else now + deadline,
        on_timeout=on_timeout,
    )
    event = AuditEvent(
        at=now,
        actor=actor,
        action="open",
        subject=approval.id,
        after=State.PENDING,
        detail={
            "chat": chat_id,
            "call": call.call_id,
            "tool": call.tool,
            "digest": approval.digest,
            "rule": rule,
        },
    )
    return approval, event


def _move(
    approval: Approval,
    to: State,
    action: str,
    actor: str,
    now: float,
    detail: dict[str, object],
    **changes: object,
) -> tuple[Approval, AuditEvent]:
    if to not in TRANSITIONS.get(approval.state, frozenset()):
        raise IllegalTransition(approval.id, approval.state, action)
    after = msgspec.structs.replace(approval, state=to, **changes)
    event = AuditEvent(
        at=now,
        actor=actor,
        action=action,
        subject=approval.id,
        before=approval.state,
        after=to,
        detail=detail,
    )
    return after, event


def decide(approval: Approval, decision: Decision, now: float) -> tuple[Approval, AuditEvent]:
    """Record the first decision. A pending approval past its deadline expires instead.

    Returning the expiry rather than raising lets the ledger persist it in the same atomic step, so a late
    decision can never slip in between the deadline and the sweep.
    """
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval)
    if approval.is_due(now):
        return expire(approval, now)
    detail: dict[str, object] = {"verdict": decision.verdict, "reason": decision.reason}
    if decision.remember != "once":
        detail["remember"] = decision.remember
    changes: dict[str, object] = {"decision": decision, "decided_at": now}
    if decision.args is not None:
        edited = approval.call.with_args(decision.args)
        detail["digest"] = edited.digest
        changes["decision"] = msgspec.structs.replace(decision, args=edited.args)
    to = State.APPROVED if decision.approved else State.DENIED
    return _move(approval, to, decision.verdict, decision.by, now, detail, **changes)


def consume(approval: Approval, call: ToolCall, actor: str, now: float) -> tuple[Approval, AuditEvent]:
    """Take the single-use claim to run `call`, which must be exactly the approved call."""
    if approval.state is State.CONSUMED:
        raise AlreadyConsumed(approval)
    approved = approval.approved_call
    if (call.call_id, call.tool, call.digest) != (approved.call_id, approved.tool, approved.digest):
        raise CallMismatch(
            f"call {call.call_id} ({call.tool}) is not the call approval {approval.id} approved"
        )
    return _move(
        approval,
        State.CONSUMED,
        "consume",
        actor,
        now,
        {"digest": call.digest},
        consumed_at=now,
        consumed_by=actor,
    )


def cancel(approval: Approval, actor: str, reason: str, now: float) -> tuple[Approval, AuditEvent]:
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval, "cancel")
    return _move(
        approval,
        State.CANCELLED,
        "cancel",
        actor,
        now,
        {"reason": reason},
        closed_by=actor,
        closed_reason=reason,
        decided_at=now,
    )


def expire(approval: Approval, now: float) -> tuple[Approval, AuditEvent]:
    """Apply the deadline: `on_timeout = "deny"` ends it expired, `"allow"` approves it in signoff's name."""
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval, "expire")
    if not approval.is_due(now):
        raise IllegalTransition(
            approval.id, approval.state, "expire", f"approval {approval.id} is not due yet"
        )
    reason = "no decision before the deadline"
    if approval.on_timeout == "allow":
        decision = Decision.approve(by=TIMEOUT_ACTOR, reason=f"{reason}; the policy allows on timeout")
        return _move(
            approval,
            State.APPROVED,
            "expire",
            TIMEOUT_ACTOR,
            now,
            {"on_timeout": "allow"},
            decision=decision,
            decided_at=now,
        )
    return _move(
        approval,
        State.EXPIRED,
        "expire",
        TIMEOUT_ACTOR,
        now,
        {"on_timeout": "deny"},
        closed_by=TIMEOUT_ACTOR,
        closed_reason=reason,
        decided_at=now,
    )
