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
from signoff.core.errors import NotFound
from signoff.ledger.base import Ledger

log = logging.getLogger("signoff.server")


class ApprovalFeed:
    def __init__(self, ledger: Ledger, *, interval: float = 0.2, backlog: int = 1000) -> None:
        self.ledger = ledger
        self.interval = interval
        self.backlog = backlog
        self._readers: set[asyncio.Queue[Approval | None]] = set()
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

    async def follow(self) -> AsyncIterator[Approval]:
        """The pending approvals now, then every change from here on."""
        reader: asyncio.Queue[Approval | None] = asyncio.Queue(self.backlog)
        self._readers.add(reader)
        try:
            for pending in await self.ledger.approvals(state=State.PENDING):
                yield pending
            while (changed := await reader.get()) is not None:
                yield changed
        finally:
            self._readers.discard(reader)

    async def _tail(self, after: int) -> None:
        while True:
            try:
                entries = await self.ledger.audit(after, 500)
            except Exception:  # a ledger hiccup delays the feed; it must not end it
                log.exception("the approval feed could not read the audit log")
                entries = []
            changed = list(dict.fromkeys(e.subject for e in entries if e.subject.startswith("apr_")))
            for approval_id in changed:
                with contextlib.suppress(NotFound):
                    self._publish(await self.ledger.get(approval_id))
            if entries:
                after = entries[-1].seq
            else:
                await asyncio.sleep(self.interval)

    def _publish(self, approval: Approval) -> None:
        for reader in list(self._readers):
            if reader.full():  # this far behind, the reader is better off reconnecting for a fresh snapshot
                self._readers.discard(reader)
                while not reader.empty():
                    reader.get_nowait()
                reader.put_nowait(None)
            else:
                reader.put_nowait(approval)
