"""The ledger contract: the same behaviour from every backend."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.errors import ConnectionTimeout

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyConsumed,
    AlreadyDecided,
    AlreadyRevoked,
    CallMismatch,
    IllegalTransition,
    InvalidDecision,
    LedgerUnavailable,
    NotFound,
    StaleChat,
    Unstorable,
)
from signoff.core.policy import Policy
from signoff.ledger import Ledger, MemoryLedger, SqliteLedger, open_ledger
from signoff.ledger.postgres import SCHEMA_VERSION, PostgresLedger, upgrade
from signoff.ledger.records import Entries, ReplyFrames
from signoff.ledger.redis import RedisLedger
from signoff.ledger.sqlite.backend import CHECKPOINT_EVERY
from tests.conftest import POSTGRES, REDIS, FakeClock, drop

PAY = ToolCall("call_1", "process_payment", {"amount": 50, "currency": "USD", "recipient": "Hanako"})


async def ask(ledger: Ledger, call: ToolCall = PAY, chat_id: str = "chat-1", deadline: float | None = None):  # type: ignore[no-untyped-def]
    return await ledger.approvals.open(
        call, chat_id=chat_id, description="Pay 50 USD to Hanako", rule="r0", deadline=deadline
    )


async def test_open_get_find_and_list(ledger: Ledger) -> None:
    first = await ask(ledger)
    other = await ask(ledger, ToolCall("call_2", "get_location", {}), chat_id="chat-2")
    assert first.state is State.PENDING and first.digest == PAY.digest
    assert await ledger.approvals.get(first.id) == first
    assert await ledger.approvals.find("chat-1", "call_1") == first
    assert await ledger.approvals.find("chat-2", "call_1") is None
    assert [a.id for a in await ledger.approvals.query()] == [first.id, other.id]
    assert [a.id for a in await ledger.approvals.query(chat_id="chat-2")] == [other.id]
    await ledger.approvals.decide(first.id, Decision.approve("alice"))
    assert [a.id for a in await ledger.approvals.query(state="pending")] == [other.id]
    assert [a.id for a in await ledger.approvals.query(state=State.APPROVED)] == [first.id]
    with pytest.raises(NotFound):
        await ledger.approvals.get("apr_nope")


async def test_opening_the_same_call_again_returns_the_first_approval(ledger: Ledger) -> None:
    first = await ask(ledger)
    assert await ask(ledger) == first
    with pytest.raises(CallMismatch):
        await ask(ledger, PAY.with_args({"amount": 5000, "currency": "USD", "recipient": "Mallory"}))
    assert len(await ledger.approvals.query()) == 1


async def test_first_decision_wins(ledger: Ledger) -> None:
    approval = await ask(ledger)
    won = await ledger.approvals.decide(approval.id, Decision.deny("bob", "over budget"))
    assert won.state is State.DENIED and won.by == "bob" and won.reason == "over budget"
    with pytest.raises(AlreadyDecided) as lost:
        await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    assert lost.value.winner.by == "bob" and lost.value.winner.state is State.DENIED
    assert (await ledger.approvals.get(approval.id)).state is State.DENIED


async def test_consume_is_single_use_and_bound_to_the_call(ledger: Ledger) -> None:
    approval = await ask(ledger)
    with pytest.raises(IllegalTransition):
        await ledger.approvals.consume(approval.id, PAY, "runner")
    await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    with pytest.raises(CallMismatch):
        await ledger.approvals.consume(approval.id, PAY.with_args({"amount": 5000}), "runner")
    consumed = await ledger.approvals.consume(approval.id, PAY, "runner")
    assert consumed.state is State.CONSUMED and consumed.consumed_by == "runner"
    with pytest.raises(AlreadyConsumed):
        await ledger.approvals.consume(approval.id, PAY, "runner")


async def test_writers_queued_behind_a_cancelled_writer_still_commit(ledger: Ledger) -> None:
    """A writer with nothing in flight commits its own write, and the ones arriving meanwhile queue behind
    it. Cancelling it never strands theirs, and its own write lands whole or not at all."""
    calls = [ToolCall(f"w{i}", "pay", {"amount": i}) for i in range(4)]
    first = asyncio.create_task(ask(ledger, calls[0]))
    await asyncio.sleep(0)  # the first is committing now, alone
    queued = [asyncio.create_task(ask(ledger, call)) for call in calls[1:]]
    await asyncio.sleep(0)
    first.cancel()
    async with asyncio.timeout(10):
        opened = await asyncio.gather(*queued)
        await asyncio.gather(first, return_exceptions=True)
    assert [a.call.call_id for a in opened] == ["w1", "w2", "w3"]
    approvals = await ledger.approvals.query()
    count, broken = await ledger.audit.verify()
    assert broken is None and count == len(approvals) and len(approvals) in (3, 4)


async def test_concurrent_consumes_have_one_winner(ledger: Ledger) -> None:
    approval = await ask(ledger)
    await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    results = await asyncio.gather(
        *(ledger.approvals.consume(approval.id, PAY, f"r{i}") for i in range(20)), return_exceptions=True
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, AlreadyConsumed) for r in results if isinstance(r, BaseException))


async def test_a_burst_of_mixed_writes_lands_whole_and_in_one_chain(ledger: Ledger) -> None:
    """Concurrent writes of one process share batches on the shared backends: opens, repeated opens,
    decisions racing on one approval, grants and plain audit events all land, once each, in one chain."""
    calls = [ToolCall(f"call_{i}", PAY.tool, {**PAY.args, "amount": i}) for i in range(60)]
    opened = await asyncio.gather(*(ask(ledger, call) for call in calls + calls[:10]))
    assert len({a.id for a in opened}) == 60 and len(await ledger.approvals.query()) == 60
    racing = [ledger.approvals.decide(opened[0].id, Decision.approve(f"p{i}")) for i in range(10)]
    others = [
        ledger.approvals.decide(a.id, Decision.approve("alice", remember="session")) for a in opened[1:60]
    ]
    notes = [ledger.audit.record("note", f"n{i}", "tester") for i in range(20)]
    results = await asyncio.gather(*racing, *others, *notes, return_exceptions=True)
    assert sum(isinstance(r, AlreadyDecided) for r in results[:10]) == 9
    assert not [r for r in results[10:] if isinstance(r, BaseException)]
    assert len(await ledger.grants.query()) == 59
    count, broken = await ledger.audit.verify()
    # opens, one winner, the 9 losers refused (audited), decisions + grants, notes
    assert broken is None and count == 60 + 1 + 9 + 59 * 2 + 20


async def test_a_write_the_database_refuses_fails_alone() -> None:
    """A batch that PostgreSQL refuses is stored again one write at a time, so only the bad write fails,
    as a typed error (a NUL in a text column; which the server answers with a 400)."""
    async with PostgresLedger(POSTGRES, schema=f"test_{uuid.uuid4().hex[:12]}") as ledger:
        approval = await ask(ledger)
        bad, good = await asyncio.gather(
            ledger.audit.record("note", "s", "nul\x00actor"),
            ledger.approvals.decide(approval.id, Decision.approve("alice")),
            return_exceptions=True,
        )
        assert isinstance(bad, Unstorable) and "NUL" in str(bad)
        assert not isinstance(good, BaseException) and good.state is State.APPROVED
        assert (await ledger.audit.verify()) == (2, None)
    await drop(ledger)


async def test_edit_re_digests_and_only_the_edited_call_runs(ledger: Ledger) -> None:
    approval = await ask(ledger)
    edit = Decision.edit({"amount": 20, "currency": "USD"}, "alice")
    with pytest.raises(InvalidDecision, match="the policy must rule on it"):
        await ledger.approvals.decide(
            approval.id, edit
        )  # an edit is a new call: without a policy, nothing rules
    edited = await ledger.approvals.decide(approval.id, edit, policy=Policy())
    assert edited.approved_call.args == {"amount": 20, "currency": "USD"}
    with pytest.raises(CallMismatch):
        await ledger.approvals.consume(approval.id, PAY, "runner")
    assert (
        await ledger.approvals.consume(approval.id, edited.approved_call, "runner")
    ).state is State.CONSUMED


async def test_cancel(ledger: Ledger) -> None:
    approval = await ask(ledger)
    cancelled = await ledger.approvals.cancel(approval.id, "ops", "chat closed")
    assert (cancelled.state, cancelled.by, cancelled.reason) == (State.CANCELLED, "ops", "chat closed")
    with pytest.raises(AlreadyDecided):
        await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    with pytest.raises(AlreadyDecided):
        await ledger.approvals.cancel(approval.id, "ops")


async def test_expire_due_applies_each_on_timeout(clocked_ledger: Ledger, clock: FakeClock) -> None:
    ledger = clocked_ledger
    deny = await ask(ledger, deadline=5)
    allow = await ledger.approvals.open(
        ToolCall("call_2", "t", {}), chat_id="c", description="d", rule="r", deadline=5, on_timeout="allow"
    )
    later = await ask(ledger, ToolCall("call_3", "t", {}), deadline=60)
    never = await ask(ledger, ToolCall("call_4", "t", {}))
    clock.advance(4.9)
    assert await ledger.approvals.expire_due() == []
    clock.advance(0.2)
    expired = {a.id: a for a in await ledger.approvals.expire_due()}
    assert set(expired) == {deny.id, allow.id}
    assert expired[deny.id].state is State.EXPIRED
    assert expired[allow.id].state is State.APPROVED and expired[allow.id].by == "signoff:timeout"
    assert (await ledger.approvals.get(later.id)).state is State.PENDING
    assert (await ledger.approvals.get(never.id)).state is State.PENDING


async def test_a_late_decision_loses_to_the_deadline(clocked_ledger: Ledger, clock: FakeClock) -> None:
    approval = await ask(clocked_ledger, deadline=5)
    clock.advance(6)
    with pytest.raises(AlreadyDecided) as lost:
        await clocked_ledger.approvals.decide(approval.id, Decision.approve("alice"))
    assert lost.value.winner.state is State.EXPIRED
    assert (await clocked_ledger.approvals.get(approval.id)).state is State.EXPIRED


async def test_remembered_decisions_become_grants(ledger: Ledger) -> None:
    session = await ask(ledger)
    await ledger.approvals.decide(session.id, Decision.approve("alice", remember="session"))
    anywhere = await ask(ledger, ToolCall("call_2", "get_weather", {"city": "Tokyo"}))
    await ledger.approvals.decide(anywhere.id, Decision.approve("bob", remember="always", any_args=True))
    once = await ask(ledger, ToolCall("call_3", "get_location", {}))
    await ledger.approvals.decide(once.id, Decision.approve("carol"))

    grants = await ledger.grants.query()
    assert [(g.tool, g.scope, g.chat_id) for g in grants] == [
        ("process_payment", "session", "chat-1"),
        ("get_weather", "always", None),
    ]
    assert grants[0].digest == PAY.digest and grants[1].digest is None
    same_args_other_id = ToolCall("call_9", "process_payment", dict(PAY.args))
    assert (await ledger.grants.matching(same_args_other_id, "chat-1")) == [grants[0]]
    assert await ledger.grants.matching(same_args_other_id, "chat-2") == []
    assert await ledger.grants.matching(same_args_other_id.with_args({"amount": 51}), "chat-1") == []
    weather = ToolCall("c", "get_weather", {"city": "Oslo"})
    assert await ledger.grants.matching(weather, "chat-7") == [grants[1]]
    assert [g.id for g in await ledger.grants.query(chat_id="chat-2")] == [grants[1].id]

    revoked = await ledger.grants.revoke(grants[0].id, "alice")
    assert not revoked.active and revoked.revoked_by == "alice"
    assert await ledger.grants.matching(same_args_other_id, "chat-1") == []
    assert [g.id for g in await ledger.grants.query()] == [grants[1].id]
    assert len(await ledger.grants.query(active=False)) == 2
    with pytest.raises(AlreadyRevoked):
        await ledger.grants.revoke(grants[0].id, "alice")
    with pytest.raises(NotFound):
        await ledger.grants.revoke("grt_nope", "alice")


async def test_every_transition_is_audited_in_a_verifiable_chain(ledger: Ledger) -> None:
    approval = await ask(ledger)
    await ledger.approvals.decide(approval.id, Decision.approve("alice", remember="session"))
    await ledger.approvals.consume(approval.id, PAY, "runner")
    entries = await ledger.audit.entries()
    assert [(e.seq, e.action, e.actor, e.before, e.after) for e in entries] == [
        (1, "open", "signoff:gate", None, "pending"),
        (2, "approve", "alice", "pending", "approved"),
        (3, "grant", "alice", None, "active"),
        (4, "consume", "runner", "approved", "consumed"),
    ]
    assert entries[0].prev == "0" * 64
    assert all(b.prev == a.hash for a, b in itertools.pairwise(entries))
    assert await ledger.audit.verify() == (4, None)
    assert [e.seq for e in await ledger.audit.entries(after_seq=2, limit=1)] == [3]


async def test_a_waiter_wakes_when_the_decision_lands(ledger: Ledger) -> None:
    approval = await ask(ledger)
    waiter = asyncio.create_task(ledger.approvals.wait(approval.id))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    woken = await asyncio.wait_for(waiter, 1)
    assert woken.state is State.APPROVED and woken.by == "alice"


async def test_a_decision_before_the_wait_is_not_lost(ledger: Ledger) -> None:
    approval = await ask(ledger)
    await ledger.approvals.decide(approval.id, Decision.deny("bob", "no"))
    assert (await asyncio.wait_for(ledger.approvals.wait(approval.id), 1)).state is State.DENIED


async def test_a_cancelled_wait_leaves_the_approval_pending(ledger: Ledger) -> None:
    approval = await ask(ledger)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await ledger.approvals.wait(approval.id)
    assert (await ledger.approvals.get(approval.id)).state is State.PENDING
    assert ledger._shared.notifier.watched() == []


async def test_memory_waiters_wake_without_polling() -> None:
    """The memory ledger resolves the waiter's future inside decide(): no timer, no poll."""
    ledger = MemoryLedger()
    approval = await ask(ledger)
    waiter = asyncio.create_task(ledger.approvals.wait(approval.id))
    await asyncio.sleep(0)
    await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    await asyncio.sleep(0)
    assert waiter.done()


