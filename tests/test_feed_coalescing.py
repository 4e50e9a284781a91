"""The live feeds over a real SQLite ledger: a reader that does not read holds one change per record it
follows, is never dropped, and then sees each record as it is now, never older than what it saw before;
a reader that keeps up sees every change, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.task import Task, TaskState, finish, start
from signoff.ledger import SqliteLedger
from signoff.ledger.records import Progress
from signoff.server.feed import ApprovalFeed, Feed, TaskFeed, Unread

R = TypeVar("R", Approval, Task)
RECORDS = 50
ROUNDS = 100  # every percentage from 1 to 100: 5,000 changes of 50 tasks
WAIT = 30.0  # seconds before a feed that never delivers fails the test rather than hangs it


async def following(feed: Feed[R], chat_id: str | None = None) -> tuple[AsyncIterator[R], R, Unread[R]]:
    """A reader of `feed` that has read the first record of its snapshot, and what it has not read yet."""
    before = set(feed._readers)
    reader = feed.follow(chat_id)
    first = await anext(reader)
    [unread] = feed._readers - before
    return reader, first, unread


async def read(reader: AsyncIterator[R], count: int) -> list[R]:
    async with asyncio.timeout(WAIT):
        return [await anext(reader) for _ in range(count)]


def forward_only(seen: list[Task]) -> bool:
    """Each task's states as a reader saw them, one after another, never older than the one before."""
    last: dict[str, Task] = {}
    for task in seen:
        before = last.get(task.id)
        if before is not None and (task.seq < before.seq or task.progress < before.progress):
            return False
        last[task.id] = task
    return True


async def test_a_reader_that_does_not_read_holds_one_change_per_task_and_then_sees_the_latest(
    tmp_path: Path,
) -> None:
    """While one reader stops reading, 5,000 changes of 50 tasks reach it (another reader sees each as it
    comes); it holds at most 50, stays subscribed, and then sees each task once, as it is now, in the order
    each first changed after it stopped (keeping a waiting task's place, not the last change's)."""
    async with SqliteLedger(tmp_path / "l.db") as ledger:
        ids = []
        for n in range(RECORDS):
            task = await ledger.tasks.create(
                ToolCall(f"c{n}", "export", {}), chat_id="c", worker="w", actor="a"
            )
            ids.append((await ledger.tasks.change(task.id, lambda t: start(t, ledger.tasks.clock()))).id)
        feed = TaskFeed(ledger, interval=0.05)
        await feed.start()
        try:
            slow, slow_first, unread = await following(feed)
            fast, fast_first, _ = await following(feed)
            fast_seen = [fast_first, *await read(fast, RECORDS - 1)]  # the snapshot: every task, at 0 %
            held = []
            for percent in range(1, ROUNDS + 1):
                order = ids if percent % 2 else ids[::-1]
                await ledger.tasks.report(
                    [Progress(task_id, percent, f"step {percent}") for task_id in order]
                )
                fast_seen += await read(fast, RECORDS)  # a reader that keeps up sees every change
                held.append(len(unread))
            assert [(t.id, t.progress) for t in fast_seen[RECORDS:]] == [
                (task_id, percent)
                for percent in range(1, ROUNDS + 1)
                for task_id in (ids if percent % 2 else ids[::-1])
            ]
            assert max(held) == RECORDS, "5,000 changes reached the idle reader: it held one per task"

            slow_seen = [slow_first, *await read(slow, RECORDS - 1 + RECORDS)]
            assert [t.progress for t in slow_seen[:RECORDS]] == [0] * RECORDS
            assert [(t.id, t.progress) for t in slow_seen[RECORDS:]] == [(i, ROUNDS) for i in ids]
            assert len(unread) == 0 and forward_only(slow_seen) and forward_only(fast_seen)

            assert unread in feed._readers, "never dropped: the next change still reaches it"
            done = await ledger.tasks.change(
                ids[-1], lambda t: finish(t, TaskState.COMPLETED, ledger.tasks.clock(), "w", result=1)
            )
            assert await read(slow, 1) == [done] and await read(fast, 1) == [done]
        finally:
            await feed.close()


async def test_a_reader_that_does_not_read_sees_each_approval_as_it_ended_never_pending_again(
    tmp_path: Path,
) -> None:
    """Approvals move from pending to approved to consumed while a reader does not read; it then sees each
    one once, consumed. A chat's reader holds that chat's approvals only."""
    async with SqliteLedger(tmp_path / "l.db") as ledger:
        opened: list[Approval] = []
        for n in range(RECORDS):
            call = ToolCall(f"c{n}", "pay", {"n": n})
            opened.append(
                await ledger.approvals.open(call, chat_id=f"chat{n % 2}", description="d", rule="r")
            )
        feed = ApprovalFeed(ledger, interval=0.05)
        await feed.start()
        try:
            slow, slow_first, unread = await following(feed)
            chat, chat_first, chat_unread = await following(feed, "chat0")
            fast, fast_first, _ = await following(feed)
            for approval in opened:
                await ledger.approvals.decide(approval.id, Decision.approve("alice"))
                await ledger.approvals.consume(approval.id, approval.call, "runner")
            latest: dict[str, State] = {fast_first.id: fast_first.state}
            async with asyncio.timeout(WAIT):
                while [latest.get(a.id) for a in opened] != [State.CONSUMED] * RECORDS:
                    approval = await anext(fast)
                    latest[approval.id] = approval.state
            assert len(unread) == RECORDS and len(chat_unread) == RECORDS // 2

            slow_seen = [slow_first, *await read(slow, RECORDS - 1 + RECORDS)]
            assert [a.state for a in slow_seen[:RECORDS]] == [State.PENDING] * RECORDS
            assert [(a.id, a.state) for a in slow_seen[RECORDS:]] == [(a.id, State.CONSUMED) for a in opened]
            chat_seen = [chat_first, *await read(chat, RECORDS // 2 - 1 + RECORDS // 2)]
            assert {a.chat_id for a in chat_seen} == {"chat0"}
            assert [a.state for a in chat_seen[RECORDS // 2 :]] == [State.CONSUMED] * (RECORDS // 2)
            assert len(unread) == len(chat_unread) == 0 and unread in feed._readers
        finally:
            await feed.close()


async def test_closing_the_feed_ends_its_readers_after_what_they_hold(tmp_path: Path) -> None:
    async with SqliteLedger(tmp_path / "l.db") as ledger:
        task = await ledger.tasks.create(ToolCall("c", "export", {}), chat_id="c", worker="w", actor="a")
        feed = TaskFeed(ledger, interval=0.05)
        await feed.start()
        reader, first, unread = await following(feed)
        watcher, _, _ = await following(feed)
        ran = await ledger.tasks.change(task.id, lambda t: start(t, ledger.tasks.clock()))
        assert await read(watcher, 1) == [ran] and len(unread) == 1  # the feed handed it to both
        await feed.close()
        assert first == task and [t async for t in reader] == [ran] and not len(unread)
