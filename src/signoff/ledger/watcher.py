"""Wakes this process's waiters when another process decides: the CLI, another worker, a channel.

One watcher per ledger runs while anyone here waits. It listens on the backend's channel (PostgreSQL's
`NOTIFY`, Redis pub/sub; SQLite has none) and wakes a waiter the moment its decision is heard. Channels
drop messages (a dropped connection, a restart), so every `poll_interval` it also reads the approvals its
process waits on: a missed message only delays a wakeup, never loses it. While the ledger is away it tries
again every `poll_interval`, and tells the process's `Outage`, which says so once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from signoff.core.approval import Approval
from signoff.core.errors import LedgerUnavailable
from signoff.ledger.background import Background
from signoff.ledger.notifier import Notifier
from signoff.ledger.outage import Outage
from signoff.ledger.stores import Backend

log = logging.getLogger("signoff.ledger")

_CHUNK = 500
"""Approvals read at once: a backend's statement takes only so many parameters."""


class Watcher:
    def __init__(self, backend: Backend, notifier: Notifier, outage: Outage) -> None:
        self.backend = backend
        self.notifier = notifier
        self.outage = outage
        self._running = Background("signoff-watcher")

    def watch(self) -> None:
        """Someone here started waiting: make sure the watcher runs."""
        self._running.ensure(self._run)

    async def close(self) -> None:
        await self._running.stop()

    async def _run(self) -> None:
        poll = self.backend.poll_interval
        while self.notifier.watched():
            try:
                async with self.backend.listen() as heard:
                    swept = -poll  # the first pass reads: a decision may have landed before we listened
                    while ids := self.notifier.watched():
                        if time.monotonic() - swept >= poll:
                            if await self.backend.moved():
                                await self._wake(ids)
                            self.outage.recovered()
                            swept = time.monotonic()
                        for news in await heard(max(0.0, swept + poll - time.monotonic())):
                            if isinstance(news, Approval):  # the decided record itself: no read needed
                                self.notifier.notify(news)
                            elif self.notifier.watches(news):
                                await self._wake([news])
            except LedgerUnavailable as exc:  # the waiters stay parked: listen again
                self.outage.failed(exc)
                await asyncio.sleep(poll)
            except Exception:  # a bug, not an outage: said, and the waiters still stay parked
                log.exception("the ledger's watcher failed; retrying")
                await asyncio.sleep(poll)

    async def _wake(self, ids: list[str]) -> None:
        for start in range(0, len(ids), _CHUNK):
            for approval in await self.backend.approvals.decided(ids[start : start + _CHUNK]):
                self.notifier.notify(approval)
