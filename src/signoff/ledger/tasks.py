"""The ledger's tasks: what long-running calls started, how far they got, and how they ended.

A task's transitions are the core's pure steps (`core.task`), stored through the committer with their
audit entries. Progress and heartbeats are the exception: written often and audited never, so the store
writes them directly, and they never wait behind decisions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from signoff.core.audit import AuditEvent
from signoff.core.call import ToolCall
from signoff.core.errors import TaskFinished
from signoff.core.task import Task, TaskState, abandon, new_task
from signoff.ledger.keys import StartedKey, TaskKey, found
from signoff.ledger.parts import Part, Shared
from signoff.ledger.records import Change, Progress, TaskQuery, TaskStep


class Tasks(Part):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._store = shared.backend.tasks
        self._listeners: set[Callable[[], None]] = set()

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` after every task change this process writes (a feed wakes on it rather than
        waiting for its next poll); returns the function that stops it."""
        self._listeners.add(listener)
        return lambda: self._listeners.discard(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    async def create(self, call: ToolCall, *, chat_id: str, worker: str, actor: str) -> Task:
        """Record a new pending task for `call`, run by `worker`; the call's existing task if it has one."""
        task, event = new_task(call, chat_id=chat_id, worker=worker, now=self.clock(), actor=actor)

        def step(existing: Task | None) -> Change:
            return Change(task=existing) if existing else Change(task=task, events=(event,))

        stored = (await self._shared.committer.write(StartedKey(chat_id, call.call_id), step)).task
        assert stored is not None
        if stored.id == task.id:
            self._changed()
        return stored

    async def get(self, task_id: str) -> Task:
        return found(await self._store.load(task_id), TaskKey(task_id))

    async def query(
        self, *, chat_id: str | None = None, state: TaskState | str | None = None, limit: int | None = None
    ) -> list[Task]:
        """Tasks oldest first, optionally of one chat and/or in one state."""
        states = None if state is None else (TaskState(state),)
        return await self._store.query(TaskQuery(chat_id=chat_id, states=states, limit=limit))

    async def changes(self, after_seq: int, limit: int = 1000) -> list[Task]:
        """Every task changed after change number `after_seq`, in change order, each as it is now."""
        return await self._store.query(TaskQuery(after_seq=after_seq, limit=limit))

    async def last_seq(self) -> int:
        """The newest task change's number: where a feed that only wants what happens next starts."""
        return await self._store.last_seq()

    async def change(self, task_id: str, step: TaskStep) -> Task:
        """Apply a pure step to the task as stored, with its audit event, all or nothing."""

        def change(task: Task) -> Change:
            after, event = step(task)
            return Change(task=after, events=() if event is None else (event,))

        stored = (await self._shared.committer.write(TaskKey(task_id), change)).task
        assert stored is not None
        self._changed()
        return stored

    async def report(self, reports: Sequence[Progress]) -> list[str]:
        """Write the progress of running tasks (a finished one keeps its record); the ids among them
        someone asked to cancel."""
        if not reports:
            return []
        cancelled = await self._store.report(reports, self.clock())
        self._changed()
        return cancelled

    async def beat(self, worker: str) -> list[str]:
        """Say that `worker` is alive and still runs its tasks; the ids someone asked it to cancel."""
        return await self._store.beat(worker, self.clock())

    async def abandon(self, silent_for: float) -> list[Task]:
        """Fail every unfinished task whose worker has not beaten for `silent_for` seconds: it died, and
        nobody else will ever finish the task. Only the sweeper lease's holder does it."""
        if not await self._shared.lease("task-sweeper"):
            return []
        now = self.clock()
        silent = TaskQuery(states=(TaskState.PENDING, TaskState.RUNNING), beat_before=now - silent_for)
        failed = []
        for task in await self._store.query(silent):
            with contextlib.suppress(TaskFinished, _Alive):
                failed.append(await self.change(task.id, _abandon_silent(now, silent_for)))
        return failed


class _Alive(Exception):
    """The task's worker beat again since it was found silent: it is not abandoned."""


def _abandon_silent(now: float, silent_for: float) -> TaskStep:
    def step(task: Task) -> tuple[Task, AuditEvent | None]:
        if task.heartbeat >= now - silent_for:
            raise _Alive
        silence = now - task.heartbeat
        why = f"the worker running it ({task.worker}) stopped: no heartbeat for {silence:.0f} s"
        return abandon(task, why, now)

    return step
