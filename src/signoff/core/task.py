"""The task: a long-running call's work, tracked after the call itself has returned (seed 004).

A long-running tool returns at once with a task id, and its body goes on in the background. The task
record says how far it got, and how it ended.

The rules:

- A task is created `pending`, and is `running` once its worker starts the body.
- The body ends it: `completed` with its result, `failed` with its error, or `cancelled` when it stopped
  because someone asked. A worker that stopped beating fails its tasks (the sweeper does it).
- Anyone allowed may ask a task to cancel. One that has not begun ends `cancelled` at once; a running one is
  marked, keeps `running`, and its body stops at its next chance and ends it `cancelled`.
- `completed`, `failed` and `cancelled` are final: nothing changes a finished task.

Like the approval, a task changes only through pure steps from one immutable `Task` to the next, and which
event leads from which state to which is one table, `TASK_TRANSITIONS`; so every backend and every worker
applies the same rules.

Progress is the one change that is not a step: it is frequent, carries no decision, and is only ever
replaced by a newer value, so the ledgers write it straight to the record's progress fields (see
`Ledger.tasks.report`) without reading the task first.
"""

from __future__ import annotations

import secrets
from enum import StrEnum
from typing import Any

import msgspec

from signoff.core.audit import AuditEvent
from signoff.core.call import ToolCall
from signoff.core.errors import TaskFinished

NOTE = (
    "NOTE: This is a long-running operation. Do not call this tool again if it has already returned some"
    " intermediate or pending status."
)
"""What the model is told about a long-running tool, verbatim from seed 004 (and Google ADK)."""


def with_note(description: str | None) -> str:
    """The description of a long-running tool: the NOTE after a blank line, or the NOTE alone. A
    description that already ends with it (declared twice, or by ADK's own long-running tool) keeps one."""
    text = (description or "").strip()
    if text.endswith(NOTE):
        return text
    return f"{text}\n\n{NOTE}" if text else NOTE


class TaskState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELLED)


class TaskEvent(StrEnum):
    START = "start"
    COMPLETE = "complete"
    FAIL = "fail"
    STOP = "stop"
    """The body stopped because someone asked it to."""
    CANCEL = "cancel"
    """Someone asks it to stop."""


_ENDS = {
    TaskEvent.COMPLETE: TaskState.COMPLETED,
    TaskEvent.FAIL: TaskState.FAILED,
    TaskEvent.STOP: TaskState.CANCELLED,
}

TASK_TRANSITIONS: dict[TaskState, dict[TaskEvent, TaskState]] = {
    TaskState.PENDING: {TaskEvent.START: TaskState.RUNNING, TaskEvent.CANCEL: TaskState.CANCELLED, **_ENDS},
    TaskState.RUNNING: {TaskEvent.START: TaskState.RUNNING, TaskEvent.CANCEL: TaskState.RUNNING, **_ENDS},
}
"""For each state, the state each event leads to. A finished state has no row."""

_FINISHING = {state: event for event, state in _ENDS.items()}

_STATUS = {TaskState.RUNNING: "processing"}
"""The seed's status words differ from the states in one place: a running task is `processing`."""


def new_task_id() -> str:
    """Unguessable, like an approval's id: a task id in a model's context must not lead to others'."""
    return "task_" + secrets.token_urlsafe(16)


