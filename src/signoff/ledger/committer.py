"""Every audited write of every store, as a pure step over the record its key names, committed in batches.

A shared ledger serializes its writers: the audit log is one hash chain, and the first decision must win.
So every write costs a full round trip to the server (on PostgreSQL a WAL flush, on SQLite a hop to the
ledger's thread), one after another. Group commit makes that cost per batch instead of per write: a
process's writers hand their steps to one committer task, which has the backend load every record the
batch touches in one go, runs the steps in order in Python (a later step sees an earlier one's result, so
two decisions on one approval in one batch still have exactly one winner), and stores all the changes in
one atomic write. A caller returns only after that write is durable, so nothing acknowledged is lost. A
batch of one costs what a plain write did, so latency with no queue is unchanged.

The in-memory backend commits each write at once instead: there is nothing to share a commit with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from signoff.core.audit import Keyring
from signoff.core.errors import LedgerUnavailable, NotFound
from signoff.ledger.keys import INSERTS, MUST_EXIST, Key, Stored, Write, own_key, written
from signoff.ledger.records import Change
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
    def __init__(self, backend: Backend, keyring: Keyring) -> None:
        self.backend = backend
        self.keyring = keyring
        self._queue: list[_Job] = []
        self._task: asyncio.Task[None] | None = None

    async def write(self, key: Key | None, step: Step) -> Change:
        """Run `step` on the record `key` names (None where an insert key finds none yet, or a principal
        is new) and store its change; the change as stored. A step's exception is the caller's, and
        nothing of it is stored."""
        job = _Job(key, step)
        if not self.backend.group_commit:
            [outcome] = await self._commit([job])
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        job.done = asyncio.get_running_loop().create_future()
        self._queue.append(job)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._commit_queued())
        return await job.done

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

    async def _commit(self, jobs: Sequence[_Job]) -> list[Change | Exception]:
        outcomes: list[Change | Exception] = []
        written_by: list[int] = []

        def apply(stored: dict[Key, Stored]) -> list[Write]:
            nonlocal outcomes, written_by
            outcomes, writes, written_by = _run(jobs, stored)
            return writes

        keys = list(dict.fromkeys(job.key for job in jobs if job.key is not None))
        changes = await self.backend.transact(keys, apply, self.keyring.current)
        for index, change in zip(written_by, changes, strict=True):
            outcomes[index] = change
        return outcomes


def _run(
    jobs: Iterable[_Job], stored: dict[Key, Stored]
) -> tuple[list[Change | Exception], list[Write], list[int]]:
    """Apply each job's step to the records as the jobs before it left them (pure: no I/O): each job's
    outcome, the writes to store, and the job each write is the outcome of."""
    current = dict(stored)
    outcomes: list[Change | Exception] = []
    writes: list[Write] = []
    written_by: list[int] = []
    for index, job in enumerate(jobs):
        key = job.key
        found = current.get(key) if key is not None else None
        if isinstance(key, INSERTS) and found is not None:  # as this batch left it, if it changed it
            found = current.get(own_key(key, found.record), found)
        try:
            if isinstance(key, MUST_EXIST) and found is None:
                raise NotFound(f"no {type(key).__name__.removesuffix('Key').lower()} {key.id}")
            change = job.step(found.record if found else None)
        except Exception as exc:  # a refusal (AlreadyDecided, …) is its caller's
            outcomes.append(exc)
            continue
        outcomes.append(change)
        if isinstance(key, INSERTS) and found is not None:
            continue  # asked before: nothing to write
        writes.append(Write(change, key, found.rev if found else None))
        written_by.append(index)
        if key is not None:
            rev = found.rev + 1 if found else 1
            record = written(key, change)
            current[key] = Stored(record, rev)
            if isinstance(key, INSERTS):
                current[own_key(key, record)] = Stored(record, rev)
    return outcomes, writes, written_by


def _settle(jobs: Sequence[_Job], outcomes: Sequence[Change | BaseException]) -> None:
    for job, outcome in zip(jobs, outcomes, strict=True):
        if job.done is None or job.done.done():  # the caller was cancelled; its write stands
            continue
        if isinstance(outcome, BaseException):
            job.done.set_exception(outcome)
        else:
            job.done.set_result(outcome)
