"""Wakes in-process waiters the moment an approval leaves `pending`.

Each waiter is one future: resolving it costs what asyncio itself costs, and nothing polls. Backends that
learn of decisions from other processes (SQLite's data_version, PostgreSQL's NOTIFY, Redis pub/sub) feed
what they learn into the same `notify`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from signoff.core.approval import Approval, State


class Notifier:
    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Future[Approval]]] = {}

    def subscribe(self, approval_id: str) -> asyncio.Future[Approval]:
        future: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(approval_id, []).append(future)
        return future

    def unsubscribe(self, approval_id: str, future: asyncio.Future[Approval]) -> None:
        waiters = self._waiters.get(approval_id)
        if waiters is None:
            return
        if future in waiters:
            waiters.remove(future)
        elif future.done() and not future.cancelled():
            future.exception()  # failed (see `fail`) while its waiter ended another way: nothing to tell
        if not waiters:
            del self._waiters[approval_id]

    def notify(self, approval: Approval) -> None:
        if approval.state is State.PENDING:
            return
        for future in self._waiters.pop(approval.id, ()):
            if not future.done():
                future.set_result(approval)

    def fail(self, error: Callable[[str], BaseException]) -> None:
        """End every wait with `error(approval_id)`: the approvals they wait on are gone (the ledger lost
        its data), and no decision will ever come for them."""
        waiters, self._waiters = self._waiters, {}
        for approval_id, futures in waiters.items():
            for future in futures:
                if not future.done():
                    future.set_exception(error(approval_id))

    def watches(self, approval_id: str) -> bool:
        return approval_id in self._waiters

    def watched(self) -> list[str]:
        """Ids someone in this process is waiting on: what a cross-process watcher must look after."""
        return list(self._waiters)
