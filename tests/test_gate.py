"""The gate: policy → this call's approval → grants → approvers, in blocking and deferred waits."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import AlreadyConsumed, CallMismatch
from signoff.core.policy import Policy
from signoff.gate import Allowed, Cancelled, Denied, Expired, Gate, Pending, Refused
from signoff.ledger import Ledger
from tests.conftest import FakeClock

PAY = ToolCall("call_1", "process_payment", {"amount": 50, "currency": "USD", "recipient": "Hanako"})
POLICY = Policy.from_dict(
    {
        "tools": {
            "get_weather": [{"action": "allow"}],
            "delete_everything": [{"action": "deny"}],
            "process_payment": [{"action": "ask", "description": "Pay {amount} {currency} to {recipient}"}],
        }
    }
)


def approve(by: str = "alice", **kw: Any) -> Any:
    def approver(approval: Approval) -> Decision:
        return Decision.approve(by, **kw)

    return approver


async def test_policy_allow_and_deny_need_no_approval(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    allowed = await gate.authorize(ToolCall("c1", "get_weather", {"city": "Tokyo"}), chat_id="chat")
    assert isinstance(allowed, Allowed) and allowed.via == "policy"
    denied = await gate.authorize(ToolCall("c2", "delete_everything", {}), chat_id="chat")
    assert isinstance(denied, Denied) and denied.message.startswith("denied by the policy")
    assert await ledger.approvals.query() == []


async def test_blocking_with_a_sync_approver(ledger: Ledger) -> None:
    seen: list[str] = []

    def approver(approval: Approval) -> Decision:
        seen.append(approval.description)
        return Decision.approve("alice", "ok")

    outcome = await Gate(ledger, POLICY, [approver]).authorize(PAY, chat_id="chat")
    assert isinstance(outcome, Allowed) and outcome.via == "approval" and outcome.by == "alice"
    assert seen == ["Pay 50 USD to Hanako"]
    assert (await ledger.approvals.get(outcome.approval_id or "")).state is State.APPROVED


async def test_sync_approvers_do_not_block_the_event_loop(ledger: Ledger) -> None:
    release = threading.Event()

    def slow_person(approval: Approval) -> Decision:
        release.wait(5)
        return Decision.approve("slow")

    task = asyncio.create_task(Gate(ledger, POLICY, [slow_person]).authorize(PAY, chat_id="chat"))
    await asyncio.sleep(0.05)  # the loop still runs while the prompt blocks its thread
    assert not task.done()
    release.set()
    assert isinstance(await task, Allowed)


async def test_fan_out_first_answer_wins_and_the_rest_are_cancelled(ledger: Ledger) -> None:
    slow_cancelled = asyncio.Event()

    async def slow(approval: Approval) -> Decision:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            slow_cancelled.set()
            raise
        return Decision.approve("slow")

    async def fast(approval: Approval) -> Decision:
        await asyncio.sleep(0.01)
        return Decision.deny("fast", "not today")

    outcome = await Gate(ledger, POLICY, [slow, fast]).authorize(PAY, chat_id="chat")
    assert isinstance(outcome, Denied) and outcome.by == "fast" and outcome.reason == "not today"
    assert slow_cancelled.is_set()


async def test_an_approver_that_raises_is_a_failure_not_an_approval(ledger: Ledger) -> None:
    async def broken(approval: Approval) -> Decision:
        raise RuntimeError("webhook down")

    async def person(approval: Approval) -> Decision:
        await asyncio.sleep(0.02)
        return Decision.deny("bob", "no")

    outcome = await Gate(ledger, POLICY, [broken, person]).authorize(PAY, chat_id="chat")
    assert isinstance(outcome, Denied) and outcome.by == "bob"
    failures = [e for e in await ledger.audit.entries() if e.action == "approver-failed"]
    assert len(failures) == 1 and "webhook down" in failures[0].detail["error"]


async def test_an_approver_returning_junk_is_a_failure(ledger: Ledger) -> None:
    gate = Gate(
        ledger, Policy.from_dict({"tools": {"process_payment": [{"action": "ask", "deadline": 0.2}]}})
    )
    outcome = await gate.authorize(PAY, chat_id="chat", approvers=[lambda a: True])  # type: ignore[list-item,return-value]
    assert isinstance(outcome, Expired)
    assert any(
        e.action == "approver-failed" and "bool" in e.detail["error"] for e in await ledger.audit.entries()
    )


async def test_abstaining_approvers_leave_the_decision_to_other_channels(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY, [lambda approval: None])
    task = asyncio.create_task(gate.authorize(PAY, chat_id="chat"))
    await asyncio.sleep(0.05)
    (approval,) = await ledger.approvals.query(state="pending")
    await ledger.approvals.decide(approval.id, Decision.approve("inbox:carol"))
    outcome = await asyncio.wait_for(task, 1)
    assert isinstance(outcome, Allowed) and outcome.by == "inbox:carol"


class Timeline:
    """The ledger's fake clock and the event loop's clock made one, standing still until `advance` moves
    both: an asyncio timer armed for a deadline fires once the ledger's clock has passed it and not before,
    however fast or slow the machine is."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.loop = asyncio.get_running_loop()
        self.now = self.loop.time()

    def __enter__(self) -> Timeline:
        self.loop.time = lambda: self.now  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.loop.time  # the loop's own clock again

    async def advance(self, seconds: float) -> None:
        """Move both clocks on, and let the loop run whatever that made due."""
        self.now += seconds
        self.clock.advance(seconds)
        for _ in range(5):  # a due timer's callback, then the task it wakes, then that task's next step
            await asyncio.sleep(0)