NO_SWEEP = 3600.0
"""A safety sweep put off past any test's end."""


async def parked(ledger: Ledger, approval_id: str, monkeypatch: pytest.MonkeyPatch) -> asyncio.Task[Approval]:
    """A waiter on `approval_id`, once `ledger`'s watcher listens and has read what it waits on: a decision
    from then on reaches it only as the backend hears of it, by PostgreSQL's NOTIFY, Redis pub/sub or
    SQLite's data_version (which the watcher reads every 50 ms: SQLite's only way to hear). The sweep that
    reads every waited-on approval each `poll_interval` on the other two, in case a message was dropped,
    is put off for an hour, so it is not what wakes the waiter."""
    backend = ledger._backend
    if not isinstance(ledger, SqliteLedger):
        monkeypatch.setattr(backend, "poll_interval", NO_SWEEP)
    decided, read = backend.approvals.decided, asyncio.Event()

    async def reading(approval_ids: list[str]) -> list[Approval]:  # the watcher's first look, once listening
        try:
            return await decided(approval_ids)
        finally:
            read.set()

    monkeypatch.setattr(backend.approvals, "decided", reading)
    waiter = asyncio.create_task(ledger.approvals.wait(approval_id))
    await read.wait()
    assert not waiter.done()
    return waiter


