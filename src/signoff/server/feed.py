"""The live feeds that pages and inboxes follow: approval changes, and task changes.

Each tails a numbered log in the ledger rather than listening to this process's own calls, so one poller
per server sees every change, whichever process made it (another worker, the CLI), in order; and a reader
that connects late loses nothing it needs, since it starts from a snapshot.

- Approvals: every change is an audit entry, so the feed tails the audit log.
- Tasks: progress is not audited (it is frequent, and only the newest value matters), so the feed tails
  the tasks' own change numbers, and wakes at once when this process changed a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from signoff.core.approval import Approval, State
from signoff.core.errors import NotFound
from signoff.core.task import Task, TaskState
from signoff.ledger.background import Background
from signoff.ledger.base import Ledger

log = logging.getLogger("signoff.server")
T = TypeVar("T", Approval, Task)
PAGE = 500


class Feed(ABC, Generic[T]):
    def __init__(self, ledger: Ledger, *, interval: float = 0.2, backlog: int = 1000) -> None:
        self.ledger = ledger
        self.interval = interval
        self.backlog = backlog
        self._readers: set[asyncio.Queue[tuple[int, T] | None]] = set()
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
            reader.put_nowait(None)

    async def follow(self, chat_id: str | None = None) -> AsyncIterator[T]:
        """The snapshot now, then each record that changes, as it is after the change (two changes within
        one poll show as the second); only `chat_id`'s when given."""
        reader: asyncio.Queue[tuple[int, T] | None] = asyncio.Queue(self.backlog)
        self._readers.add(reader)
        try:
            seen = await self._head()  # the snapshot below already shows everything up to here
            for record in await self._snapshot(chat_id):
                yield record
            while (change := await reader.get()) is not None:
                seq, record = change
                if seq > seen and chat_id in (None, record.chat_id):
                    yield record
        finally:
            self._readers.discard(reader)

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
            except Exception:  # a ledger hiccup delays the feed; it must not end it
                log.exception("the %s could not read the ledger", type(self).__name__)
            if not full:
                # `asyncio.timeout`, not `wait_for`: on Python 3.11, a cancel landing as the timeout fires
                # comes out of `wait_for` as a TimeoutError, and the loop went on.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._wake.wait()
                self._wake.clear()

    def _publish(self, seq: int, record: T) -> None:
        for reader in list(self._readers):
            if reader.full():  # this far behind, the reader is better off reconnecting for a fresh snapshot
                self._readers.discard(reader)
                while not reader.empty():
                    reader.get_nowait()
                reader.put_nowait(None)
            else:
                reader.put_nowait((seq, record))


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
