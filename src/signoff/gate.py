"""The gate: the single entry point every integration calls before a tool runs.

`authorize` runs policy → this call's own approval (a resume) → grants → a new approval and its approvers,
then waits. A **blocking** wait awaits the decision (from an approver, or any other channel through the
ledger); a **deferred** wait returns `Pending` at once and the same `authorize` later, with the same call,
picks the approval up again. `run` adds the single-use claim and the tool call itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Literal, TypedDict, TypeVar, Unpack

import msgspec

from signoff.approvers.callback import Approver, ApproverFailed, approver_name, call_approver
from signoff.core.approval import Approval, CallOutcome, State
from signoff.core.approval import Wait as Wait  # the gate's wait modes: every caller names them
from signoff.core.audit import TIMEOUT_ACTOR
from signoff.core.call import ToolCall
from signoff.core.claim import kept
from signoff.core.errors import (
    AlreadyConsumed,
    AlreadyDecided,
    AlreadyVoted,
    CallMismatch,
    EditRefused,
    InvalidDecision,
    NotAnApprover,
    SignoffError,
    Unproven,
)
from signoff.core.grant import Grant, unusable
from signoff.core.policy import Policy, Ruling
from signoff.core.task import Task
from signoff.ledger.base import Ledger
from signoff.tasks import Tasks

T = TypeVar("T")
log = logging.getLogger("signoff.gate")


class Allowed(msgspec.Struct, frozen=True, kw_only=True):
    """The call may run. `call` carries the arguments to run with: edited ones if a person edited them.

    `via` says what allowed it; when it is an approval, `approval_id` names the claim to consume.
    """

    call: ToolCall
    via: Literal["policy", "mode", "grant", "approval"]
    by: str
    approval_id: str | None = None


class Refused(msgspec.Struct, frozen=True, kw_only=True):
    """The call must not run. `message` is what an adapter hands to the model in place of a result.

    `by` is the id of whoever refused it, for the audit; `who` says it as a person reads it ("the user",
    "alice (finance)", "the deadline", "the policy"), and is all the model hears of it."""

    status: ClassVar[str] = "refused"
    call: ToolCall
    by: str
    reason: str = ""
    approval_id: str | None = None
    who: str = ""

    @property
    def message(self) -> str:
        return f"{self.status} by {self.who or self.by}: {self.reason or 'no reason given'}"

    def to_result(self) -> dict[str, str]:
        """The typed tool result a model gets instead of the tool's: it can tell why, and react."""
        who = self.who or self.by
        return {"status": self.status, "by": who, "reason": self.reason, "message": self.message}


class Denied(Refused, frozen=True, kw_only=True):
    """Refused by the policy, a mode, or a person."""

    status = "denied"


class Expired(Refused, frozen=True, kw_only=True):
    """Nobody decided before the deadline, and the policy denies on timeout."""

    status = "expired"


class Cancelled(Refused, frozen=True, kw_only=True):
    """The approval was withdrawn before anyone decided."""

    status = "cancelled"


class Pending(msgspec.Struct, frozen=True):
    """Deferred: the run should end here, and resume with the same call once the approval is decided."""

    approval: Approval


Outcome = Allowed | Denied | Expired | Cancelled | Pending


class AskOptions(TypedDict, total=False):
    """How a call is asked about, where its rule asks a person (see `Gate.authorize`)."""

    wait: Wait
    """`blocking` (the default) waits for the decision; `deferred` returns `Pending` at once."""
    approvers: Sequence[Approver] | None
    """The approvers to race for this call instead of the gate's own."""
    on_pending: Callable[[Approval], Awaitable[None] | None] | None
    requester: str
    schema: dict[str, Any] | None
    describe: str | None


_REFUSALS: dict[State, type[Denied] | type[Expired] | type[Cancelled]] = {
    State.DENIED: Denied,
    State.EXPIRED: Expired,
    State.CANCELLED: Cancelled,
}