async def test_waiters_wake_for_decisions_from_another_ledger_instance(
    shared: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What another worker decides wakes this one's waiter as its backend hears of it: by NOTIFY, pub/sub
    or data_version, not by the PostgreSQL and Redis ledgers' safety sweep."""
    async with open_ledger(shared) as waiting, open_ledger(shared) as deciding:
        approval = await ask(waiting)
        waiter = await parked(waiting, approval.id, monkeypatch)
        await deciding.approvals.decide(approval.id, Decision.approve("alice"))
        woken = await waiter
        assert woken.by == "alice"


async def test_a_decision_too_big_for_a_notification_still_wakes_at_once(
    shared: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL notifications carry the decided record, but at most 8000 bytes: a bigger one sends the
    id, and the waiter's process reads the record, still without waiting for the safety sweep."""
    big = ToolCall("call_big", "upload", {"blob": "x" * 20_000})
    async with open_ledger(shared) as waiting, open_ledger(shared) as deciding:
        approval = await ask(waiting, big)
        waiter = await parked(waiting, approval.id, monkeypatch)
        await deciding.approvals.decide(approval.id, Decision.approve("alice"))
        woken = await waiter
        assert woken.by == "alice" and woken.call.args == big.args


async def test_only_one_worker_sweeps_deadlines_at_a_time(shared: str) -> None:
    async with open_ledger(shared) as one, open_ledger(shared) as two:
        approval = await ask(one, deadline=-1)
        assert [a.id for a in await one.approvals.expire_due()] == [approval.id]
        assert await two.approvals.expire_due() == []  # the lease is one's until it lapses
        late = await ask(two, ToolCall("call_late", PAY.tool, PAY.args), deadline=-1)
        assert await two.approvals.expire_due() == []
        assert [a.id for a in await one.approvals.expire_due()] == [late.id]


async def test_sqlite_keeps_everything_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteLedger(path) as ledger:
        approval = await ask(ledger)
    async with SqliteLedger(path) as ledger:
        assert (await ledger.approvals.get(approval.id)).state is State.PENDING
        await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    async with open_ledger(f"sqlite:///{path}") as ledger:
        assert (await ledger.approvals.get(approval.id)).state is State.APPROVED
        assert await ledger.audit.verify() == (2, None)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://x", "unsupported ledger URL"),
        ("redis://x/cache", "bad Redis ledger URL"),
        ("redis://x/0?colour=blue", "unknown option 'colour'"),
        ("sqlite://", "bad SQLite ledger URL"),
        ("sqlite://host/x.db", "bad SQLite ledger URL"),
        ("sqlite:///x.db?synchronous=sometimes", "synchronous must be normal or full"),
        ("sqlite:///x.db?colour=blue", "unknown option 'colour'"),
    ],
)
def test_bad_urls_are_clear_errors(url: str, message: str) -> None:
    with pytest.raises(LedgerUnavailable, match=message):
        open_ledger(url)


