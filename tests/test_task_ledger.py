"""The task record (seed 004) on every ledger backend: lifecycle, progress, cancel, feed order, sweeping."""

from __future__ import annotations

import asyncio

import pytest

from signoff.core.audit import AuditEvent
from signoff.core.call import ToolCall
from signoff.core.errors import InvalidCall, NotFound, TaskFinished
from signoff.core.task import NOTE, Task, TaskState, finish, request_cancel, start, valid_progress, with_note
from signoff.ledger import Ledger
from signoff.ledger.records import Progress
from tests.conftest import FakeClock

CALL = ToolCall("call_1", "export_report", {"name": "q3"})


def test_the_note_is_the_seeds_verbatim_and_appended_once() -> None:
    assert NOTE == (
        "NOTE: This is a long-running operation. Do not call this tool again if it has already returned"
        " some intermediate or pending status."
    )
    assert with_note("Export a report.") == "Export a report.\n\n" + NOTE
    assert with_note(with_note("Export a report.")) == "Export a report.\n\n" + NOTE
    assert with_note("") == NOTE
    assert with_note(None) == NOTE
    assert with_note(NOTE) == NOTE


@pytest.mark.parametrize("bad", [-1, 101, "50", None, True, float("nan")])
def test_progress_must_be_a_percentage(bad: object) -> None:
    with pytest.raises(ValueError, match="progress must be a number from 0 to 100"):
        valid_progress(bad)


async def test_a_task_runs_from_pending_to_completed(ledger: Ledger) -> None:
    task = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="signoff:gate")
    assert (task.state, task.progress, task.worker) == (TaskState.PENDING, 0, "w1")
    assert task.status() == {"status": "pending", "task_id": task.id, "progress": 0}
    assert task.id.startswith("task_") and len(task.id) > 20

    running = await ledger.tasks.change(task.id, lambda t: start(t, ledger.tasks.clock()))
    assert running.state is TaskState.RUNNING and running.started_at is not None
    assert await ledger.tasks.report([Progress(task.id, 40, "rendering")]) == []
    seen = await ledger.tasks.get(task.id)
    assert (seen.progress, seen.message) == (40, "rendering")
    assert seen.status() == {
        "status": "processing",
        "task_id": task.id,
        "progress": 40,
        "message": "rendering",
    }

    done = await ledger.tasks.change(
        task.id, lambda t: finish(t, TaskState.COMPLETED, ledger.tasks.clock(), "w1", result={"rows": 3})
    )
    assert done.status() == {
        "status": "completed",
        "task_id": task.id,
        "progress": 100,
        "message": "rendering",
        "result": {"rows": 3},
    }
    assert (await ledger.tasks.get(task.id)) == done
    with pytest.raises(TaskFinished, match="already completed"):
        await ledger.tasks.change(task.id, lambda t: request_cancel(t, "someone", "", ledger.tasks.clock()))
    actions = [e.action for e in await ledger.audit.entries() if e.subject == task.id]
    assert actions == ["task-create", "task-start", "task-completed"]


async def test_a_task_change_and_its_audit_entry_are_stored_together(ledger: Ledger) -> None:
    """An entry that cannot be recorded takes its change down with it: no task moves unaudited."""
    task = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="a")

    def unrecordable(t: Task) -> tuple[Task, AuditEvent]:
        event = AuditEvent(at=1.0, actor="a", action="task-start", subject=t.id, detail={"x": object()})
        return start(t, ledger.tasks.clock())[0], event

    with pytest.raises(InvalidCall, match="object is not JSON"):
        await ledger.tasks.change(task.id, unrecordable)
    assert await ledger.tasks.get(task.id) == task
    assert [e.action for e in await ledger.audit.entries() if e.subject == task.id] == ["task-create"]
    started = await ledger.tasks.change(task.id, lambda t: start(t, ledger.tasks.clock()))
    assert started.state is TaskState.RUNNING and started.seq == await ledger.tasks.last_seq()


async def test_many_concurrent_task_changes_share_commits_and_each_is_audited_once(ledger: Ledger) -> None:
    first = await ledger.tasks.last_seq()
    calls = [ToolCall(f"call_{n}", "export_report", {}) for n in range(60)]
    tasks = await asyncio.gather(
        *(ledger.tasks.create(c, chat_id="c1", worker="w1", actor="a") for c in calls)
    )
    again = await asyncio.gather(
        *(ledger.tasks.create(c, chat_id="c1", worker="w2", actor="a") for c in calls)
    )
    assert again == tasks
    ended = await asyncio.gather(
        *(
            ledger.tasks.change(t.id, lambda t: request_cancel(t, "user:ann", "", ledger.tasks.clock()))
            for t in tasks
        )
    )
    assert {t.state for t in ended} == {TaskState.CANCELLED}
    assert sorted(t.seq for t in ended) == list(range(first + 61, first + 121)), "one number per change"
    assert [t.seq for t in await ledger.tasks.changes(first)] == list(range(first + 61, first + 121))
    actions = [e.action for e in await ledger.audit.entries() if e.subject.startswith("task_")]
    assert sorted(actions) == ["task-cancel"] * 60 + ["task-create"] * 60
    assert (await ledger.audit.verify())[1] is None


async def test_one_call_has_one_task(ledger: Ledger) -> None:
    first = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="a")
    again = await ledger.tasks.create(CALL, chat_id="c1", worker="w2", actor="a")
    other_chat = await ledger.tasks.create(CALL, chat_id="c2", worker="w1", actor="a")
    assert again == first
    assert other_chat.id != first.id
    assert [t.id for t in await ledger.tasks.query(chat_id="c1")] == [first.id]
    assert [t.id for t in await ledger.tasks.query()] == [first.id, other_chat.id]


