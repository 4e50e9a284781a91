"""The live feed of approval changes that inboxes follow.

It tails the audit log rather than listening to this process's own calls: every change to an approval is
an audit entry, whichever process made it (another worker, the CLI), so one poller per server sees them
all, in order, and a reader that connects late loses nothing it needs (it starts from a snapshot).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from signoff.core.approval import Approval, State
from signoff.core.audit import AuditEntry
from signoff.core.errors import NotFound
from signoff.ledger.base import Ledger

log = logging.getLogger("signoff.server")


class ApprovalFeed:
    def __init__(self, ledger: Ledger, *, interval: float = 0.2, backlog: int = 1000) -> None:
        self.ledger = ledger
        self.interval = interval
        self.backlog = backlog
        self._readers: set[asyncio.Queue[tuple[int, Approval] | None]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        after = await self.ledger.last_seq()
        self._task = asyncio.get_running_loop().create_task(self._tail(after), name="signoff-approval-feed")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for reader in self._readers:
            reader.put_nowait(None)

    async def follow(self, chat_id: str | None = None) -> AsyncIterator[Approval]:
        """The pending approvals now, then each approval that changes, in its state after the change (two
        changes to one approval within one poll show as the second); only `chat_id`'s when given."""
        reader: asyncio.Queue[tuple[int, Approval] | None] = asyncio.Queue(self.backlog)
        self._readers.add(reader)
        try:
            seen = await self.ledger.last_seq()  # the snapshot below already shows everything up to here
            for pending in await self.ledger.approvals(chat_id=chat_id, state=State.PENDING):
                yield pending
            while (change := await reader.get()) is not None:
                seq, approval = change
                if seq > seen and chat_id in (None, approval.chat_id):
                    yield approval
        finally:
            self._readers.discard(reader)

    async def _tail(self, after: int) -> None:
        """Poll the audit log while someone reads the feed; with no reader, only keep up with its end
        (a new reader starts from a snapshot, so nothing older is owed to it)."""
        page = 500
        while True:
            entries = []
            try:
                if not self._readers:
                    latest = await self.ledger.last_seq()
                    if not self._readers:  # a reader who joined meanwhile may need what comes after `after`
                        after = latest
                else:
                    entries = await self.ledger.audit(after, page)
                    await self._publish_changes(entries)
            except Exception:  # a ledger hiccup delays the feed; it must not end it
                log.exception("the approval feed could not read the audit log")
            if entries:
                after = entries[-1].seq
            if len(entries) < page:
                await asyncio.sleep(self.interval)

    async def _publish_changes(self, entries: list[AuditEntry]) -> None:
        latest = {e.subject: e.seq for e in entries if e.subject.startswith("apr_")}
        for approval_id, seq in latest.items():
            with contextlib.suppress(NotFound):
                self._publish(seq, await self.ledger.get(approval_id))

    def _publish(self, seq: int, approval: Approval) -> None:
        for reader in list(self._readers):
            if reader.full():  # this far behind, the reader is better off reconnecting for a fresh snapshot
                self._readers.discard(reader)
                while not reader.empty():
                    reader.get_nowait()
                reader.put_nowait(None)
            else:
                reader.put_nowait((seq, approval))
