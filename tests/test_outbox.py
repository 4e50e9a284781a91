"""The outbox on every backend: a notice is written in the same write as the event that makes it, claimed
under a lease by one worker at a time, taken over when a lease runs out, and settled only by its holder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import NotFound, NoticeBusy, PolicyError
from signoff.core.policy import Policy, rule
from signoff.core.principal import Authority
from signoff.ledger import Ledger
from signoff.ledger.outbox import Outbox
from signoff.ledger.parts import Shared
from tests.conftest import FakeClock, drop, make_ledger

CHANNELS = ("webhook:ops", "email:finance")


async def ask(ledger: Ledger, call_id: str = "c1", notify: tuple[str, ...] = CHANNELS) -> str:
    approval = await ledger.approvals.open(
        ToolCall(call_id, "pay", {"amount": 700}),
        chat_id="chat",
        description="pay 700",
        rule="pay[0]",
        requester="alice",
        authority=Authority(approvers=("bob", "carol"), quorum=2),
        notify=notify,
    )
    return approval.id


async def test_each_told_event_writes_one_notice_per_channel(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    approval_id = await ask(clocked_ledger)
    opened = await clocked_ledger.outbox.query(approval_id=approval_id)
    assert sorted((n.channel, n.type, n.state) for n in opened) == [
        ("email:finance", "approval.requested", "pending"),
        ("webhook:ops", "approval.requested", "pending"),
    ]
    assert all(n.created_at == clock.now == n.next_at for n in opened)
    await ask(clocked_ledger, "again")  # asking the same call again tells nobody twice
    assert len(await clocked_ledger.outbox.query(approval_id=approval_id)) == 2

    await clocked_ledger.approvals.decide(approval_id, Decision(verdict="approve", by="bob"))
    assert len(await clocked_ledger.outbox.query(approval_id=approval_id)) == 2  # a vote short of the quorum
    await clocked_ledger.approvals.decide(approval_id, Decision(verdict="approve", by="carol"))
    decided = await clocked_ledger.outbox.query(approval_id=approval_id)
    assert [n.type for n in decided[2:]] == ["approval.decided"] * 2
    assert len({n.id for n in decided}) == 4


async def test_expiry_and_cancellation_are_told(clocked_ledger: Ledger, clock: FakeClock) -> None:
    first = await clocked_ledger.approvals.open(
        ToolCall("e", "pay", {}), chat_id="c", description="d", rule="r", deadline=5, notify=("webhook:ops",)
    )
    second = await ask(clocked_ledger, "x", ("webhook:ops",))
    clock.advance(6)
    await clocked_ledger.approvals.expire(first.id)
    await clocked_ledger.approvals.cancel(second, "alice", "changed my mind")
    told = [
        (n.approval_id, n.type) for n in await clocked_ledger.outbox.query() if n.type != "approval.requested"
    ]
    assert told == [(first.id, "approval.expired"), (second, "approval.cancelled")]


async def test_an_approval_with_no_channels_writes_no_notice(ledger: Ledger) -> None:
    approval_id = await ask(ledger, notify=())
    await ledger.approvals.decide(approval_id, Decision(verdict="deny", by="bob"))
    assert await ledger.outbox.query() == []


async def test_a_claim_holds_a_notice_for_one_worker_until_its_lease_runs_out(
    backend: str, tmp_path: Path, clock: FakeClock
) -> None:
    """Two workers on one ledger (two processes' holders): one claims, the other finds nothing until the
    lease runs out, then takes it over; the first, overtaken, can settle nothing."""
    async with make_ledger(backend, tmp_path, clock) as ledger:
        try:
            await ask(ledger, notify=("webhook:ops",))
            other = _another_worker(ledger)
            mine = await ledger.outbox.claim("webhook:ops", lease=30)
            assert [(n.attempts, n.holder) for n in mine] == [(1, ledger.outbox.holder)]
            assert await other.claim("webhook:ops") == []
            assert await ledger.outbox.claim("email:finance") == []  # another channel's line
            clock.advance(31)
            theirs = await other.claim("webhook:ops")
            assert [(n.id, n.attempts) for n in theirs] == [(mine[0].id, 2)]
            assert not await ledger.outbox.delivered(mine[0])  # overtaken: settles nothing
            assert await other.delivered(theirs[0])
            stored = await ledger.outbox.get(mine[0].id)
            assert (stored.state, stored.attempts, stored.delivered_at) == ("delivered", 2, clock.now)
            clock.advance(100)
            assert await other.claim("webhook:ops") == []  # delivered: never claimed again
        finally:
            await drop(ledger)


async def test_a_failed_attempt_waits_for_its_next_time_and_a_give_up_is_audited(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    approval_id = await ask(clocked_ledger, notify=("webhook:ops",))
    (notice,) = await clocked_ledger.outbox.claim("webhook:ops")
    assert await clocked_ledger.outbox.later(notice, clock.now + 5, "HTTP 500")
    assert await clocked_ledger.outbox.claim("webhook:ops") == []
    clock.advance(5)
    (again,) = await clocked_ledger.outbox.claim("webhook:ops")
    assert (again.attempts, again.last_error) == (2, "HTTP 500")
    assert await clocked_ledger.outbox.give_up(again, "gave up after 24h")
    assert (await clocked_ledger.outbox.get(notice.id)).state == "failed"
    assert await clocked_ledger.outbox.query(state="failed") == [await clocked_ledger.outbox.get(notice.id)]
    entry = (await clocked_ledger.audit.entries())[-1]
    assert (entry.action, entry.subject, entry.detail["notice"]) == ("notice-failed", approval_id, notice.id)

    retried = await clocked_ledger.outbox.retry(notice.id, "admin")
    assert (retried.state, retried.next_at) == ("pending", clock.now)
    assert [n.id for n in await clocked_ledger.outbox.claim("webhook:ops")] == [notice.id]
    assert (await clocked_ledger.audit.entries())[-1].action == "notice-retry"
    with pytest.raises(NoticeBusy):  # held by a worker right now
        await clocked_ledger.outbox.retry(notice.id, "admin")
    with pytest.raises(NotFound):
        await clocked_ledger.outbox.get("msg_nothing")


async def test_concurrent_claims_never_hand_one_notice_to_two_workers(ledger: Ledger) -> None:
    for index in range(40):
        await ask(ledger, f"c{index}", ("webhook:ops",))
    workers = [ledger.outbox, *(_another_worker(ledger) for _ in range(3))]
    claims = await asyncio.gather(*(w.claim("webhook:ops", limit=7) for w in workers for _ in range(3)))
    ids = [n.id for claim in claims for n in claim]
    assert len(ids) == len(set(ids)) == 40


def test_a_rule_names_channels_as_kind_and_name() -> None:
    assert rule("ask", notify=["webhook:ops", "slack:pay-ments"]).notify == ("webhook:ops", "slack:pay-ments")
    for bad in (["pager:ops"], ["webhook:"], "webhook:ops", ["webhook:ops", "webhook:ops"]):
        with pytest.raises(PolicyError, match="notify"):
            rule("ask", notify=bad)  # type: ignore[arg-type]
    policy = Policy.from_toml('[[tools.pay]]\naction = "ask"\nnotify = ["email:finance"]\n')
    assert policy.evaluate(ToolCall("c", "pay", {})).notify == ("email:finance",)


def _another_worker(ledger: Ledger) -> Outbox:
    """The same ledger's outbox as another process sees it: a holder of its own."""
    shared = Shared.__new__(Shared)
    shared.__dict__.update(ledger._shared.__dict__)
    shared.holder = "another-worker"
    return Outbox(shared)