async def test_an_unreachable_postgres_is_a_clear_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one refused connection ends the start: no retry, and no timeout waited out."""
    connect = psycopg.AsyncConnection.connect
    attempts: list[tuple[Any, ...]] = []

    async def connecting(*args: Any, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        assert not attempts, "the ledger tried to connect again"
        attempts.append(args)
        return await connect(*args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", connecting)
    with pytest.raises(
        LedgerUnavailable, match=r"cannot reach PostgreSQL ledger .*host=127\.0\.0\.1 port=1"
    ) as failed:
        async with open_ledger("postgresql://nobody:secret@127.0.0.1:1/none"):
            pass
    assert len(attempts) == 1
    refused = failed.value.__cause__
    assert isinstance(refused, psycopg.OperationalError) and not isinstance(refused, ConnectionTimeout)
    assert "Connection refused" in str(refused)


CONNECT_TIMEOUT = 0.2


def one_connection(backend: str, pool_timeout: float) -> PostgresLedger | RedisLedger:
    """A networked ledger with a pool of one, reached within `CONNECT_TIMEOUT`."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    if backend == "postgres":
        return PostgresLedger(
            POSTGRES, schema=name, pool_size=1, connect_timeout=CONNECT_TIMEOUT, pool_timeout=pool_timeout
        )
    return RedisLedger(
        REDIS, prefix=name, pool_size=1, connect_timeout=CONNECT_TIMEOUT, pool_timeout=pool_timeout
    )


