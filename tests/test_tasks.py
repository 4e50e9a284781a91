"""Long-running calls as tasks: the gate allows, the body runs in the background, people watch and cancel."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from signoff import Decision, Gate, Policy
from signoff.core import task as task_steps
from signoff.core.call import ToolCall
from signoff.core.errors import TaskFinished
from signoff.core.task import TASK_TRANSITIONS, Task, TaskEvent, TaskState, new_task
from signoff.gate import Denied, Pending
from signoff.ledger import Ledger, SqliteLedger
from signoff.tasks import TaskCancelled, Tasks, progress

CALL = ToolCall("call_1", "export_report", {"name": "q3"})


async def until(check: Callable[[], Any]) -> None:
    """Poll `check` (plain or async) until it holds, for at most 5 s."""
    async with asyncio.timeout(5):
        while not await _value(check()):
            await asyncio.sleep(0.01)


async def _value(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


async def finished(ledger: Ledger, task_id: str) -> Task:
    async def done() -> bool:
        return (await ledger.tasks.get(task_id)).state.finished

    await until(done)
    return await ledger.tasks.get(task_id)


@pytest.fixture
async def gate(ledger: Ledger) -> AsyncIterator[Gate]:
    gate = Gate(ledger, Policy.from_dict({"tools": {"export_report": [{"action": "allow"}]}}))
    yield gate
    await gate.tasks.close()


async def test_the_call_returns_at_once_with_a_pending_task_and_the_body_runs_on(gate: Gate) -> None:
    release = asyncio.Event()

    async def export_report(name: str) -> dict[str, str]:
        progress(10, "collecting")
        await release.wait()
        progress(90, "writing")
        return {"file": f"{name}.pdf"}

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)
    assert task.status() == {"status": "pending", "task_id": task.id, "progress": 0}
    tasks = gate.tasks

    async def collecting() -> bool:
        return (await tasks.check(task.id, "c1")) == {
            "status": "processing", "task_id": task.id, "progress": 10, "message": "collecting"
        }  # fmt: skip

    await until(collecting)
    release.set()
    done = await finished(gate.ledger, task.id)
    assert await tasks.check(task.id, "c1") == {
        "status": "completed", "task_id": task.id, "progress": 100, "message": "writing",
        "result": {"file": "q3.pdf"},
    }  # fmt: skip
    assert done.worker == tasks.worker
    unknown = {"status": "unknown", "task_id": task.id, "error": f"there is no task {task.id} in this chat"}
    assert await tasks.check(task.id, "another-chat") == unknown


async def test_a_refused_call_never_starts_a_task(ledger: Ledger) -> None:
    gate = Gate(ledger, Policy.from_dict({"tools": {"export_report": [{"action": "ask"}]}}))
    ran: list[str] = []

    async def export_report(name: str) -> str:
        ran.append(name)
        return name

    pending = await gate.start(CALL, export_report, chat_id="c1", wait="deferred")
    assert isinstance(pending, Pending)
    await ledger.approvals.decide(pending.approval.id, Decision.deny(by="user:ann", reason="not now"))
    refused = await gate.start(CALL, export_report, chat_id="c1", wait="deferred")
    assert isinstance(refused, Denied) and refused.reason == "not now"
    await asyncio.sleep(0.05)
    assert ran == [] and await ledger.tasks.query() == []


async def test_an_approved_call_starts_once(ledger: Ledger) -> None:
    gate = Gate(ledger, Policy.from_dict({"tools": {"export_report": [{"action": "ask"}]}}))

    async def export_report(name: str) -> str:
        return name

    pending = await gate.start(CALL, export_report, chat_id="c1", wait="deferred")
    assert isinstance(pending, Pending)
    await ledger.approvals.decide(pending.approval.id, Decision.approve(by="user:ann"))
    task = await gate.start(CALL, export_report, chat_id="c1", wait="deferred")
    assert isinstance(task, Task)
    assert (await finished(ledger, task.id)).result == "q3"
    with pytest.raises(Exception, match="already used"):
        await gate.start(CALL, export_report, chat_id="c1", wait="deferred")
    assert len(await ledger.tasks.query()) == 1
    await gate.tasks.close()


async def test_cancel_interrupts_an_async_body_at_its_next_await(gate: Gate) -> None:
    stopped = asyncio.Event()

    async def export_report(name: str) -> str:
        progress(5, "started")
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()
        return "never"

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)
    await until(lambda: gate.tasks._running.get(task.id) and gate.tasks._running[task.id].task.progress == 5)
    asked = await gate.tasks.cancel(task.id, "user:ann", "changed my mind")
    assert asked.cancel_by == "user:ann"
    done = await finished(gate.ledger, task.id)
    assert stopped.is_set()
    assert (done.state, done.error) == (TaskState.CANCELLED, "cancelled by user:ann")
    assert done.status() == {
        "status": "cancelled", "task_id": task.id, "progress": 5, "message": "started",
        "error": "cancelled by user:ann",
    }  # fmt: skip
    with pytest.raises(TaskFinished):
        await gate.tasks.cancel(task.id, "user:ann")
    actions = [e.action for e in await gate.ledger.audit.entries() if e.subject == task.id]
    assert actions == ["task-create", "task-start", "task-cancel", "task-cancelled"]


async def test_a_body_in_a_thread_stops_at_its_next_progress_report(gate: Gate) -> None:
    go_on = threading.Event()
    reports: list[int] = []

    def export_report(name: str) -> str:
        for step in range(1, 100):
            progress(step)
            reports.append(step)
            go_on.wait(5)
        return "never"

    async def in_thread(name: str) -> str:
        return await asyncio.to_thread(export_report, name)

    task = await gate.start(CALL, in_thread, chat_id="c1", interruptible=False)
    assert isinstance(task, Task)
    await until(lambda: reports == [1])
    await gate.tasks.cancel(task.id, "user:ann")
    go_on.set()
    done = await finished(gate.ledger, task.id)
    assert done.state is TaskState.CANCELLED
    assert reports == [1], "the body ran on after it was cancelled"


async def test_a_cancel_asked_on_another_worker_reaches_the_one_running_it(tmp_path: Path) -> None:
    async with SqliteLedger(tmp_path / "a.db") as mine, SqliteLedger(tmp_path / "a.db") as theirs:
        policy = Policy.from_dict({"tools": {"export_report": [{"action": "allow"}]}})
        running = Gate(mine, policy)
        running.tasks.heartbeat = 0.05
        other = Tasks(theirs)

        async def export_report(name: str) -> str:
            await asyncio.sleep(60)
            return "never"

        task = await running.start(CALL, export_report, chat_id="c1")
        assert isinstance(task, Task)

        async def begun() -> bool:
            return (await theirs.tasks.get(task.id)).state is TaskState.RUNNING

        await until(begun)
        await other.cancel(task.id, "user:bob")
        done = await finished(theirs, task.id)
        assert (done.state, done.error) == (TaskState.CANCELLED, "cancelled by user:bob")
        await running.tasks.close()


async def test_a_failing_body_fails_its_task_with_the_reason(gate: Gate) -> None:
    async def export_report(name: str) -> str:
        raise RuntimeError(f"no data for {name}")

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)
    done = await finished(gate.ledger, task.id)
    assert done.status() == {
        "status": "failed", "task_id": task.id, "progress": 0, "error": "RuntimeError: no data for q3"
    }  # fmt: skip


async def test_a_bad_progress_value_is_the_bodys_error(gate: Gate) -> None:
    async def export_report(name: str) -> str:
        progress(250)
        return "never"

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)
    done = await finished(gate.ledger, task.id)
    assert done.error == "ValueError: progress must be a number from 0 to 100, not 250"


async def test_progress_outside_a_task_does_nothing() -> None:
    progress(50, "inline")


async def test_a_stopping_worker_fails_its_tasks_saying_so(gate: Gate) -> None:
    async def export_report(name: str) -> str:
        await asyncio.sleep(60)
        return "never"

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)
    await until(lambda: task.id in gate.tasks._running)
    await gate.tasks.close()
    done = await gate.ledger.tasks.get(task.id)
    assert (done.state, done.error) == (TaskState.FAILED, "the worker stopped before it finished")


async def test_a_burst_of_reports_is_coalesced_and_the_last_one_lands(gate: Gate) -> None:
    release = asyncio.Event()

    async def export_report(name: str) -> str:
        for n in range(1, 1001):
            progress(n / 10, f"row {n}")
        await release.wait()
        return "done"

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)

    async def last_landed() -> bool:
        return (await gate.ledger.tasks.get(task.id)).message == "row 1000"

    await until(last_landed)
    assert (await gate.ledger.tasks.get(task.id)).progress == 100
    release.set()
    await finished(gate.ledger, task.id)


async def test_progress_raises_once_the_task_is_cancelled(gate: Gate) -> None:
    seen: list[BaseException] = []
    begun = asyncio.Event()

    async def export_report(name: str) -> str:
        progress(1)
        begun.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            try:
                progress(2)
            except TaskCancelled as exc:
                seen.append(exc)
            raise
        return "never"

    task = await gate.start(CALL, export_report, chat_id="c1")
    assert isinstance(task, Task)
    await begun.wait()
    await gate.tasks.cancel(task.id, "user:ann")
    await finished(gate.ledger, task.id)
    assert [str(e) for e in seen] == [f"task {task.id} was cancelled by user:ann"]


@pytest.mark.parametrize("state", list(TaskState))
@pytest.mark.parametrize("event", list(TaskEvent))
def test_every_task_step_lands_where_the_table_says(state: TaskState, event: TaskEvent) -> None:
    """Each step function follows TASK_TRANSITIONS: the state it names, or `TaskFinished` where the table
    has no move."""
    made, _ = new_task(ToolCall("c1", "export", {}), chat_id="chat", worker="w", now=1.0, actor="a")
    task = msgspec.structs.replace(made, state=state)
    steps = {
        TaskEvent.START: lambda: task_steps.start(task, 2.0),
        TaskEvent.COMPLETE: lambda: task_steps.finish(task, TaskState.COMPLETED, 2.0, "w", result=1),
        TaskEvent.FAIL: lambda: task_steps.finish(task, TaskState.FAILED, 2.0, "w", error="boom"),
        TaskEvent.STOP: lambda: task_steps.finish(task, TaskState.CANCELLED, 2.0, "w"),
        TaskEvent.CANCEL: lambda: task_steps.request_cancel(task, "alice", "", 2.0),
    }
    expected = TASK_TRANSITIONS.get(state, {}).get(event)
    if expected is None:
        assert state.finished
        with pytest.raises(TaskFinished):
            steps[event]()
        return
    after, audited = steps[event]()
    assert after.state is expected and audited.after == str(expected) and audited.before == str(state)
