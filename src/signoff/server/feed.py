"""The live feeds that pages and inboxes follow: approval changes, and task changes.

Each tails a numbered log in the ledger rather than listening to this process's own calls, so one poller
per server sees every change, whichever process made it (another worker, the CLI), in order; and a reader
that connects late loses nothing it needs, since it starts from a snapshot.

- Approvals: every change is an audit entry, so the feed tails the audit log.
- Tasks: progress is not audited (it is frequent, and only the newest value matters), so the feed tails
  the tasks' own change numbers, and wakes at once when this process changed a task.

A reader is never dropped, however slowly it reads: what it has not read yet is coalesced per record
(`Unread`), so it holds at most one change per record it follows (its chat's, or all of them), and a slow
page catches up on the records' current states rather than on a backlog of states already replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from signoff.core.approval import Approval, State
from signoff.core.errors import LedgerUnavailable, NotFound
from signoff.core.task import Task, TaskState
from signoff.ledger.background import Background
from signoff.ledger.base import Ledger, outage_of

log = logging.getLogger("signoff.server")
T = TypeVar("T", Approval, Task)
PAGE = 500


class Unread(Generic[T]):
    """One reader's changes not read yet: the latest (number, record) of each record, at most one each.

    A change to a record already waiting replaces it where it stands, so each record is shown at most once
    per pass over what waits, in the order it first changed since the reader last took it: a record that
    keeps changing (a task reporting progress) cannot keep itself, or the others, from being shown, and is
    shown as it is when taken. Moving it to the end instead would keep the ledger's order across records,
    but let a record that changes faster than the reader reads be put off again and again. Either way each
    record's own states only move forward, and its last one (a task's end, a decision) is never lost: it
    replaces nothing newer, and nothing replaces it but a newer one.
    """

    def __init__(self, chat_id: str | None) -> None:
        self.chat_id = chat_id
        self._changes: OrderedDict[str, tuple[int, T]] = OrderedDict()  # O(1) to take the first one
        self._ready = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        """How many records wait: at most one per record followed, however long the reader does not read."""
        return len(self._changes)

    def put(self, seq: int, record: T) -> None:
        """Keep `record` as its latest change, unless it is another chat's: those are never shown here,
        so they take no room."""
        if self.chat_id in (None, record.chat_id):
            self._changes[record.id] = (seq, record)
            self._ready.set()

    def close(self) -> None:
        """What waits is still read; then the reader ends."""
        self._closed = True
        self._ready.set()

    async def take(self) -> tuple[int, T] | None:
        """The change waiting longest, once there is one; `None` once closed and read to the end."""
        while not self._changes:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._changes.popitem(last=False)[1]


class Feed(ABC, Generic[T]):
    def __init__(self, ledger: Ledger, *, interval: float = 0.2) -> None:
        self.ledger = ledger
        self.interval = interval
        self._readers: set[Unread[T]] = set()
        self._tailing = Background(f"signoff-{type(self).__name__}")
        self._wake = asyncio.Event()
        self._closed = False

    @abstractmethod
    async def _head(self) -> int:
        """The newest number in the log."""

    @abstractmethod
    async def _snapshot(self, chat_id: str | None) -> list[T]:
        """What a new reader is shown first."""

    @abstractmethod
    async def _read(self, after: int) -> tuple[list[tuple[int, T]], int, bool]:
        """The changes after `after`, each with its number; where the next read starts; whether a full
        page came back (more may be waiting)."""

    async def start(self) -> None:
        after = await self._head()
        self._tailing.ensure(lambda: self._tail(after))

    async def close(self) -> None:
        self._closed = True  # the loop also ends on this, should a library it awaits swallow the cancel
        self._wake.set()
        await self._tailing.stop()
        for reader in self._readers:
            reader.close()

    async def follow(self, chat_id: str | None = None) -> AsyncIterator[T]:
        """The snapshot now, then each record that changes, as it is when this reader takes it: changes
        it has not read yet are coalesced per record (see `Unread`); only `chat_id`'s when given. It ends
        only when the feed closes."""
        unread: Unread[T] = Unread(chat_id)
        self._readers.add(unread)
        try:
            seen = await self._head()  # the snapshot below already shows everything up to here
            for record in await self._snapshot(chat_id):
                yield record
            while (change := await unread.take()) is not None:
                seq, record = change
                if seq > seen:
                    yield record
        finally:
            self._readers.discard(unread)

    async def _tail(self, after: int) -> None:
        """Poll while someone reads the feed; with no reader, only keep up with its end (a new reader
        starts from a snapshot, so nothing older is owed to it)."""
        while not self._closed:
            full = False
            try:
                if not self._readers:
                    latest = await self._head()
                    if not self._readers:  # a reader who joined meanwhile may need what comes after `after`
                        after = latest
                else:
                    changes, after, full = await self._read(after)
                    for seq, record in changes:
                        self._publish(seq, record)
            except LedgerUnavailable as exc:  # told once for the process, by its outage; the feed waits on
                outage_of(self.ledger).failed(exc)
            except Exception:  # a bug: it delays the feed, and must not end it
                log.exception("the %s could not read the ledger", type(self).__name__)
            if not full:
                # `asyncio.timeout`, not `wait_for`: on Python 3.11, a cancel landing as the timeout fires
                # comes out of `wait_for` as a TimeoutError, and the loop went on.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._wake.wait()
                self._wake.clear()

    def _publish(self, seq: int, record: T) -> None:
        for reader in self._readers:
            reader.put(seq, record)


class ApprovalFeed(Feed[Approval]):
    async def _head(self) -> int:
        return await self.ledger.audit.last_seq()

    async def _snapshot(self, chat_id: str | None) -> list[Approval]:
        return await self.ledger.approvals.query(chat_id=chat_id, state=State.PENDING)

    async def _read(self, after: int) -> tuple[list[tuple[int, Approval]], int, bool]:
        entries = await self.ledger.audit.entries(after, PAGE)
        latest = {e.subject: e.seq for e in entries if e.subject.startswith("apr_")}
        changes = []
        for approval_id, seq in latest.items():
            with contextlib.suppress(NotFound):
                changes.append((seq, await self.ledger.approvals.get(approval_id)))
        return changes, entries[-1].seq if entries else after, len(entries) == PAGE


class TaskFeed(Feed[Task]):
    async def start(self) -> None:
        self._deafen = self.ledger.tasks.on_change(self._wake.set)
        await super().start()

    async def close(self) -> None:
        self._deafen()
        await super().close()

    async def _head(self) -> int:
        return await self.ledger.tasks.last_seq()

    async def _snapshot(self, chat_id: str | None) -> list[Task]:
        tasks = await self.ledger.tasks.query(chat_id=chat_id)
        return [t for t in tasks if t.state in (TaskState.PENDING, TaskState.RUNNING)]

    async def _read(self, after: int) -> tuple[list[tuple[int, Task]], int, bool]:
        changes = await self.ledger.tasks.changes(after, PAGE)
        return [(t.seq, t) for t in changes], changes[-1].seq if changes else after, len(changes) == PAGE