@contextlib.asynccontextmanager
async def held(ledger: PostgresLedger | RedisLedger) -> AsyncIterator[None]:
    """The ledger's only pooled connection taken, from before the body runs until after it."""
    if isinstance(ledger, PostgresLedger):
        async with ledger._backend.connection():
            yield
        return
    async with ledger._backend.turn():
        yield


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_a_call_queued_for_a_busy_pool_waits_longer_than_the_connect_timeout(backend: str) -> None:
    """A busy worker queues for its pool long before its server is slow: that queue is not an outage. The
    call waits for as long as the connection is busy, and runs once it is free."""
    async with one_connection(backend, pool_timeout=30) as ledger:
        approval = await ask(ledger)
        async with held(ledger):
            queued = asyncio.ensure_future(ledger.approvals.get(approval.id))
            await asyncio.sleep(3 * CONNECT_TIMEOUT)  # a wait bounded by connect_timeout would be over
            assert not queued.done()  # still queued: neither refused nor answered
        assert await queued == approval
    await drop(ledger)


POOL_TIMEOUT = {
    "postgres": "couldn't get a connection after 0.20 sec",
    "redis": "no connection came free within 0.2 s",
}
"""What each backend's pool says when no connection came free within its timeout."""


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_a_pool_busy_past_its_timeout_is_a_clear_error(backend: str) -> None:
    """A call that gets no connection within the pool timeout fails with a clear error while the connection
    is still busy, rather than waiting for it; the pool serves the next call once it is free."""
    async with one_connection(backend, pool_timeout=0.2) as ledger:
        approval = await ask(ledger)
        async with held(ledger):  # held until the call below has ended
            with pytest.raises(LedgerUnavailable, match=r"ledger .* failed") as failed:
                await ledger.approvals.get(approval.id)
        assert POOL_TIMEOUT[backend] in str(failed.value)
        assert await ledger.approvals.get(approval.id) == approval
    await drop(ledger)


