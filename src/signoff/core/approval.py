"""The approval and its state machine.

The rules:

- An approval opens `pending`, sealed: who may decide (its authority), under which rule, until when. Nothing
  is decided or run under an authority that is not the sealed one.
- While pending, a principal the authority admits decides. A deny settles it `denied` at once. An approval
  is a vote: it stays `pending` until `quorum` distinct principals voted, then it is `approved`. An edit is
  a new call, ruled on by the policy afresh (see `core.edit`); the votes before it approved another call
  and no longer count.
- A second decision by the same maker follows one rule, whatever brought it (`again`): a bearer credential
  (an email review link, a sealed MCP state) decides once, and is kept as `spent`; an identity approves
  once, and may still deny while the approval waits for others, since one allowed deny denies.
- At its deadline a pending approval expires: `expired`, or `approved` in signoff's name when its rule says
  `on_timeout = "allow"`. A decision that comes at or after the deadline finds it expired.
- A pending approval is `cancelled` when nobody should decide it any more (its chat moved on).
- An approved one is `consumed` exactly once, by exactly the approved call, just before it runs: the
  single-use claim, taken only under decisions whose proofs hold (`core.claim`). A bearer credential that
  rides on the claimed call (an MCP upstream's own input round) is spent on it once.
- `denied`, `expired`, `cancelled` and `consumed` are final. The first decision wins; a later one is told
  who won.

Each step is a pure function from one immutable `Approval` to the next, plus the `AuditEvent` that records
it, and which event leads from which state to which is one table, `APPROVAL_TRANSITIONS`, that `_move`
interprets. The ledgers only make the steps atomic and durable; they never decide what is legal. So every
backend runs one state machine, testable without I/O, as h11 does for HTTP.
"""

from __future__ import annotations

import secrets
from enum import StrEnum
from typing import Any, Literal

import msgspec

from signoff.core.audit import TIMEOUT_ACTOR, AuditEvent, Keyring
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.edit import reruled
from signoff.core.errors import (
    AlreadyDecided,
    AlreadyVoted,
    IllegalTransition,
    InvalidDecision,
    MayNotRemember,
    NotAnApprover,
    Spent,
    Unproven,
)
from signoff.core.followup import FollowUp, Followups, advanced, due
from signoff.core.policy import OnTimeout, Ruling
from signoff.core.principal import Authority, Principal, distinct
from signoff.core.proof import prove_decision, seal_holds, sealed
from signoff.core.wording import OWNER, WITHDRAWN

FOLLOW_UP_ACTOR = "signoff:follow-up"
Wait = Literal["blocking", "deferred"]
"""How a call waits for its approval: blocked where it was made, or its run ends and resumes later."""