async def test_unknown_tasks_are_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFound, match="no task task_nope"):
        await ledger.tasks.get("task_nope")


async def test_progress_reaches_only_running_tasks(ledger: Ledger) -> None:
    pending = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="a")
    await ledger.tasks.report([Progress(pending.id, 50, "too early"), Progress("task_nope", 10)])
    assert (await ledger.tasks.get(pending.id)).progress == 0
    await ledger.tasks.change(pending.id, lambda t: start(t, ledger.tasks.clock()))
    await ledger.tasks.change(
        pending.id, lambda t: finish(t, TaskState.FAILED, ledger.tasks.clock(), "w1", error="x")
    )
    await ledger.tasks.report([Progress(pending.id, 70, "too late")])
    after = await ledger.tasks.get(pending.id)
    assert (after.state, after.progress, after.error) == (TaskState.FAILED, 0, "x")


async def test_cancel_before_start_ends_it_and_it_never_starts(ledger: Ledger) -> None:
    task = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="a")
    cancelled = await ledger.tasks.change(task.id, lambda t: request_cancel(t, "user:ann", "no need", 1.0))
    assert (cancelled.state, cancelled.cancel_by) == (TaskState.CANCELLED, "user:ann")
    with pytest.raises(TaskFinished, match="was cancelled"):
        await ledger.tasks.change(task.id, lambda t: start(t, 2.0))


async def test_a_running_tasks_worker_learns_of_a_cancel_from_reports_and_beats(ledger: Ledger) -> None:
    mine = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="a")
    theirs = await ledger.tasks.create(
        ToolCall("call_2", "export_report", {}), chat_id="c1", worker="w2", actor="a"
    )
    for task in (mine, theirs):
        await ledger.tasks.change(task.id, lambda t: start(t, ledger.tasks.clock()))
    assert await ledger.tasks.beat("w1") == []
    asked = await ledger.tasks.change(
        mine.id, lambda t: request_cancel(t, "user:ann", "", ledger.tasks.clock())
    )
    assert (asked.state, asked.cancel_by) == (TaskState.RUNNING, "user:ann")
    assert await ledger.tasks.beat("w1") == [mine.id]
    assert await ledger.tasks.beat("w2") == []
    assert await ledger.tasks.report([Progress(mine.id, 60), Progress(theirs.id, 60)]) == [mine.id]


async def test_changes_come_in_change_order_each_task_once(ledger: Ledger) -> None:
    start_seq = await ledger.tasks.last_seq()
    a = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="x")
    b = await ledger.tasks.create(
        ToolCall("call_2", "export_report", {}), chat_id="c1", worker="w1", actor="x"
    )
    await ledger.tasks.change(a.id, lambda t: start(t, ledger.tasks.clock()))
    await ledger.tasks.report([Progress(a.id, 10)])
    changes = await ledger.tasks.changes(start_seq)
    assert [t.id for t in changes] == [b.id, a.id]
    assert changes[-1].progress == 10 and changes[-1].seq == await ledger.tasks.last_seq()
    assert await ledger.tasks.changes(changes[-1].seq) == []
    await ledger.tasks.report([Progress(a.id, 20)])
    latest = await ledger.tasks.changes(changes[-1].seq)
    assert [(t.id, t.progress) for t in latest] == [(a.id, 20)]


async def test_the_sweeper_fails_tasks_whose_worker_went_silent(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    ledger = clocked_ledger
    dead = await ledger.tasks.create(CALL, chat_id="c1", worker="w-dead", actor="a")
    alive = await ledger.tasks.create(ToolCall("call_2", "t", {}), chat_id="c1", worker="w-alive", actor="a")
    for task in (dead, alive):
        await ledger.tasks.change(task.id, lambda t: start(t, clock()))
    clock.advance(20)
    await ledger.tasks.beat("w-alive")
    failed = await ledger.tasks.abandon(silent_for=15)
    assert [t.id for t in failed] == [dead.id]
    after = await ledger.tasks.get(dead.id)
    assert after.state is TaskState.FAILED
    assert after.error == "the worker running it (w-dead) stopped: no heartbeat for 20 s"
    assert (await ledger.tasks.get(alive.id)).state is TaskState.RUNNING
    assert await ledger.tasks.abandon(silent_for=15) == []
    entry = [e for e in await ledger.audit.entries() if e.subject == dead.id][-1]
    assert (entry.action, entry.actor, entry.before, entry.after) == (
        "task-failed",
        "signoff:sweeper",
        "running",
        "failed",
    )


async def test_concurrent_changes_to_one_task_all_apply(ledger: Ledger) -> None:
    """A step computed from a task that moved runs again: a cancel racing progress reports is not lost."""
    task = await ledger.tasks.create(CALL, chat_id="c1", worker="w1", actor="a")
    await ledger.tasks.change(task.id, lambda t: start(t, ledger.tasks.clock()))

    async def reports() -> None:
        for n in range(30):
            await ledger.tasks.report([Progress(task.id, n)])

    cancel = ledger.tasks.change(task.id, lambda t: request_cancel(t, "user:ann", "", ledger.tasks.clock()))
    _, asked = await asyncio.gather(reports(), cancel)
    final = await ledger.tasks.get(task.id)
    assert asked.cancel_by == "user:ann" and final.cancel_by == "user:ann"
    assert final.progress == 29