async def test_a_postgres_url_picks_the_schema_and_upgrading_twice_is_safe() -> None:
    schema = f"test_{uuid.uuid4().hex[:12]}"
    async with open_ledger(f"{POSTGRES}?schema={schema}") as ledger:
        assert isinstance(ledger, PostgresLedger) and ledger.schema == schema
        approval = await ask(ledger)
        assert await upgrade(POSTGRES, schema) == (SCHEMA_VERSION, SCHEMA_VERSION)
        assert await ledger.approvals.get(approval.id) == approval
    await drop(ledger)


async def test_a_newer_postgres_schema_is_refused() -> None:
    schema = f"test_{uuid.uuid4().hex[:12]}"
    ledger = PostgresLedger(POSTGRES, schema=schema)
    assert await upgrade(POSTGRES, schema) == (0, SCHEMA_VERSION)
    async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("INSERT INTO {}.signoff_schema VALUES (%s)").format(sql.Identifier(schema)),
            (SCHEMA_VERSION + 1,),
        )
    with pytest.raises(LedgerUnavailable, match="newer than this signoff's"):
        await ledger.start()
    await drop(ledger)


async def test_an_unopenable_sqlite_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LedgerUnavailable, match="cannot open SQLite ledger"):
        async with open_ledger(f"sqlite:///{tmp_path}/missing/dir/x.db"):
            pass