class Task(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """One long-running call's work.

    `worker` is the process running the body, and `heartbeat` when it last said it was alive: a task
    whose worker stopped beating is failed by the sweeper, never left running. `cancel_by` is set when
    someone asked to cancel a running task; its body stops at its next chance and the task ends
    `cancelled`. `seq` is the ledger's change number, which orders every change to every task for feeds.
    """

    id: str
    chat_id: str
    call: ToolCall
    created_at: float
    updated_at: float
    heartbeat: float
    worker: str = ""
    state: TaskState = TaskState.PENDING
    progress: int = 0
    message: str = ""
    result: Any = None
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    cancel_by: str = ""
    cancel_who: str = ""
    """Whoever asked it to stop, as a person reads it ("the user", "alice (ops)"); `cancel_by` is the id."""
    seq: int = 0

    def status(self) -> dict[str, Any]:
        """What the model sees, in the seed's status format: in flight, then `result` or `error`."""
        status: dict[str, Any] = {
            "status": _STATUS.get(self.state, str(self.state)),
            "task_id": self.id,
            "progress": self.progress,
        }
        if self.message:
            status["message"] = self.message
        if self.state is TaskState.COMPLETED:
            status["result"] = self.result
        elif self.error:
            status["error"] = self.error
        return status

    def public(self) -> dict[str, Any]:
        """The task as people see it (the page, the tasks API): the record with the model's status word,
        without the worker's bookkeeping."""
        shown = msgspec.to_builtins(self)
        for private in ("worker", "heartbeat", "seq", "call"):
            shown.pop(private, None)
        shown.update(
            call_id=self.call.call_id, tool=self.call.tool, state=str(self.state),
            status=self.status()["status"], progress=self.progress, message=self.message,
        )  # fmt: skip
        return shown  # type: ignore[no-any-return]


def new_task(call: ToolCall, *, chat_id: str, worker: str, now: float, actor: str) -> tuple[Task, AuditEvent]:
    task = Task(
        id=new_task_id(), chat_id=chat_id, call=call, created_at=now, updated_at=now, heartbeat=now,
        worker=worker,
    )  # fmt: skip
    detail = {"chat": chat_id, "call": call.call_id, "tool": call.tool, "digest": call.digest}
    return task, _event(None, task, "task-create", actor, now, **detail)


def start(task: Task, now: float) -> tuple[Task, AuditEvent]:
    """The body begins. A task cancelled before it began never starts."""
    state = _after(task, TaskEvent.START, "start")
    after = msgspec.structs.replace(task, state=state, started_at=now, updated_at=now, heartbeat=now)
    return after, _event(task, after, "task-start", task.worker, now)


def finish(
    task: Task, state: TaskState, now: float, actor: str, *, result: Any = None, error: str = ""
) -> tuple[Task, AuditEvent]:
    """The body ended: with its result, an error, or stopped on request."""
    state = _after(task, _FINISHING[state], str(state))
    progress = 100 if state is TaskState.COMPLETED else task.progress
    if state is TaskState.CANCELLED and not error:
        error = f"cancelled by {task.cancel_who or task.cancel_by or actor}"
    after = msgspec.structs.replace(
        task, state=state, result=result, error=error, progress=progress, updated_at=now, finished_at=now
    )
    return after, _event(task, after, f"task-{state}", actor, now, error=error or None)


def request_cancel(task: Task, actor: str, reason: str, now: float, who: str = "") -> tuple[Task, AuditEvent]:
    """Ask a task to stop, `actor` (an id) saying so, whom people read as `who`. One that has not begun
    ends here; a running one is marked, and its worker stops the body and records `cancelled`."""
    state = _after(task, TaskEvent.CANCEL, "cancel")
    who = who or actor
    if state.finished:
        after = msgspec.structs.replace(
            task, state=state, cancel_by=actor, cancel_who=who, error=f"cancelled by {who}",
            updated_at=now, finished_at=now,
        )  # fmt: skip
    else:
        after = msgspec.structs.replace(task, cancel_by=actor, cancel_who=who, updated_at=now)
    return after, _event(task, after, "task-cancel", actor, now, reason=reason or None)


def abandon(task: Task, why: str, now: float) -> tuple[Task, AuditEvent]:
    """The worker running the task is gone: it failed, and says why."""
    return finish(task, TaskState.FAILED, now, "signoff:sweeper", error=why)


def valid_progress(progress: object) -> int:
    """A percentage the record can hold; anything else is the tool's bug, named clearly."""
    if isinstance(progress, bool) or not isinstance(progress, int | float) or not 0 <= progress <= 100:
        raise ValueError(f"progress must be a number from 0 to 100, not {progress!r}")  # the tool's own bug
    return int(progress)


def _after(task: Task, event: TaskEvent, action: str) -> TaskState:
    """The state `event` leads `task` to, as the table says; a finished task refuses every event."""
    state = TASK_TRANSITIONS.get(task.state, {}).get(event)
    if state is None:
        raise TaskFinished(task.id, str(task.state), action)
    return state


def _event(
    before: Task | None, after: Task, action: str, actor: str, now: float, **detail: object
) -> AuditEvent:
    return AuditEvent(
        at=now, actor=actor, action=action, subject=after.id,
        before=None if before is None else str(before.state), after=str(after.state),
        detail={k: v for k, v in detail.items() if v is not None},
    )  # fmt: skip