class State(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    CONSUMED = "consumed"


class ApprovalEvent(StrEnum):
    VOTE = "vote"
    """An approving vote that leaves the quorum short."""
    APPROVE = "approve"
    """The approving vote that reaches the quorum."""
    DENY = "deny"
    EXPIRE = "expire"
    ALLOW_ON_TIMEOUT = "allow-on-timeout"
    CANCEL = "cancel"
    CONSUME = "consume"
    FOLLOW_UP = "follow-up"
    """A reminder, an escalation or a deadline warning (see `core.followup`)."""
    SPEND = "spend"
    """A bearer credential riding on the claimed call, used (see `core.claim.spend`)."""
    FINISH = "finish"
    """The claimed call ended, and how (see `core.claim.finish`)."""


APPROVAL_TRANSITIONS: dict[State, dict[ApprovalEvent, State]] = {
    State.PENDING: {
        ApprovalEvent.VOTE: State.PENDING,
        ApprovalEvent.APPROVE: State.APPROVED,
        ApprovalEvent.DENY: State.DENIED,
        ApprovalEvent.EXPIRE: State.EXPIRED,
        ApprovalEvent.ALLOW_ON_TIMEOUT: State.APPROVED,
        ApprovalEvent.CANCEL: State.CANCELLED,
        ApprovalEvent.FOLLOW_UP: State.PENDING,
    },
    State.APPROVED: {ApprovalEvent.CONSUME: State.CONSUMED},
    State.CONSUMED: {ApprovalEvent.SPEND: State.CONSUMED, ApprovalEvent.FINISH: State.CONSUMED},
}
"""For each state, the state each event leads to. A state with no row is final."""


def new_approval_id() -> str:
    """160 random bits: unguessable, so knowing a chat never lets anyone address its approvals."""
    return "apr_" + secrets.token_urlsafe(20)


class CallOutcome(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """How a claimed call ended: `ok` with its `result` as JSON, or not, with the error it raised as
    `result`; `kept` False where the result was too big to keep, and `result` then says so."""

    ok: bool
    result: Any
    at: float
    kept: bool = True


class Vote(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One principal's approval (or edit) of an approval that needs more than one."""

    decision: Decision
    at: float


class Approval(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The ledger record of one asked call.

    `requester` is the principal whose chat asked (empty when a program asked without one), and
    `authority` who may decide, both fixed when it opens. Until `authority.quorum` distinct principals
    approve, it stays pending with their `votes`; `edited` holds the arguments of the latest edit, which
    the votes after it approve.
    """

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
    worker: str = ""
    """The process that took the claim and ran the call (`host:pid`): who to ask of an unknown outcome."""
    outcome: CallOutcome | None = None
    """How the claimed call ended (`core.claim.finish`); none while it runs, or if its process died."""
    requester: str = ""
    authority: Authority = msgspec.field(default_factory=Authority)
    votes: tuple[Vote, ...] = ()
    edited: dict[str, Any] | None = None
    schema: dict[str, Any] | None = None
    """The tool's JSON Schema for its arguments, when it declares one: an edit must fit it."""
    notify: tuple[str, ...] = ()
    """The channels its rule tells of its events (see `core.notice`)."""
    escalate_at: float | None = None
    """When `authority.escalate_to` join the approvers: sealed (see `core.followup`)."""
    followups: Followups | None = None
    seal: str = ""
    """The ledger's MAC over who may decide what (see `core.proof`), made when it opens and when an edit
    changes it: a rule loosened in the table fails it, and nothing is decided or run under it."""
    spent: tuple[str, ...] = ()
    """The bearer credentials used on it (see `again` and `spend`): none decides or is forwarded twice."""

    @property
    def approved_call(self) -> ToolCall:
        """The call that may run: the edited one when someone edited the arguments."""
        if self.edited is not None:
            return self.call.with_args(self.edited)
        if self.decision is not None and self.decision.args is not None:  # recorded before `edited` was
            return self.call.with_args(self.decision.args)
        return self.call

    @property
    def approved_digest(self) -> str:
        """`approved_call`'s digest, without hashing the call again when it is the one asked for (a
        stored digest that disagrees with the call makes every proof over it fail to verify)."""
        runs = self.approved_call
        return self.digest if runs is self.call else runs.digest

    @property
    def voters(self) -> list[str]:
        """Who approved so far, each told apart from the others: `alice`, `alice (oidc: intruder-42)`."""
        return distinct([v.decision.principal for v in self.votes], lambda p: p.label)

    @property
    def tally(self) -> str:
        """How far the quorum got, in words: `1 of 2: alice`."""
        names = ", ".join(self.voters)
        counted = f"{len(self.votes)} of {self.authority.quorum}"
        return f"{counted}: {names}" if names else counted

    @property
    def escalated(self) -> bool:
        """Whether its escalation was taken, as the record says: what a page or a channel shows."""
        return self.followups is not None and self.followups.escalated

    def admits(self, principal: Principal, at: float | None = None) -> bool:
        """Whether `principal` may decide it at `at`: under its escalation from the sealed time on. With no
        time, as it stands (`escalated`): what a page or a channel shows."""
        escalated = self.escalate_at is not None and (
            self.escalated if at is None else at >= self.escalate_at
        )
        return self.authority.allows(principal, self.requester, escalated=escalated)

    @property
    def awaited(self) -> str:
        """Who it waits for, in words: `finance, 1 of 2: alice`."""
        words = self.authority.awaited(escalated=self.escalated)
        return f"{words}, {self.tally}" if self.authority.quorum > 1 else words

    @property
    def by(self) -> str:
        """Who settled it: the decider, the canceller, or signoff itself for a deadline."""
        return self.decision.by if self.decision else self.closed_by

    @property
    def reason(self) -> str:
        return self.decision.reason if self.decision else self.closed_reason

    def settled_by(self, owner: str = OWNER) -> str:
        """Who settled it, as a person reads it: `alice (finance)`, `alice (the requester)`, `the
        deadline`, `a new message`; never an id like `browser:3ffc…` or `signoff:…`. A requester with no
        name of its own (an anonymous browser's session, the anonymous principal) is `owner`, the words
        for a chat's user where it is read."""
        by = self.by
        if by == TIMEOUT_ACTOR:
            return "the deadline"
        if self.state is State.CANCELLED and self.closed_reason == WITHDRAWN:
            return "a new message"
        if by == self.requester:
            named = self.decision.principal if self.decision is not None else None
            if named is None or named.via in ("session", "none"):
                return owner
            qualifiers = "; ".join(part for part in (named.source, "the requester") if part)
            return f"{named.display} ({qualifiers})"
        if self.decision is not None:
            return self.decision.principal.described
        return "signoff" if by.startswith("signoff:") else by

    def is_due(self, now: float) -> bool:
        return self.state is State.PENDING and self.deadline is not None and now >= self.deadline

    def voted(self, principal_id: str) -> bool:
        """Whether `principal_id` approved it already, among the votes that still count."""
        return any(v.decision.by == principal_id for v in self.votes)


def move(
    approval: Approval,
    event: ApprovalEvent,
    action: str,
    actor: str,
    now: float,
    detail: dict[str, object],
    **changes: object,
) -> tuple[Approval, AuditEvent]:
    """The approval after `event`, as the table says, and the audit event that records it as `action`
    (a vote is recorded as the verdict it carries: `approve` or `edit`)."""
    to = APPROVAL_TRANSITIONS.get(approval.state, {}).get(event)
    if to is None:
        raise IllegalTransition(approval.id, approval.state, action)
    after = msgspec.structs.replace(approval, state=to, **changes)
    recorded = AuditEvent(
        at=now,
        actor=actor,
        action=action,
        subject=approval.id,
        before=approval.state,
        after=to,
        detail=detail,
    )
    return after, recorded


def decide(
    approval: Approval, decision: Decision, now: float, keyring: Keyring, edited: Ruling | None = None
) -> tuple[Approval, AuditEvent]:
    """Record a decision from a principal the approval's authority admits. A deny decides at once; an
    approval counts toward the quorum, and decides once the quorum is reached. A pending approval past its
    deadline expires instead. An edit is a new call, which `edited`, the policy's ruling on it, judges (see
    `core.edit`).

    Returning the expiry rather than raising lets the ledger persist it in the same atomic step, so a late
    decision can never slip in between the deadline and the sweep. The approval's seal must hold under
    `keyring` (`Unproven` otherwise); the decision is recorded with its proof, made with the current key.
    """
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval)
    if approval.is_due(now):
        return expire(approval, now, keyring)
    if not seal_holds(keyring, approval):
        raise Unproven(approval.id, "its authority is not the one it was sealed with")
    if not approval.admits(decision.principal, now):
        raise NotAnApprover(approval, decision.by)
    if (refused := again(approval, decision)) is not None:
        raise refused
    detail: dict[str, object] = {"verdict": decision.verdict, "reason": decision.reason, "via": decision.via}
    if decision.credential != "code":
        detail["credential"] = decision.credential
    spent = (*approval.spent, decision.spends) if decision.spends else approval.spent
    if decision.args is not None:
        approval = sealed(keyring.current, reruled(approval, decision.args, decision.principal, edited, now))
        detail.update(digest=approval.approved_digest, rule=approval.rule)
        decision = msgspec.structs.replace(decision, args=approval.edited)
    authority = approval.authority
    if decision.remember != "once" and authority.quorum > 1:
        raise InvalidDecision(
            f"approval {approval.id} needs {authority.quorum} approvers, so it can't be remembered"
        )
    if decision.remember == "always" and not authority.may_remember_always(decision.principal):
        raise MayNotRemember(approval, decision.by)
    if decision.remember != "once":
        detail["remember"] = decision.remember
    decision = prove_decision(keyring.current, approval, decision, approval.approved_digest, now)
    if not decision.approved:
        changes: dict[str, object] = {"decision": decision, "decided_at": now, "spent": spent}
        return move(approval, ApprovalEvent.DENY, "deny", decision.by, now, detail, **changes)
    vote = Vote(decision=decision, at=now)
    votes = (vote,) if decision.args is not None else (*approval.votes, vote)
    if len(votes) < authority.quorum:
        detail["votes"] = len(votes)
        return move(
            approval, ApprovalEvent.VOTE, decision.verdict, decision.by, now, detail, votes=votes, spent=spent
        )
    return move(
        approval, ApprovalEvent.APPROVE, decision.verdict, decision.by, now, detail,
        decision=decision, decided_at=now, votes=votes, spent=spent,
    )  # fmt: skip


def again(approval: Approval, decision: Decision) -> Spent | AlreadyVoted | None:
    """Why `decision` may not be taken after its maker's earlier one on `approval`, or None: the one rule
    for a second decision, the same on every surface.

    A bearer credential decides once: once it recorded a decision here, it decides nothing more, whatever
    it says now (who holds a link is whoever has it; a person who changes their mind decides again with a
    credential of their own). An identity approves once, since a quorum counts distinct principals, and
    may still deny while the approval waits for others: it changed its mind, and one allowed deny denies."""
    if decision.spends and decision.spends in approval.spent:
        return Spent(approval, decision.spends)
    if decision.verdict == "approve" and approval.voted(decision.by):
        return AlreadyVoted(approval, decision.by)
    return None


def follow_up(approval: Approval, step: FollowUp, now: float) -> tuple[Approval, AuditEvent]:
    """Take the follow-up `step`, which must be the one due now (see `core.followup`)."""
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval, step)
    if step != due(approval.followups, created_at=approval.created_at, deadline=approval.deadline,
                   escalate_at=approval.escalate_at, now=now):  # fmt: skip
        raise IllegalTransition(
            approval.id, approval.state, step, f"approval {approval.id}: no {step} is due"
        )
    detail: dict[str, object] = {"step": step}
    if step == "escalate":
        detail.update(joined=list(approval.authority.escalate_to), why="nobody decided in time")
    after = advanced(approval.followups, step)
    return move(approval, ApprovalEvent.FOLLOW_UP, step, FOLLOW_UP_ACTOR, now, detail, followups=after)


def cancel(approval: Approval, actor: str, reason: str, now: float) -> tuple[Approval, AuditEvent]:
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval, "cancel")
    return move(
        approval, ApprovalEvent.CANCEL, "cancel", actor, now, {"reason": reason},
        closed_by=actor, closed_reason=reason, decided_at=now,
    )  # fmt: skip


def expire(approval: Approval, now: float, keyring: Keyring) -> tuple[Approval, AuditEvent]:
    """Apply the deadline: `on_timeout = "deny"` ends it expired, `"allow"` approves it in signoff's name,
    with that decision's proof; an approval whose seal fails under `keyring` never approves itself."""
    if approval.state is not State.PENDING:
        raise AlreadyDecided(approval, "expire")
    if not approval.is_due(now):
        raise IllegalTransition(
            approval.id, approval.state, "expire", f"approval {approval.id} is not due yet"
        )
    reason = "no decision before the deadline"
    if approval.on_timeout == "allow" and seal_holds(keyring, approval):
        decision = Decision.approve(by=TIMEOUT_ACTOR, reason=f"{reason}; the policy allows on timeout")
        decision = prove_decision(keyring.current, approval, decision, approval.approved_digest, now)
        return move(
            approval, ApprovalEvent.ALLOW_ON_TIMEOUT, "expire", TIMEOUT_ACTOR, now, {"on_timeout": "allow"},
            decision=decision, decided_at=now,
        )  # fmt: skip
    return move(
        approval, ApprovalEvent.EXPIRE, "expire", TIMEOUT_ACTOR, now, {"on_timeout": "deny"},
        closed_by=TIMEOUT_ACTOR, closed_reason=reason, decided_at=now,
    )  # fmt: skip
