"""The ledger's approvals: opened, decided first-wins or by quorum, claimed once, expired at their deadline.

Every rule lives in the core (`core.approval`, `core.grant`, `core.proof`); this part runs the core's pure
steps through the committer, which stores each result with its audit entries (and the grant a decision
makes) all or nothing, and wakes this process's waiters when an approval leaves `pending`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Unpack

from signoff.core import approval as machine
from signoff.core import claim
from signoff.core.approval import Approval, CallOutcome, State
from signoff.core.audit import AuditEvent
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyDecided,
    CallMismatch,
    EditRefused,
    IllegalTransition,
    NotAnApprover,
    Spent,
    Unproven,
)
from signoff.core.followup import FollowUp, due
from signoff.core.grant import grant_for
from signoff.core.notice import notices_for
from signoff.core.opening import Asking, open_approval
from signoff.core.policy import Policy
from signoff.ledger.keys import ApprovalKey, AskedKey, found
from signoff.ledger.parts import Part, Shared
from signoff.ledger.records import Change


class Approvals(Part):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._store = shared.backend.approvals

    async def open(
        self, call: ToolCall, *, chat_id: str, description: str, rule: str, **asking: Unpack[Asking]
    ) -> Approval:
        """Open a pending approval for `call`, asked by `requester` (the chat's owner), which `authority`
        says who may decide; an edit of it must fit the tool's `schema`. Opening the same chat and call id
        again returns the first one, as long as the arguments are the same: a retried request never asks
        twice."""
        approval, event = open_approval(
            call, chat_id=chat_id, description=description, rule=rule, now=self.clock(),
            key=self._shared.keyring.current, **asking,
        )  # fmt: skip

        def step(existing: Approval | None) -> Change:
            if existing is not None:
                return Change(approval=existing)
            return _told(Change(approval=approval, events=(event,)))

        stored = (await self._shared.committer.write(AskedKey(chat_id, call.call_id), step)).approval
        assert stored is not None
        if stored.notify:
            self._shared.told.set()
        if stored.digest != approval.digest or stored.call.tool != call.tool:
            raise CallMismatch(
                f"call {call.call_id} in chat {chat_id} was already asked with other arguments"
            )
        return stored

    async def get(self, approval_id: str) -> Approval:
        return found(await self._store.load(approval_id), ApprovalKey(approval_id))

    async def many(self, approval_ids: Collection[str]) -> dict[str, Approval]:
        """Those of `approval_ids` that exist, by id, in one read."""
        return {a.id: a for a in await self._store.load_many(list(approval_ids))} if approval_ids else {}

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        return await self._store.find(chat_id, call_id)

    async def query(
        self, *, chat_id: str | None = None, state: State | str | None = None, limit: int | None = None
    ) -> list[Approval]:
        """Approvals oldest first, optionally of one chat and/or in one state."""
        return await self._store.query(
            chat_id=chat_id, state=None if state is None else State(state), due_by=None, limit=limit
        )

    async def decide(self, approval_id: str, decision: Decision, *, policy: Policy | None = None) -> Approval:
        """Record a decision if it is the first, or count it toward the approval's quorum: the one way a
        decision is recorded, whatever surface brought it. A surface makes `decision` of the `Proven`
        principal its credential gave (`Decision.of(approved, proven, ...)`), so the decision carries who,
        through which channel (`via`) and with which kind of credential; a program's own decision names
        its maker, and is `code`'s.

        A loser gets `AlreadyDecided` carrying the winner; a principal the approval's rule does not admit
        gets `NotAnApprover` (an edit its own rule does not let it make, or a grant for every chat it may
        not make, too), a second decision the core's rule refuses `Spent` (a bearer credential used
        again) or `AlreadyVoted`, an edit the policy denies `EditRefused`, and an approval whose seal fails
        `Unproven`: every refusal is audited here, with the channel and the credential, so no surface
        audits (or forgets to audit) on its own.

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
            after, event = machine.decide(approval, decision, now, self._shared.keyring, edited)
            late = event.action == "expire"
            remembered = grant_for(after, now, self._shared.keyring.current)
            if remembered is None:
                return Change(approval=after, events=(event,))
            grant, grant_event = remembered
            return Change(approval=after, grant=grant, events=(event, grant_event))

        try:
            after = await self._apply(approval_id, step)
            if late:
                raise AlreadyDecided(after)
        except (NotAnApprover, IllegalTransition, EditRefused, Unproven) as refused:
            how = {"via": decision.via, "credential": decision.credential, "verdict": decision.verdict}
            await self._shared.record("refuse", approval_id, decision.by, why=str(refused), **how)
            raise
        return after

    async def consume(
        self,
        approval_id: str,
        call: ToolCall,
        actor: str,
        *,
        spends: str = "",
        outcome: CallOutcome | None = None,
    ) -> Approval:
        """Take the single-use claim to run `call` now, in this process (recorded as the claim's worker). A
        second claim raises `AlreadyConsumed`; one whose approving decisions carry no valid proof raises
        `Unproven`, audited.

        On a claim taken, record what rides on it instead (see `core.claim`): with `spends`, a bearer
        credential used on the run it let start (an MCP upstream's own input round), once, a second use
        raising `Spent`, audited; with `outcome`, how the call ended."""

        def step(approval: Approval) -> Change:
            now, keyring = self.clock(), self._shared.keyring
            if spends:
                return _one(*claim.spend(approval, call, spends, actor, now))
            if outcome is not None:
                return _one(*claim.finish(approval, call, outcome, actor, now))
            return _one(*claim.consume(approval, call, actor, now, keyring, self._shared.worker))

        try:
            return await self._apply(approval_id, step)
        except (Unproven, IllegalTransition) as refused:
            if isinstance(refused, Unproven | Spent):
                why = refused.why if isinstance(refused, Unproven) else str(refused)
                await self._shared.record("refuse", approval_id, actor, why=why, tool=call.tool)
            raise

    async def cancel(self, approval_id: str, actor: str, reason: str = "") -> Approval:
        return await self._apply(
            approval_id, lambda approval: _one(*machine.cancel(approval, actor, reason, self.clock()))
        )

    async def expire(self, approval_id: str) -> Approval:
        """Apply the deadline of one approval now; raises `IllegalTransition` if it is not due."""
        return await self._apply(
            approval_id, lambda approval: _one(*machine.expire(approval, self.clock(), self._shared.keyring))
        )

    async def expire_due(self) -> list[Approval]:
        """Expire every pending approval whose deadline has passed, applying each one's on_timeout.

        Every worker's sweeper calls this, but only the holder of the sweeper lease does the work, so
        workers don't all scan and race on the same approvals (a race they would lose cleanly anyway:
        an expiry is a transition like any other, and only one applies).
        """
        if not await self._shared.lease("sweeper"):
            return []
        due = await self._store.query(chat_id=None, state=State.PENDING, due_by=self.clock(), limit=None)
        expired = []
        for approval in due:
            try:
                expired.append(await self.expire(approval.id))
            except AlreadyDecided:
                continue
        return expired

    async def follow_up_due(self) -> list[Approval]:
        """Take every follow-up due now (a reminder, an escalation, a deadline warning: see
        `core.followup`), each a step written with its notices. As with `expire_due`, every worker's
        sweeper calls this and only the lease holder does the work; a step another took first is skipped."""
        if not await self._shared.lease("follow-ups"):
            return []
        now, taken = self.clock(), []
        for approval in await self._store.query(chat_id=None, state=State.PENDING, due_by=None, limit=None):
            step = due(
                approval.followups, created_at=approval.created_at, deadline=approval.deadline,
                escalate_at=approval.escalate_at, now=now,
            )  # fmt: skip
            if step is None:
                continue
            try:
                taken.append(await self._apply(approval.id, functools.partial(self._follow_up, step=step)))
            except IllegalTransition:  # decided, or taken, meanwhile
                continue
        return taken

    def _follow_up(self, approval: Approval, step: FollowUp) -> Change:
        return _one(*machine.follow_up(approval, step, self.clock()))

    async def wait(self, approval_id: str) -> Approval:
        """Wait until the approval leaves `pending`. Bound it with `asyncio.timeout`.

        The waiter subscribes before it reads, so a decision landing in between is never missed.
        """
        future = self._shared.notifier.subscribe(approval_id)
        try:
            current = await self.get(approval_id)
            if current.state is not State.PENDING:
                return current
            self._watch()
            return await future
        finally:
            self._shared.notifier.unsubscribe(approval_id, future)

    def _watch(self) -> None:
        """Someone here waits: a backend other processes write to needs watching for their decisions."""
        if self._shared.backend.shared:
            self._shared.watcher.watch()

    async def _apply(self, approval_id: str, step: Callable[[Approval], Change]) -> Approval:
        write = self._shared.committer.write
        approval = (await write(ApprovalKey(approval_id), lambda found: _told(step(found)))).approval
        assert approval is not None
        if approval.notify:
            self._shared.told.set()
        self._shared.notifier.notify(approval)
        return approval


def _told(change: Change) -> Change:
    """`change` with the notices its events make for the approval's channels, in the same write."""
    approval = change.approval
    if approval is None or not approval.notify:
        return change
    return replace(change, notices=notices_for(approval.notify, change.events))


def _one(approval: Approval, event: AuditEvent) -> Change:
    return Change(approval=approval, events=(event,))
