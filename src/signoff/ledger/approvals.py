"""The ledger's approvals, with the grants their decisions make and the audit chain that records them.

Every rule lives in the core (`core.approval`, `core.grant`, `core.proof`); this part runs the core's pure
steps through the committer, which stores each result with its audit entries all or nothing, and wakes
this process's waiters when an approval leaves `pending`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Unpack

from signoff.core import approval as machine
from signoff.core.approval import Approval, State
from signoff.core.audit import AuditEntry, AuditEvent, BrokenLink, ChainCheck, Checkpoint
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyDecided,
    AlreadyVoted,
    CallMismatch,
    EditRefused,
    NotAnApprover,
    Unproven,
)
from signoff.core.grant import Grant, grant_for, revoke
from signoff.core.policy import Policy
from signoff.core.proof import grant_holds
from signoff.ledger.keys import ApprovalKey, AskedKey, GrantKey, found
from signoff.ledger.parts import Parts
from signoff.ledger.records import Change

AUDIT_PAGE = 5000
FORGED = "the grant carries no valid proof"
"""Audit entries read at once when the whole chain is checked."""


class ApprovalLedger(Parts):
    async def open(
        self, call: ToolCall, *, chat_id: str, description: str, rule: str, **asking: Unpack[machine.Asking]
    ) -> Approval:
        """Open a pending approval for `call`, asked by `requester` (the chat's owner), which `authority`
        says who may decide; an edit of it must fit the tool's `schema`. Opening the same chat and call id
        again returns the first one, as long as the arguments are the same: a retried request never asks
        twice."""
        now = self.clock()
        approval, event = machine.open_approval(
            call, chat_id=chat_id, description=description, rule=rule, now=now, key=self.keyring.current,
            **asking,
        )  # fmt: skip

        def step(existing: Approval | None) -> Change:
            return Change(approval=existing) if existing else Change(approval=approval, events=(event,))

        stored = (await self.committer.write(AskedKey(chat_id, call.call_id), step)).approval
        assert stored is not None
        if stored.digest != approval.digest or stored.call.tool != call.tool:
            raise CallMismatch(
                f"call {call.call_id} in chat {chat_id} was already asked with other arguments"
            )
        return stored

    async def get(self, approval_id: str) -> Approval:
        return found(await self.backend.approvals.load(approval_id), ApprovalKey(approval_id))

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        return await self.backend.approvals.find(chat_id, call_id)

    async def approvals(
        self, *, chat_id: str | None = None, state: State | str | None = None, limit: int | None = None
    ) -> list[Approval]:
        """Approvals oldest first, optionally of one chat and/or in one state."""
        return await self.backend.approvals.query(
            chat_id=chat_id, state=None if state is None else State(state), due_by=None, limit=limit
        )

    async def decide(self, approval_id: str, decision: Decision, *, policy: Policy | None = None) -> Approval:
        """Record a decision if it is the first, or count it toward the approval's quorum. A loser gets
        `AlreadyDecided` carrying the winner; a principal the approval's rule does not admit gets
        `NotAnApprover` (an edit its own rule does not let it make, or a grant for every chat it may not
        make, too), one that approved already `AlreadyVoted`, an edit the policy denies `EditRefused`, and
        an approval whose seal fails `Unproven`: all audited.

        An edit is a new call that `policy` rules on afresh (see `core.approval.decide`): without the
        policy, an edit is refused. A decision arriving after the deadline loses to it: the step writes the
        expiry instead.
        """
        late = False

        def step(approval: Approval) -> Change:
            nonlocal late
            now = self.clock()
            edited = None
            if decision.args is not None and policy is not None:
                edited = policy.evaluate(approval.call.with_args(decision.args))
            after, event = machine.decide(approval, decision, now, self.keyring, edited)
            late = event.action == "expire"
            remembered = grant_for(after, now, self.keyring.current)
            if remembered is None:
                return Change(approval=after, events=(event,))
            grant, grant_event = remembered
            return Change(approval=after, grant=grant, events=(event, grant_event))

        try:
            after = await self._apply(approval_id, step)
        except (NotAnApprover, AlreadyVoted, EditRefused, Unproven) as refused:
            await self.record("refuse", approval_id, decision.by, why=str(refused), via=decision.via)
            raise
        if late:
            raise AlreadyDecided(after)
        return after

    async def consume(self, approval_id: str, call: ToolCall, actor: str) -> Approval:
        """Take the single-use claim to run `call` now. A second claim raises `AlreadyConsumed`; one whose
        approving decisions carry no valid proof raises `Unproven`, audited."""

        def step(approval: Approval) -> Change:
            return _one(*machine.consume(approval, call, actor, self.clock(), self.keyring))

        try:
            return await self._apply(approval_id, step)
        except Unproven as refused:
            await self.record("refuse", approval_id, actor, why=refused.why, tool=call.tool)
            raise

    async def cancel(self, approval_id: str, actor: str, reason: str = "") -> Approval:
        return await self._apply(
            approval_id, lambda approval: _one(*machine.cancel(approval, actor, reason, self.clock()))
        )

    async def expire(self, approval_id: str) -> Approval:
        """Apply the deadline of one approval now; raises `IllegalTransition` if it is not due."""
        return await self._apply(
            approval_id, lambda approval: _one(*machine.expire(approval, self.clock(), self.keyring))
        )

    async def expire_due(self) -> list[Approval]:
        """Expire every pending approval whose deadline has passed, applying each one's on_timeout.

        Every worker's sweeper calls this, but only the holder of the sweeper lease does the work, so
        workers don't all scan and race on the same approvals (a race they would lose cleanly anyway:
        an expiry is a transition like any other, and only one applies).
        """
        if not await self._lease("sweeper"):
            return []
        due = await self.backend.approvals.query(
            chat_id=None, state=State.PENDING, due_by=self.clock(), limit=None
        )
        expired = []
        for approval in due:
            try:
                expired.append(await self.expire(approval.id))
            except AlreadyDecided:
                continue
        return expired

    async def wait(self, approval_id: str) -> Approval:
        """Wait until the approval leaves `pending`. Bound it with `asyncio.timeout`.

        The waiter subscribes before it reads, so a decision landing in between is never missed.
        """
        future = self.notifier.subscribe(approval_id)
        try:
            current = await self.get(approval_id)
            if current.state is not State.PENDING:
                return current
            self._watch()
            return await future
        finally:
            self.notifier.unsubscribe(approval_id, future)

    def _watch(self) -> None:
        """Someone here waits: a backend other processes write to needs watching for their decisions."""
        if self.backend.shared:
            self.watcher.watch()

    async def _apply(self, approval_id: str, step: Callable[[Approval], Change]) -> Approval:
        approval = (await self.committer.write(ApprovalKey(approval_id), step)).approval
        assert approval is not None
        self.notifier.notify(approval)
        return approval

    # -- grants -------------------------------------------------------------------------------------------

    async def grants(
        self, *, chat_id: str | None = None, tool: str | None = None, active: bool = True
    ) -> list[Grant]:
        return await self.backend.approvals.grants(chat_id=chat_id, tool=tool, active=active)

    async def matching_grants(self, call: ToolCall, chat_id: str) -> list[Grant]:
        """The active grants that cover this call in this chat (its own or global ones), oldest first. A
        grant whose proof fails was written around signoff: it is passed over, and that is audited. Whether
        a grant may answer for the call is the call's rule's to say (`core.grant.unusable`)."""
        found = []
        for grant in await self.backend.approvals.grants(chat_id=chat_id, tool=call.tool, active=True):
            if not grant.matches(call, chat_id):
                continue
            if grant_holds(self.keyring, grant):
                found.append(grant)
            else:
                await self.record("refuse", grant.id, "signoff:ledger", why=FORGED)
        return found

    async def revoke_grant(self, grant_id: str, actor: str) -> Grant:
        def step(grant: Grant) -> Change:
            after, event = revoke(grant, actor, self.clock(), self.keyring.current)
            return Change(grant=after, events=(event,))

        revoked = (await self.committer.write(GrantKey(grant_id), step)).grant
        assert revoked is not None
        return revoked

    # -- audit --------------------------------------------------------------------------------------------

    async def audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditEntry]:
        return await self.backend.approvals.audit(after_seq, limit)

    async def last_seq(self) -> int:
        """The newest audit entry's number: where a feed that only wants what happens next starts."""
        return await self.backend.approvals.last_seq()

    async def verify_audit(self, checkpoints: Sequence[Checkpoint] = ()) -> tuple[int, BrokenLink | None]:
        """Check the whole chain, a page at a time, against every checkpoint given; report the first broken
        link. (`signoff.ledger.evidence.verify` checks the records against the chain too.)"""
        check, after = ChainCheck(self.keyring, checkpoints), 0
        while page := await self.backend.approvals.audit(after, AUDIT_PAGE):
            if broken := check.feed(page):
                return check.count, broken
            after = page[-1].seq
        return check.count, check.end()

    async def checkpoint(self) -> Checkpoint:
        """The chain's length and head now, signed with the current key: keep it outside the database."""
        count = await self.backend.approvals.last_seq()
        head = (await self.backend.approvals.audit(count - 1, 1))[0].hash if count else ""
        return Checkpoint(count=count, head=head, at=self.clock()).signed(self.keyring.current)


def _one(approval: Approval, event: AuditEvent) -> Change:
    return Change(approval=approval, events=(event,))