async def test_the_deadline_wakes_the_blocking_wait_and_expires_it_not_before(
    clocked_ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no approver and nobody deciding, only the gate's own timer, armed for the deadline by the
    ledger's clock, can end the wait: it must end it expired once the deadline has passed, and no sooner."""
    ledger = clocked_ledger
    policy = Policy.from_dict({"tools": {"process_payment": [{"action": "ask", "deadline": "200ms"}]}})
    get, expire = ledger.approvals.get, ledger.approvals.expire
    parked = asyncio.Event()
    woke: list[float] = []
    """The ledger's clock each time the gate gave up waiting and expired the approval."""

    async def reading(approval_id: str) -> Approval:  # the wait's read, its last step before it parks
        try:
            return await get(approval_id)
        finally:
            parked.set()

    async def expiring(approval_id: str) -> Approval:
        woke.append(clock())
        return await expire(approval_id)

    monkeypatch.setattr(ledger.approvals, "get", reading)
    monkeypatch.setattr(ledger.approvals, "expire", expiring)
    with Timeline(clock) as timeline:
        waiting = asyncio.create_task(Gate(ledger, policy).authorize(PAY, chat_id="chat"))
        try:
            await parked.wait()
            (approval,) = await ledger.approvals.query()
            assert approval.deadline == clock() + 0.2
            await timeline.advance(0.199)
            assert (await get(approval.id)).state is State.PENDING
            assert woke == [] and not waiting.done()  # 1 ms before the deadline, the wait still waits
            await timeline.advance(0.051)  # 50 ms past the deadline, at the latest, it is over
            assert woke == [clock()]  # the gate's timer woke it, and it expired the approval at once
            outcome = await waiting
        finally:  # a failed check leaves no waiter behind
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
    assert isinstance(outcome, Expired) and outcome.by == "signoff:timeout"
    assert "deadline" in outcome.message and outcome.approval_id == approval.id
    expired = await get(approval.id)
    assert expired.state is State.EXPIRED and expired.decided_at == clock() > approval.deadline


async def test_on_timeout_allow_lets_the_call_run(ledger: Ledger) -> None:
    policy = Policy.from_dict(
        {"tools": {"process_payment": [{"action": "ask", "deadline": 0.05, "on_timeout": "allow"}]}}
    )
    result = await Gate(ledger, policy).run(PAY, lambda **args: "paid", chat_id="chat")
    assert result == "paid"


@pytest.mark.parametrize(("mode", "expected"), [("approve_all", Allowed), ("strict", Denied)])
async def test_modes_never_call_the_approvers(ledger: Ledger, mode: str, expected: type) -> None:
    called: list[Approval] = []
    policy = Policy.from_dict(
        {
            "mode": mode,
            "tools": {
                "delete_everything": [{"action": "deny"}],
                "transfer": [{"action": "deny", "when": "amount > 10"}, {"action": "allow"}],
            },
        }
    )
    gate = Gate(ledger, policy, [called.append])  # type: ignore[list-item]
    assert isinstance(await gate.authorize(PAY, chat_id="chat"), expected)
    assert isinstance(await gate.authorize(ToolCall("c2", "delete_everything", {}), chat_id="chat"), Denied)
    broken_condition = ToolCall("c3", "transfer", {"amount": "lots"})
    assert isinstance(await gate.authorize(broken_condition, chat_id="chat"), Denied)
    assert called == [] and await ledger.approvals.query() == []


async def abandon(gate: Gate) -> Approval:
    """Start a blocking wait, let it park, cancel the waiting task; return the approval it left behind."""
    task = asyncio.create_task(gate.authorize(PAY, chat_id="chat"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (approval,) = await gate.ledger.approvals.query()
    return approval


async def test_cancelling_the_waiter_leaves_the_approval_pending_for_a_later_resume(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    approval = await abandon(gate)
    assert approval.state is State.PENDING
    await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    resumed = await gate.authorize(PAY, chat_id="chat", wait="deferred")
    assert isinstance(resumed, Allowed) and resumed.approval_id == approval.id


async def test_on_abandon_cancel_withdraws_the_approval(ledger: Ledger) -> None:
    policy = Policy.from_dict({"tools": {"process_payment": [{"action": "ask", "on_abandon": "cancel"}]}})
    approval = await abandon(Gate(ledger, policy))
    assert approval.state is State.CANCELLED
    assert isinstance(await Gate(ledger, policy).authorize(PAY, chat_id="chat", wait="deferred"), Cancelled)


async def test_deferred_returns_pending_then_resumes_with_the_same_call(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY, [approve()])
    ran: list[dict[str, Any]] = []
    first = await gate.run(PAY, lambda **args: ran.append(args), chat_id="chat", wait="deferred")
    assert isinstance(first, Pending) and first.approval.state is State.PENDING and ran == []
    assert isinstance(await gate.run(PAY, ran.append, chat_id="chat", wait="deferred"), Pending)
    await ledger.approvals.decide(first.approval.id, Decision.approve("bob"))
    await gate.run(PAY, lambda **args: ran.append(args), chat_id="chat", wait="deferred")
    assert ran == [PAY.args]
    with pytest.raises(AlreadyConsumed):
        await gate.run(PAY, lambda **args: ran.append(args), chat_id="chat", wait="deferred")
    assert ran == [PAY.args]


async def test_a_deferred_approval_can_be_waited_on_blocking(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    pending = await gate.authorize(PAY, chat_id="chat", wait="deferred")
    assert isinstance(pending, Pending)
    task = asyncio.create_task(gate.authorize(PAY, chat_id="chat", wait="blocking"))
    await asyncio.sleep(0.02)
    await ledger.approvals.decide(pending.approval.id, Decision.deny("bob", "no"))
    assert isinstance(await asyncio.wait_for(task, 1), Denied)


async def test_a_resumed_call_with_other_arguments_is_refused_and_audited(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    pending = await gate.authorize(PAY, chat_id="chat", wait="deferred")
    assert isinstance(pending, Pending)
    await ledger.approvals.decide(pending.approval.id, Decision.approve("alice"))
    forged = PAY.with_args({"amount": 5000, "currency": "USD", "recipient": "Mallory"})
    with pytest.raises(CallMismatch):
        await gate.run(forged, lambda **args: "paid", chat_id="chat", wait="deferred")
    refusals = [e for e in await ledger.audit.entries() if e.action == "refuse"]
    assert len(refusals) == 1 and refusals[0].detail["digest"] == forged.digest
    assert (await ledger.approvals.get(pending.approval.id)).state is State.APPROVED


async def test_run_executes_exactly_once_and_refusals_carry_the_reason(ledger: Ledger) -> None:
    runs: list[float] = []

    async def pay(amount: float, currency: str, recipient: str) -> str:
        runs.append(amount)
        return f"paid {amount} {currency} to {recipient}"

    gate = Gate(ledger, POLICY)
    assert await gate.run(PAY, pay, chat_id="chat", approvers=[approve()]) == "paid 50 USD to Hanako"
    refused = await gate.run(
        ToolCall("call_2", "process_payment", {"amount": 1, "currency": "USD", "recipient": "Eve"}),
        pay,
        chat_id="chat",
        approvers=[lambda a: Decision.deny("bob", "Eve is not a customer")],
    )
    assert isinstance(refused, Refused) and refused.message == "denied by bob: Eve is not a customer"
    assert runs == [50]
    assert [e.action for e in await ledger.audit.entries()].count("consume") == 1


async def test_edited_arguments_are_what_runs(ledger: Ledger) -> None:
    edit = lambda a: Decision.edit({**a.call.args, "amount": 20}, "alice")  # noqa: E731
    result = await Gate(ledger, POLICY, [edit]).run(PAY, lambda **args: args, chat_id="chat")
    assert result == {"amount": 20, "currency": "USD", "recipient": "Hanako"}


async def test_grants_skip_the_question_within_their_scope(ledger: Ledger) -> None:
    asked: list[str] = []

    def person(approval: Approval) -> Decision:
        asked.append(approval.call.call_id)
        return Decision.approve("alice", remember="session")

    gate = Gate(ledger, POLICY, [person])
    assert isinstance(await gate.authorize(PAY, chat_id="chat-1"), Allowed)
    again = await gate.authorize(ToolCall("call_2", PAY.tool, dict(PAY.args)), chat_id="chat-1")
    assert isinstance(again, Allowed) and again.via == "grant" and again.by == "alice"
    assert isinstance(
        await gate.authorize(ToolCall("call_3", PAY.tool, dict(PAY.args)), chat_id="chat-2"), Allowed
    )
    assert asked == ["call_1", "call_3"]
    assert [e.action for e in await ledger.audit.entries()].count("use") == 1


async def test_nested_gated_calls_with_async_approvers(ledger: Ledger) -> None:
    async def person(approval: Approval) -> Decision:
        await asyncio.sleep(0.001)
        return Decision.approve(f"approver-of-{approval.call.tool}")

    gate = Gate(ledger, Policy(), [person])

    async def inner(x: int) -> int:
        return x * 2

    async def outer(x: int) -> Any:
        return await gate.run(ToolCall("inner_1", "inner", {"x": x}), inner, chat_id="chat")

    assert await gate.run(ToolCall("outer_1", "outer", {"x": 21}), outer, chat_id="chat") == 42
    assert {a.call.tool: a.state for a in await ledger.approvals.query()} == {
        "outer": State.CONSUMED,
        "inner": State.CONSUMED,
    }
