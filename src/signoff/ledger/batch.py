"""Group commit for the shared ledgers: the writes that queue up in one process are stored together.

A shared ledger serializes its writers: the audit log is one hash chain, and the first decision must win.
So every write costs a full round trip to the server, and on PostgreSQL a WAL flush, one after another.
That caps a whole cluster at about a thousand writes per second, whatever the number of workers.

`Batched` makes the cost per batch instead of per write. A process's writers hand their pure steps to one
committer task. The committer loads every record the batch touches in one go, runs the steps in order in
Python (a later step sees an earlier one's result, so two decisions on one approval in one batch still have
exactly one winner), and stores all the changes in one atomic write. A caller returns only after that write
is durable, so nothing acknowledged is lost. A batch of one costs what a plain write did, so latency with
no queue is unchanged.

A backend supplies `_batch()`: a transaction that can `load` records by key and `store` writes. An
optimistic backend (Redis) may raise `Conflict` from `store`; the whole batch then runs again on fresh
records, which is safe because the steps are pure.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

from signoff.core.approval import Approval
from signoff.core.audit import AuditEvent
from signoff.core.errors import LedgerUnavailable, NotFound
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.base import Change, Ledger

Key = tuple[str, ...]
"""What a write reads first: `("approval", id)`, `("grant", id)`, `("task", id)`, `("principal", id)`, or
the record asked for a call, `("call", chat_id, call_id)` for an approval and `("tcall", chat_id, call_id)`
for a task."""

MAX_BATCH = 256
"""Writes per batch: enough to share one commit among many callers, small enough to keep one batch short."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as loaded, with its revision: how many times it was written, or a task's change number (a
    backend without revisions says 0)."""

    record: Any
    rev: int


@dataclass(frozen=True, slots=True)
class Write:
    """One change to store. `key` and `rev` name the record it replaces and the revision it was computed
    from (None for a new record, or for audit events alone), so an optimistic backend can check that
    nothing moved."""

    change: Change
    key: Key | None = None
    rev: int | None = None

    @property
    def new(self) -> bool:
        return self.key is not None and self.key[0] in ("call", "tcall")


class Conflict(Exception):
    """A record or the audit head moved between `load` and `store`: run the batch again."""


class Batch(ABC):
    """One transaction of a backend, as the committer uses it."""

    @abstractmethod
    async def load(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        """The records that exist among `keys`; a `("call", …)` or `("tcall", …)` key loads the approval or
        the task asked for that call."""

    @abstractmethod
    async def store(self, writes: Sequence[Write]) -> list[Change]:
        """Store every write, in order, with its audit entries chained in that order; all or nothing. The
        changes as stored: each task with the change number it got."""


Kind = Literal["approval", "grant", "task", "principal", "insert", "task-insert", "append"]
_RECORD: dict[Kind, str] = {"insert": "approval", "task-insert": "task"}
"""What an insert job's key finds, by the record's own key."""


@dataclass(eq=False, slots=True)
class _Job:
    kind: Kind
    key: Key | None
    step: Callable[[Any], Change]
    done: asyncio.Future[Change] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Batched(Ledger):
    """A ledger whose writes go through the committer. Subclasses implement `_batch` and the reads."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._queue: list[_Job] = []
        self._committer: asyncio.Task[None] | None = None

    @abstractmethod
    def _batch(self) -> AbstractAsyncContextManager[Batch]:
        """A write transaction. PostgreSQL holds its write lock for the whole of it; Redis checks in
        `store` instead."""

    async def _drain(self) -> None:
        """Wait for writes still queued, so `close` never drops an acknowledged-to-be write."""
        if self._committer is not None:
            await asyncio.gather(self._committer, return_exceptions=True)

    # -- the primitives, as jobs ----------------------------------------------------------------------------

    async def _insert(self, approval: Approval, event: AuditEvent) -> Approval:
        def step(existing: Approval | None) -> Change:
            return Change(approval=existing) if existing else Change(approval=approval, events=(event,))

        change = await self._submit("insert", ("call", approval.chat_id, approval.call.call_id), step)
        assert change.approval is not None
        return change.approval

    async def _mutate(self, approval_id: str, step: Callable[[Approval], Change]) -> Change:
        return await self._submit("approval", ("approval", approval_id), step)

    async def _mutate_grant(self, grant_id: str, step: Callable[[Grant], Change]) -> Change:
        return await self._submit("grant", ("grant", grant_id), step)

    async def _insert_task(self, task: Task, event: AuditEvent) -> Task:
        def step(existing: Task | None) -> Change:
            return Change(task=existing) if existing else Change(task=task, events=(event,))

        change = await self._submit("task-insert", ("tcall", task.chat_id, task.call.call_id), step)
        assert change.task is not None
        return change.task

    async def _mutate_task(self, task_id: str, step: Callable[[Task], Change]) -> Change:
        return await self._submit("task", ("task", task_id), step)

    async def _mutate_principal(
        self, principal_id: str, step: Callable[[Registered | None], Change]
    ) -> Change:
        """The step sees None for a principal not registered yet, and registers it."""
        return await self._submit("principal", ("principal", principal_id), step)

    async def _append(self, events: Sequence[AuditEvent]) -> None:
        await self._submit("append", None, lambda _: Change(events=tuple(events)))

    async def _submit(self, kind: Kind, key: Key | None, step: Callable[[Any], Change]) -> Change:
        job = _Job(kind, key, step)
        self._queue.append(job)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.get_running_loop().create_task(self._commit_queued())
        return await job.done

    # -- the committer --------------------------------------------------------------------------------------

    async def _commit_queued(self) -> None:
        while self._queue:
            jobs, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                await self._commit(jobs)
            except LedgerUnavailable as exc:
                _fail(jobs, exc)
            except Exception:  # one job's write was refused: run each alone so only that one fails
                for job in jobs:
                    try:
                        await self._commit([job])
                    except Exception as exc:  # the caller gets it, whatever it is
                        _fail([job], exc)

    async def _commit(self, jobs: Sequence[_Job]) -> None:
        while True:
            async with self._batch() as batch:
                stored = await batch.load(list(dict.fromkeys(job.key for job in jobs if job.key)))
                outcomes, writes, written = _run(jobs, stored)
                try:
                    if writes:
                        for index, change in zip(written, await batch.store(writes), strict=True):
                            outcomes[index] = change
                except Conflict:
                    continue
            break
        for job, outcome in zip(jobs, outcomes, strict=True):
            if job.done.done():  # the caller was cancelled; its write stands
                continue
            if isinstance(outcome, BaseException):
                job.done.set_exception(outcome)
            else:
                job.done.set_result(outcome)


