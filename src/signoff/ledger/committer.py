"""Every audited write of every store, as a pure step over the record its key names, committed in batches.

A shared ledger serializes its writers: the audit log is one hash chain, and the first decision must win.
So every write costs a full round trip to the server (on PostgreSQL a WAL flush, on SQLite a hop to the
ledger's thread), one after another. Group commit makes that cost per batch instead of per write: a
process's writers hand their steps to one committer task, which has the backend load every record the
batch touches in one go, runs the steps in order in Python (a later step sees an earlier one's result, so
two decisions on one approval in one batch still have exactly one winner), and stores all the changes in
one atomic write. A caller returns only after that write is durable, so nothing acknowledged is lost. A
batch of one costs what a plain write did, so latency with no queue is unchanged.

A commit the ledger could not take (`LedgerUnavailable`, after the ledger's timeout) fails the writes that
queued behind it too, at once: each would wait as long again for the same answer, and a request must be
answered within one timeout, not one per batch ahead of it. Nothing of them was stored.

The in-memory backend commits each write at once instead: there is nothing to share a commit with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from signoff.core.audit import Keyring
from signoff.core.errors import LedgerUnavailable
from signoff.ledger.keys import Apply, Key, Write, own_key, written
from signoff.ledger.outage import Outage
from signoff.ledger.records import Change, Stored
from signoff.ledger.stores import Backend

MAX_BATCH = 256
"""Writes per batch: enough to share one commit among many callers, small enough to keep one batch short."""

Step = Callable[[Any], Change]


@dataclass(eq=False, slots=True)
class _Job:
    key: Key | None
    """The record the step reads; None for audit events alone."""
    step: Step
    done: asyncio.Future[Change] | None = field(default=None)


class Committer:
    def __init__(self, backend: Backend, keyring: Keyring, outage: Outage) -> None:
        self.backend = backend
        self.keyring = keyring
        self.outage = outage
        """Told of every commit: a failure, or a success and whether it stored anything."""
        self._queue: list[_Job] = []
        self._task: asyncio.Task[None] | None = None
        self._inline = False

    async def write(self, key: Key | None, step: Step) -> Change:
        """Run `step` on the record `key` names (None where an insert key finds none yet, or a principal
        is new) and store its change; the change as stored. A step's exception is the caller's, and
        nothing of it is stored.

        With no commit in flight, a writer commits its own write: a batch of one, at a plain write's
        cost, with no task to start. Writers arriving meanwhile queue, and a committer task takes them
        when this write is done, or its caller cancelled (whose write then lands whole or not at all, as
        the backend's transaction ends). A queued write is the task's: cancelling its caller does not
        undo it."""
        job = _Job(key, step)
        shared = self.backend.group_commit
        if shared:
            if self._inline or (self._task is not None and not self._task.done()):
                job.done = asyncio.get_running_loop().create_future()
                self._queue.append(job)
                return await job.done
            self._inline = True
        outcome: Change | Exception | None = None

        def apply(stored: dict[Key, Stored]) -> list[Write]:
            nonlocal outcome
            outcome, write = _step(job, stored)
            return [] if write is None else [write]

        try:
            changes = await self._transact(() if key is None else (key,), apply)
        finally:
            if shared:
                self._inline = False
                if self._queue:
                    self._task = asyncio.get_running_loop().create_task(self._commit_queued())
        if isinstance(outcome, Exception):
            raise outcome
        assert outcome is not None
        return changes[0] if changes else outcome

    async def drain(self) -> None:
        """Wait for writes still queued, so closing never drops an acknowledged-to-be write."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _commit_queued(self) -> None:
        while self._queue:
            jobs, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                _settle(jobs, await self._commit(jobs))
            except LedgerUnavailable as exc:
                _settle(jobs, [exc] * len(jobs))
            except Exception:  # one job's write was refused: run each alone so only that one fails
                for job in jobs:
                    try:
                        _settle([job], await self._commit([job]))
                    except Exception as exc:  # the caller gets it, whatever it is
                        _settle([job], [exc])

    async def _transact(self, keys: Sequence[Key], apply: Apply) -> list[Change]:
        try:
            changes = await self.backend.transact(keys, apply, self.keyring.current)
        except LedgerUnavailable as exc:
            self.outage.failed(exc)
            queued, self._queue = self._queue, []
            _settle(queued, [exc] * len(queued))
            raise
        self.outage.recovered(wrote=bool(changes))
        return changes

    async def _commit(self, jobs: Sequence[_Job]) -> list[Change | Exception]:
        outcomes: list[Change | Exception] = []
        written_by: list[int] = []

        def apply(stored: dict[Key, Stored]) -> list[Write]:
            nonlocal outcomes, written_by
            outcomes, writes, written_by = _run(jobs, stored)
            return writes

        keys = list(dict.fromkeys(job.key for job in jobs if job.key is not None))
        changes = await self._transact(keys, apply)
        for index, change in zip(written_by, changes, strict=True):
            outcomes[index] = change
        return outcomes


def _run(
    jobs: Iterable[_Job], current: dict[Key, Stored]
) -> tuple[list[Change | Exception], list[Write], list[int]]:
    """Apply each job's step to the records as the jobs before it left them: each job's outcome, the
    writes to store, and the job each write is the outcome of."""
    outcomes: list[Change | Exception] = []
    writes: list[Write] = []
    written_by: list[int] = []
    for index, job in enumerate(jobs):
        outcome, write = _step(job, current)
        outcomes.append(outcome)
        if write is not None:
            writes.append(write)
            written_by.append(index)
    return outcomes, writes, written_by


def _step(job: _Job, current: dict[Key, Stored]) -> tuple[Change | Exception, Write | None]:
    """Run one job's step on its record as `current` holds it (no I/O), and update `current` with what it
    writes: its outcome, and the write to store if any."""
    key = job.key
    found = None if key is None else current.get(key)
    if key is not None and key.inserts and found is not None:  # as this batch left it, if it changed it
        found = current.get(own_key(key, found.record), found)
    try:
        if found is None and key is not None and key.must_exist:
            raise key.missing()
        change = job.step(None if found is None else found.record)
    except Exception as exc:  # a refusal (AlreadyDecided, …) is its caller's
        return exc, None
    if key is None:
        return change, Write(change)
    if key.inserts and found is not None:
        return change, None  # asked before: nothing to write
    stored = Stored(written(key, change), found.rev + 1 if found else 1)
    current[key] = stored
    if key.inserts:
        current[own_key(key, stored.record)] = stored
    return change, Write(change, key, None if found is None else found.rev)


def _settle(jobs: Sequence[_Job], outcomes: Sequence[Change | BaseException]) -> None:
    for job, outcome in zip(jobs, outcomes, strict=True):
        if job.done is None or job.done.done():  # the caller was cancelled; its write stands
            continue
        if isinstance(outcome, BaseException):
            job.done.set_exception(outcome)
        else:
            job.done.set_result(outcome)
