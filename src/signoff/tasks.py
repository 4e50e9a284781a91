"""Long-running calls' bodies, run in the background of the process that allowed them (seed 004).

The gate allows a long-running call as it allows any other; then, instead of awaiting the tool, it hands
the body to `Tasks`, which records a task in the ledger and returns at once. The ledger is the truth every
worker reads; this process only runs the body and keeps the record current:

- The body reports how far it got with `progress()`. Reports are coalesced per task and written in
  batches, as fast as the ledger takes them: only the newest report of a task matters, so a body that
  reports in a tight loop costs one write per batch, not one per call.
- Every `heartbeat` seconds the process renews its unfinished tasks' heartbeat. A task whose worker stops
  beating (killed, lost its machine) is failed by the sweeper (`Ledger.tasks.abandon`).
- A cancel asked on any worker reaches this one through the same writes: a report or a beat answers with
  the ids someone asked to cancel. Cancelling is cooperative: an async body is interrupted at its next
  `await`, and any body gets `TaskCancelled` from its next `progress()` call (the only way to reach one
  running in a thread). Only a body that stopped is recorded `cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from signoff.core.audit import AuditEvent
from signoff.core.call import ToolCall
from signoff.core.errors import LedgerUnavailable, NotFound, SignoffError, TaskFinished
from signoff.core.task import Task, TaskState, finish, request_cancel, start, valid_progress
from signoff.ledger.base import Ledger, outage_of
from signoff.ledger.records import Progress

log = logging.getLogger("signoff.tasks")

Listener = Callable[[Task], None]
F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__signoff_long_running__"


class TaskCancelled(SignoffError):
    """Raised by `progress()` in a body someone asked to cancel: stop, and let it propagate."""


@dataclass(eq=False)
class _Running:
    task: Task
    """The task as this process last knew it."""
    loop: asyncio.AbstractEventLoop
    interruptible: bool
    job: asyncio.Task[None] | None = None
    cancelling: bool = False


_current: ContextVar[tuple[Tasks, _Running] | None] = ContextVar("signoff_task", default=None)


def progress(percent: float, message: str = "") -> None:
    """Report how far the current task got (0 to 100), with a word on what it does now.

    Call it from a long-running tool's body, async or not (a body in a thread may call it too). It returns
    at once: the report is written in the background. Outside a task it does nothing, so the same tool
    works when it runs inline. Raises `TaskCancelled` once someone asked to cancel the task.
    """
    current = _current.get()
    if current is None:
        return
    tasks, running = current
    report = Progress(running.task.id, valid_progress(percent), message)
    if running.cancelling:
        task = running.task
        who = task.cancel_who or task.cancel_by or "its owner"
        raise TaskCancelled(f"task {task.id} was cancelled by {who}")
    try:
        in_loop = asyncio.get_running_loop() is running.loop
    except RuntimeError:
        in_loop = False
    if in_loop:
        tasks._report(report)
    else:
        running.loop.call_soon_threadsafe(tasks._report, report)


def long_running(fn: F) -> F:
    """Declare a tool function long-running (seed 004), for pydantic-ai and Google ADK alike: its calls
    return at once with a task, and its body runs in the background, reporting with `progress()`."""
    setattr(fn, _MARK, True)
    return fn


def is_long_running(fn: object) -> bool:
    return getattr(fn, _MARK, False) is True


def worker_name() -> str:
    """Which process runs a task: enough to find it (host and pid), and unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Tasks:
    """The tasks this process runs. One per gate; `close` stops them (they end `failed`, saying so)."""

    def __init__(self, ledger: Ledger, *, heartbeat: float = 2.0, actor: str = "signoff:tasks") -> None:
        self.ledger = ledger
        self.heartbeat = heartbeat
        self.actor = actor
        self.worker = worker_name()
        self._running: dict[str, _Running] = {}
        self._reports: dict[str, Progress] = {}
        self._listeners: dict[str, set[Listener]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._beater: asyncio.Task[None] | None = None

    async def start(
        self, call: ToolCall, body: Callable[[], Awaitable[Any]], *, chat_id: str, interruptible: bool = True
    ) -> Task:
        """Record a task for `call` and run `body` in the background; the task, pending, at once.

        `interruptible` says an async body may be cancelled at any `await`; a body running in a thread
        (False) stops only at its next `progress()`. A call that already has a task (a retried request)
        gets that task back, and nothing starts twice.
        """
        task = await self.ledger.tasks.create(call, chat_id=chat_id, worker=self.worker, actor=self.actor)
        if task.state is not TaskState.PENDING or task.worker != self.worker or task.id in self._running:
            return task
        loop = asyncio.get_running_loop()
        running = _Running(task, loop, interruptible)
        self._running[task.id] = running
        running.job = loop.create_task(self._run(running, body), name=f"signoff-{task.id}")
        if self._beater is None or self._beater.done():
            self._beater = loop.create_task(self._beat(), name="signoff-task-heartbeat")
        return task

    async def cancel(self, task_id: str, actor: str, reason: str = "", who: str = "") -> Task:
        """Ask the task to stop, wherever it runs, as `actor` (whom people read as `who`); raises
        `TaskFinished` if it already ended."""
        task = await self.ledger.tasks.change(
            task_id, lambda t: request_cancel(t, actor, reason, self.ledger.tasks.clock(), who)
        )
        self._publish(task)
        self._stop(task_id, task.cancel_by)
        return task

    async def check(self, task_id: str, chat_id: str) -> dict[str, Any]:
        """What the model's `check_task` sees: the task's status in the seed's format. A task of another
        chat is as unknown as one that never existed: a model must not read other chats' work."""
        try:
            task = await self.ledger.tasks.get(task_id)
        except NotFound:
            task = None
        if task is None or task.chat_id != chat_id:
            return {
                "status": "unknown",
                "task_id": task_id,
                "error": f"there is no task {task_id} in this chat",
            }
        return task.status()

    def watch(self, task_id: str, listener: Listener) -> Callable[[], None]:
        """Call `listener` with each change this process makes to the task (start, progress, end)."""
        self._listeners.setdefault(task_id, set()).add(listener)
        return lambda: self._listeners.get(task_id, set()).discard(listener)

    async def close(self) -> None:
        """Stop every body still running here; each ends `failed`, since nobody will finish it."""
        stopping = list(self._running.values())
        jobs = [r.job for r in stopping if r.job is not None]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        for running in stopping:  # a body cancelled before it began never ran its own ending
            await self._end(running, TaskState.FAILED, error="the worker stopped before it finished")
        for side in (self._flusher, self._beater):
            if side is not None:
                side.cancel()
                await asyncio.gather(side, return_exceptions=True)

    # -- the body -----------------------------------------------------------------------------------------

    async def _run(self, running: _Running, body: Callable[[], Awaitable[Any]]) -> None:
        task_id = running.task.id
        try:
            try:
                running.task = await self.ledger.tasks.change(
                    task_id, lambda t: start(t, self.ledger.tasks.clock())
                )
            except TaskFinished:  # cancelled before it began: it never runs
                return
            self._publish(running.task)
            _current.set((self, running))
            result = _storable(await body())
        except (asyncio.CancelledError, TaskCancelled):
            if not running.cancelling:  # not asked: this process is shutting down (see `close`)
                raise
            await self._end(running, TaskState.CANCELLED)
        except Exception as exc:  # the tool's failure is the task's result, not the server's
            await self._end(running, TaskState.FAILED, error=f"{type(exc).__name__}: {exc}")
        else:
            await self._end(running, TaskState.COMPLETED, result=result)
        finally:
            del self._running[task_id]
            self._listeners.pop(task_id, None)

    async def _end(self, running: _Running, state: TaskState, *, result: Any = None, error: str = "") -> None:
        self._reports.pop(running.task.id, None)  # the last report goes with the end instead
        last = running.task

        def end(task: Task) -> tuple[Task, AuditEvent]:
            reported = msgspec.structs.replace(task, progress=last.progress, message=last.message)
            return finish(reported, state, self.ledger.tasks.clock(), self.worker, result=result, error=error)

        try:
            running.task = await asyncio.shield(self.ledger.tasks.change(last.id, end))
        except TaskFinished:  # the sweeper gave up on it meanwhile; its record stands
            return
        self._publish(running.task)

    def _stop(self, task_id: str, by: str) -> None:
        running = self._running.get(task_id)
        if running is None or running.cancelling:
            return
        running.cancelling = True
        running.task = msgspec.structs.replace(running.task, cancel_by=by or running.task.cancel_by)
        if running.interruptible and running.job is not None:
            running.job.cancel()

    # -- keeping the record current -----------------------------------------------------------------------

    def _report(self, report: Progress) -> None:
        running = self._running.get(report.task_id)
        if running is None or running.task.state is not TaskState.RUNNING:
            return
        self._reports[report.task_id] = report
        running.task = msgspec.structs.replace(
            running.task,
            progress=report.progress,
            message=report.message,
            updated_at=self.ledger.tasks.clock(),
        )
        self._publish(running.task)
        if self._flusher is None or self._flusher.done():
            self._flusher = running.loop.create_task(self._flush(), name="signoff-task-progress")

    async def _flush(self) -> None:
        while self._reports:
            batch, self._reports = list(self._reports.values()), {}
            try:
                cancelling = await self.ledger.tasks.report(batch)
            except LedgerUnavailable as exc:  # kept, unless a newer report came, for once it answers
                outage_of(self.ledger).failed(exc)
                self._reports = {r.task_id: r for r in batch} | self._reports
                await asyncio.sleep(self.heartbeat)
                continue
            except Exception:  # a bug loses a report, which the next one replaces anyway
                log.exception("task progress could not be written")
                continue
            for task_id in cancelling:
                self._stop(task_id, "")

    async def _beat(self) -> None:
        while self._running:
            try:
                for task_id in await self.ledger.tasks.beat(self.worker):
                    self._stop(task_id, "")
            except LedgerUnavailable as exc:  # a missed beat or two is what the sweeper's margin is for
                outage_of(self.ledger).failed(exc)
            except Exception:
                log.exception("the task heartbeat could not be written")
            await asyncio.sleep(self.heartbeat)

    def _publish(self, task: Task) -> None:
        for listener in list(self._listeners.get(task.id, ())):
            with contextlib.suppress(Exception):
                listener(task)


def _storable(result: Any) -> Any:
    """The result as plain JSON values, which every ledger stores; anything else is shown as text."""
    return msgspec.json.decode(msgspec.json.encode(result, enc_hook=str))


__all__ = ["TaskCancelled", "Tasks", "is_long_running", "long_running", "progress"]