def _run(
    jobs: Iterable[_Job], stored: dict[Key, Stored]
) -> tuple[list[Change | Exception], list[Write], list[int]]:
    """Apply each job's step to the records as the jobs before it left them (pure: no I/O): each job's
    outcome, the writes to store, and the job each write is the outcome of."""
    current = dict(stored)
    outcomes: list[Change | Exception] = []
    writes: list[Write] = []
    written: list[int] = []
    for index, job in enumerate(jobs):
        found = current.get(job.key) if job.key else None
        inserts = _RECORD.get(job.kind)
        if inserts and found is not None:  # as this batch left it, if it changed it
            found = current.get((inserts, found.record.id), found)
        try:
            if job.kind in ("approval", "grant", "task") and found is None:
                assert job.key is not None
                raise NotFound(f"no {job.kind} {job.key[1]}")
            change = job.step(found.record if found else None)
        except Exception as exc:  # a refusal (AlreadyDecided, …) is its caller's
            outcomes.append(exc)
            continue
        outcomes.append(change)
        if inserts and found is not None:
            continue  # asked before: nothing to write
        writes.append(Write(change, job.key, found.rev if found else None))
        written.append(index)
        if job.key is not None:
            rev = found.rev + 1 if found else 1
            record = _record(job.kind, change)
            current[job.key] = Stored(record, rev)
            if inserts:
                assert record is not None
                current[(inserts, record.id)] = Stored(record, rev)
    return outcomes, writes, written


def _record(kind: Kind, change: Change) -> Approval | Grant | Task | Registered | None:
    """The record a job of `kind` writes (a decision's change may hold a grant too)."""
    if kind == "grant":
        return change.grant
    if kind == "principal":
        return change.principal
    return change.task if kind in ("task", "task-insert") else change.approval


def _fail(jobs: Iterable[_Job], exc: BaseException) -> None:
    for job in jobs:
        if not job.done.done():
            job.done.set_exception(exc)