# asyncio's timers may fire a hair before the wall clock the ledger checks deadlines against.
_CLOCK_SLACK = 0.005


class Gate:
    def __init__(
        self,
        ledger: Ledger,
        policy: Policy | None = None,
        approvers: Sequence[Approver] = (),
        *,
        actor: str = "signoff:gate",
    ) -> None:
        self.ledger = ledger
        self.policy = policy or Policy()
        self.approvers = tuple(approvers)
        self.actor = actor
        self.tasks = Tasks(ledger)
        """Runs the bodies of the long-running calls this gate allows."""
        self.stopping = False
        """Set while the process stops (a server's shutdown): the waits it cuts are no caller going away,
        so `on_abandon` does not cancel their approvals, which stay pending for another process to resume."""

    async def authorize(self, call: ToolCall, *, chat_id: str, **asking: Unpack[AskOptions]) -> Outcome:
        """Rule on `call` in `chat_id`, asking a person where the policy says so (see `AskOptions`).

        `requester` is the principal on whose behalf the call is made (a chat's owner): the approval
        records it, and its rule may let it decide or not (four eyes). `schema` is the tool's JSON Schema
        for its arguments: an edit must fit it. `describe` words the call for the person deciding, when
        the caller knows it better than the policy (a toolset that phrases its own calls).

        `on_pending` hears of the approval before any wait starts, so a transport can show the
        question while the caller blocks on the answer; if it returns an awaitable, the wait starts once
        that is done (a chat saves itself as waiting, so another worker can resume it if this one dies)."""
        requester, on_pending = asking.get("requester", ""), asking.get("on_pending")
        ruling = self.policy.evaluate(call)
        if ruling.action == "allow":
            via: Literal["policy", "mode"] = "mode" if ruling.rule.startswith("mode:") else "policy"
            return Allowed(call=call, via=via, by=ruling.rule)
        if ruling.action == "deny":
            return Denied(call=call, by=ruling.rule, reason=ruling.reason, who="the policy")

        approval = await self.ledger.approvals.find(chat_id, call.call_id)
        if approval is None:
            if grant := await self._granted(call, chat_id, ruling, requester):
                return await self._use(grant, call, chat_id)
            approval = await self.ledger.approvals.open(
                call,
                chat_id=chat_id,
                description=asking.get("describe") or ruling.description,
                rule=ruling.rule,
                deadline=ruling.deadline,
                on_timeout=ruling.on_timeout,
                actor=self.actor,
                requester=requester,
                authority=ruling.authority,
                schema=asking.get("schema"),
                notify=ruling.notify,
                escalate_after=ruling.escalate_after,
                followups=ruling.followups,
            )
        elif (approval.call.tool, approval.digest) != (call.tool, call.digest):
            await self._refuse_mismatch(approval, call)

        if approval.state is State.PENDING and on_pending is not None:
            heard = on_pending(approval)
            if heard is not None:
                await heard
        if approval.state is State.PENDING and asking.get("wait", "blocking") == "blocking":
            approvers = asking.get("approvers")
            chosen = self.approvers if approvers is None else approvers
            if chosen or approval.deadline is not None or ruling.on_abandon == "cancel":
                approval = await self._block(approval, ruling, chosen)
            else:  # nothing to race, time or clean up: the lightest wait, for the many-waiters case
                approval = await self.ledger.approvals.wait(approval.id)
        return await self._settle(approval)

    async def run(
        self,
        call: ToolCall,
        fn: Callable[..., T | Awaitable[T]],
        *,
        chat_id: str,
        **asking: Unpack[AskOptions],
    ) -> T | Refused | Pending:
        """Authorize, take the single-use claim, and call `fn(**args)` exactly once.

        A refusal comes back as a `Refused` whose `message` is ready for the model; `Pending` means the
        deferred run should end and be resumed later with the same call.
        """
        outcome = await self.claim(call, chat_id=chat_id, **asking)
        if not isinstance(outcome, Allowed):
            return outcome
        try:
            if inspect.iscoroutinefunction(fn):
                result: Any = await fn(**outcome.call.args)
            else:
                result = await asyncio.to_thread(fn, **outcome.call.args)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            await self._ended(outcome, ok=False, result=f"{type(exc).__name__}: {exc}")
            raise
        await self._ended(outcome, ok=True, result=result)
        return result  # type: ignore[no-any-return]

    async def _ended(self, allowed: Allowed, *, ok: bool, result: object) -> None:
        """Record how a call an approval's claim let run ended, so a continuation that finds the claim
        taken tells the model what happened (see `core.claim`). The call has run either way: a ledger
        that can't take the record now leaves its outcome unknown, which is the truth, and is logged."""
        if allowed.approval_id is None:
            return
        ended = kept(CallOutcome(ok=ok, result=result, at=self.ledger.approvals.clock()))
        try:
            await self.ledger.approvals.consume(allowed.approval_id, allowed.call, self.actor, outcome=ended)
        except SignoffError as exc:
            log.warning("the outcome of %s (approval %s) was not recorded: %s", allowed.call.tool,
                        allowed.approval_id, exc)  # fmt: skip

    async def start(
        self,
        call: ToolCall,
        fn: Callable[..., Awaitable[Any]],
        *,
        chat_id: str,
        interruptible: bool = True,
        **asking: Unpack[AskOptions],
    ) -> Task | Refused | Pending:
        """`run` for a long-running call: once allowed and claimed, `fn(**args)` runs in the background
        as a task (see `signoff.tasks`), and the task comes back at once, pending. A refused call never
        has a task."""
        outcome = await self.claim(call, chat_id=chat_id, **asking)
        if not isinstance(outcome, Allowed):
            return outcome
        allowed = outcome.call
        return await self.tasks.start(
            allowed, lambda: fn(**allowed.args), chat_id=chat_id, interruptible=interruptible
        )

    async def claim(self, call: ToolCall, *, chat_id: str, **asking: Unpack[AskOptions]) -> Outcome:
        """Authorize, and take the single-use claim of an approval that allowed the call: for a caller that
        runs the call itself, elsewhere (a Claude Code hook answers allow, and Claude Code runs it)."""
        outcome = await self.authorize(call, chat_id=chat_id, **asking)
        if isinstance(outcome, Allowed) and outcome.approval_id is not None:
            await self.ledger.approvals.consume(outcome.approval_id, outcome.call, actor=self.actor)
        return outcome

    # -- waiting ------------------------------------------------------------------------------------------

    async def _block(self, approval: Approval, ruling: Ruling, approvers: Sequence[Approver]) -> Approval:
        """Wait for the first decision from any channel, honouring the deadline.

        If the awaiting task is cancelled, the approval stays pending for another channel or a later
        resume, unless the policy's `on_abandon` says to cancel it and the process is not `stopping`.
        """
        timeout = (
            None
            if approval.deadline is None
            else approval.deadline - self.ledger.approvals.clock() + _CLOCK_SLACK
        )
        asks = [asyncio.ensure_future(self._ask(a, approval)) for a in approvers]
        try:
            async with asyncio.timeout(timeout):
                return await (self._race(approval, asks) if asks else self.ledger.approvals.wait(approval.id))
        except TimeoutError:
            return await self._expire(approval)
        except asyncio.CancelledError:
            if ruling.on_abandon == "cancel" and not self.stopping:
                with contextlib.suppress(AlreadyDecided):
                    await asyncio.shield(
                        self.ledger.approvals.cancel(approval.id, self.actor, "the waiting caller went away")
                    )
            raise
        finally:
            for ask in asks:
                ask.cancel()
            await asyncio.gather(*asks, return_exceptions=True)

    async def _race(self, approval: Approval, asks: Sequence[asyncio.Future[Approval | None]]) -> Approval:
        """The first approver to decide wins; one that abstains or fails leaves the others (and the ledger's
        other channels) in the race."""
        settled = asyncio.ensure_future(self.ledger.approvals.wait(approval.id))
        racing: set[asyncio.Future[Any]] = {settled, *asks}
        try:
            while True:
                done, racing = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    if (result := future.result()) is not None:
                        return result  # type: ignore[no-any-return]
        finally:
            settled.cancel()

    async def _ask(self, approver: Approver, approval: Approval) -> Approval | None:
        try:
            decision = await call_approver(approver, approval)
        except ApproverFailed as exc:
            await self.ledger.audit.record(
                "approver-failed", approval.id, approver_name(approver), error=str(exc)
            )
            return None
        if decision is None:
            return None
        try:
            approval = await self.ledger.approvals.decide(approval.id, decision, policy=self.policy)
        except AlreadyDecided as lost:
            return lost.winner
        except (NotAnApprover, AlreadyVoted, InvalidDecision, EditRefused, Unproven) as exc:  # not taken
            await self.ledger.audit.record(
                "approver-failed", approval.id, approver_name(approver), error=str(exc)
            )
            return None
        return None if approval.state is State.PENDING else approval  # one vote of a quorum: race on

    async def _expire(self, approval: Approval) -> Approval:
        try:
            return await self.ledger.approvals.expire(approval.id)
        except AlreadyDecided as lost:
            return lost.winner

    # -- outcomes -----------------------------------------------------------------------------------------

    async def _settle(self, approval: Approval) -> Outcome:
        if approval.is_due(self.ledger.approvals.clock()):
            approval = await self._expire(approval)
        match approval.state:
            case State.PENDING:
                return Pending(approval)
            case State.APPROVED:
                return Allowed(
                    call=approval.approved_call, via="approval", by=approval.by, approval_id=approval.id
                )
            case State.CONSUMED:
                raise AlreadyConsumed(approval)
            case state:
                return _REFUSALS[state](
                    call=approval.call, by=approval.by or TIMEOUT_ACTOR, reason=approval.reason,
                    approval_id=approval.id, who=approval.settled_by(),
                )  # fmt: skip

    async def _granted(self, call: ToolCall, chat_id: str, ruling: Ruling, requester: str) -> Grant | None:
        """The first grant that may answer for this call: one its maker could have given here, by the
        call's own rule and with the roles the maker has now (`core.grant.unusable`). Each one passed over
        is audited with why, so an operator sees why a remembered call was asked again."""
        for grant in await self.ledger.grants.matching(call, chat_id):
            maker = await self.ledger.principals.standing(grant.maker)
            if (why := unusable(grant, ruling.authority, maker, requester)) is None:
                return grant
            await self.ledger.audit.record(
                "unused", grant.id, self.actor, why=why, chat=chat_id, call=call.call_id
            )
        return None

    async def _use(self, grant: Grant, call: ToolCall, chat_id: str) -> Allowed:
        """A remembered approval covers this call: record that it was used, so the audit shows every run."""
        await self.ledger.audit.record(
            "use", grant.id, self.actor, chat=chat_id, call=call.call_id, tool=call.tool, digest=call.digest
        )
        return Allowed(call=call, via="grant", by=grant.created_by)

    async def _refuse_mismatch(self, approval: Approval, call: ToolCall) -> None:
        """A call id reused with other arguments is a forgery or a bug: audit it and refuse loudly."""
        await self.ledger.audit.record(
            "refuse", approval.id, self.actor, why="call mismatch", tool=call.tool, digest=call.digest
        )
        asked = approval.call.tool
        raise CallMismatch(
            f"call {call.call_id} in chat {approval.chat_id} was asked as {asked} with other args"
        )


__all__ = ["Allowed", "Cancelled", "Denied", "Expired", "Gate", "Outcome", "Pending", "Refused"]