async def test_an_unstarted_sqlite_ledger_says_so(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not started"):
        await SqliteLedger(tmp_path / "x.db").approvals.get("apr_x")


async def ticks_while(work: asyncio.Task[object], period: float = 0.01) -> int:
    """How many times a `period` sleep woke while `work` ran: a loop stalled by `work` barely ticks."""
    ticks = 0
    while not work.done():
        await asyncio.sleep(period)
        ticks += 1
    return ticks


async def test_sqlite_waits_for_another_writers_lock_off_the_event_loop(tmp_path: Path) -> None:
    """Writes run inline on the loop, but one that must wait for another process's write lock waits on
    the ledger's thread: the loop keeps serving, and the write lands whole once the lock is free."""
    path = tmp_path / "s.db"
    async with SqliteLedger(path) as ledger:
        approval = await ask(ledger)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # the CLI, say, in the middle of a write
        deciding = asyncio.create_task(ledger.approvals.decide(approval.id, Decision.approve("alice")))
        reading = asyncio.create_task(ledger.approvals.get(approval.id))  # queued behind the waiting write
        asyncio.get_running_loop().call_later(0.5, other.execute, "COMMIT")
        assert await ticks_while(deciding) >= 20  # the 0.5 s wait did not stall the loop
        assert (await deciding).state is State.APPROVED
        assert (await reading).state is State.APPROVED  # in order: it ran after the write
        assert (await ledger.approvals.get(approval.id)).state is State.APPROVED  # inline again
        other.close()
        assert await ledger.audit.verify() == (2, None)


async def test_sqlite_checkpoints_its_wal_as_it_goes(tmp_path: Path) -> None:
    """Automatic checkpoints are off for inline commits; the thread checkpoints instead, so the WAL is
    reused rather than growing with every commit."""
    path = tmp_path / "s.db"
    wal = path.with_name("s.db-wal")
    async with SqliteLedger(path) as ledger:
        sizes = []
        for round_ in range(4):
            for i in range(CHECKPOINT_EVERY):
                await ask(ledger, ToolCall(f"c{round_}-{i}", "t", {"i": i}))
            sizes.append(wal.stat().st_size)
        assert len(await ledger.approvals.query()) == 4 * CHECKPOINT_EVERY
    assert sizes[-1] <= sizes[0] * 1.5, sizes  # reused: 4 rounds of commits did not make it 4 times longer


async def test_sqlite_writes_only_the_entries_a_save_adds(tmp_path: Path) -> None:
    """A chat's history grows at its end: a save that keeps what the ledger holds inserts only the new
    entries, however many the chat has."""
    path = tmp_path / "s.db"
    async with SqliteLedger(path) as ledger:
        history = [b'{"m":%d}' % n for n in range(40)]
        await ledger.chats.save("c", b"{}", version=0, owner="alice", entries=Entries(0, history))
        with sqlite3.connect(path) as db:  # a trigger in the file notes each entry written
            db.executescript(
                "CREATE TABLE written (n INTEGER); CREATE TRIGGER note AFTER INSERT ON chat_entries"
                " BEGIN INSERT INTO written VALUES (new.n); END;"
            )
        await ledger.chats.save("c", b"{}", version=1, entries=Entries(40, [b'{"m":40}', b'{"m":41}']))
        loaded = await ledger.chats.load("c")
        assert loaded is not None and list(loaded.entries) == [*history, b'{"m":40}', b'{"m":41}']
        with sqlite3.connect(path) as db:
            assert [n for (n,) in db.execute("SELECT n FROM written")] == [40, 41]


async def test_callers_cancelled_mid_write_leave_no_transaction_open(tmp_path: Path) -> None:
    async with SqliteLedger(tmp_path / "s.db") as ledger:
        approvals = [await ask(ledger, ToolCall(f"c{i}", "t", {"i": i})) for i in range(30)]
        tasks = [
            asyncio.create_task(ledger.approvals.decide(a.id, Decision.approve("alice"))) for a in approvals
        ]
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with SqliteLedger(
            tmp_path / "s.db"
        ) as other:  # another connection can still take the write lock
            late = await ask(other, ToolCall("late", "t", {}))
            assert (await other.approvals.decide(late.id, Decision.deny("bob"))).state is State.DENIED
        states = [(await ledger.approvals.get(a.id)).state for a in approvals]
        assert set(states) <= {State.PENDING, State.APPROVED}
        count, broken = await ledger.audit.verify()
        assert broken is None and count == 30 + states.count(State.APPROVED) + 2


async def test_last_seq_is_where_a_feed_of_new_entries_starts(ledger: Ledger) -> None:
    assert await ledger.audit.last_seq() == 0
    approval = await ask(ledger)
    await ledger.approvals.decide(approval.id, Decision.approve("alice"))
    entries = await ledger.audit.entries()
    assert await ledger.audit.last_seq() == entries[-1].seq == 2


async def test_a_chats_entries_change_with_its_saves_and_only_with_them(ledger: Ledger) -> None:
    """Entries are kept, appended to, cut back, or left as they are, in the same write as the state; a
    stale save changes neither. A caller holding the version gets neither state nor entries back."""
    one, two, three = b'{"n":1}', b'{"n":2}', '{"n":"\u00e9"}'.encode()
    await ledger.chats.save("c1", b"s1", version=0, owner="alice", entries=Entries(0, [one, two]))
    loaded = await ledger.chats.load("c1")
    assert loaded is not None and (loaded.state, list(loaded.entries)) == (b"s1", [one, two])
    await ledger.chats.save("c1", b"s2", version=1, entries=Entries(2, [three]))
    assert list((await ledger.chats.load("c1")).entries) == [one, two, three]  # type: ignore[union-attr]
    await ledger.chats.save("c1", b"s3", version=2)  # no change: they stay
    assert list((await ledger.chats.load("c1")).entries) == [one, two, three]  # type: ignore[union-attr]
    await ledger.chats.save("c1", b"s4", version=3, entries=Entries(1, [three]))  # a reply regenerated
    assert list((await ledger.chats.load("c1")).entries) == [one, three]  # type: ignore[union-attr]
    with pytest.raises(StaleChat):
        await ledger.chats.save("c1", b"lost", version=3, entries=Entries(0, [two]))
    with pytest.raises(StaleChat):  # a chat started twice: the second start changes nothing either
        await ledger.chats.save("c1", b"lost", version=0, owner="bob", entries=Entries(0, [two]))
    loaded = await ledger.chats.load("c1")
    assert loaded is not None and (loaded.state, list(loaded.entries), loaded.owner) == (
        b"s4",
        [one, three],
        "alice",
    )
    await ledger.chats.save("c1", b"s5", version=4, entries=Entries(0))
    loaded = await ledger.chats.load("c1")
    assert loaded is not None and (loaded.version, list(loaded.entries)) == (5, [])
    await ledger.chats.save("c1", b"s6", version=5, entries=Entries(0, [two]))
    if not isinstance(ledger, MemoryLedger):  # the memory ledger has nothing to leave out
        held = await ledger.chats.load("c1", held=6)
        assert held is not None and (held.version, held.state, list(held.entries)) == (6, b"", [])
    other = await ledger.chats.load("c1", held=5)
    assert other is not None and (other.state, list(other.entries)) == (b"s6", [two])
    await ledger.chats.save("c2", b"{}", version=0)
    assert list((await ledger.chats.load("c2")).entries) == []  # type: ignore[union-attr]


async def test_chat_state_saves_only_over_the_version_it_read(ledger: Ledger) -> None:
    assert await ledger.chats.load("c1") is None
    first = await ledger.chats.save("c1", b"one", version=0)
    assert (first.version, first.state) == (1, b"one")
    with pytest.raises(StaleChat):
        await ledger.chats.save("c1", b"lost", version=0)
    second = await ledger.chats.save("c1", b"two", version=1)
    with pytest.raises(StaleChat):
        await ledger.chats.save("c1", b"stale", version=1)
    loaded = await ledger.chats.load("c1")
    assert loaded is not None and (loaded.version, loaded.state) == (second.version, b"two")
    assert await ledger.chats.load("c2") is None


async def test_a_reply_log_is_read_from_any_point_and_ends_once(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    ledger = clocked_ledger
    assert await ledger.chats.reply_log("c1") is None
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", 0, [b"a", b"b"], meta=b'{"prompt": 1}')])
    await ledger.chats.log_replies(
        [ReplyFrames("c1", "r1", 1, [b"b", b"c"])]
    )  # a retry of frame 2: not doubled
    log = await ledger.chats.reply_log("c1")
    assert log is not None
    assert (log.reply, log.meta, log.done, log.frames) == ("r1", b'{"prompt": 1}', False, [b"a", b"b", b"c"])
    clock.advance(5)
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", 3, done=True)])  # the end, and a heartbeat
    log = await ledger.chats.reply_log("c1", after=2)
    assert log is not None and log.done and log.frames == [b"c"] and log.updated_at == clock()


async def test_a_new_reply_replaces_the_log_and_the_old_writer_is_shut_out(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    ledger = clocked_ledger
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", 0, [b"old"], meta=b"")])
    await ledger.chats.log_replies([ReplyFrames("c1", "r2", meta=b"m2"), ReplyFrames("c2", "r3", meta=b"")])
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", 1, [b"late"], done=True)])
    log = await ledger.chats.reply_log("c1")
    assert log is not None and (log.reply, log.meta, log.frames, log.done) == ("r2", b"m2", [], False)
    clock.advance(100)
    await ledger.chats.log_replies([ReplyFrames("c2", "r3", 0, [b"fresh"])])
    assert await ledger.chats.forget_replies(before=clock() - 60) == 1
    assert await ledger.chats.reply_log("c1") is None and await ledger.chats.reply_log("c2") is not None
