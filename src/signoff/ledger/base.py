"""The ledger: durable approvals, first-wins decisions, single-use claims, grants, tasks, chats, principals
and the audit that records them all, over any backend.

A ledger is its lifecycle and its parts, one per concept, each named for what it holds:
`ledger.approvals.open(...)`, `ledger.tasks.get(...)`, `ledger.audit.verify()`. The parts share one
`Backend` (`ledger/stores.py`), which supplies a store per concept and the one transaction every audited
write shares. All the rules live in the parts and in the core; a backend only reads and stores.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from signoff.core.audit import Keyring
from signoff.ledger.approvals import Approvals
from signoff.ledger.audit import Audit
from signoff.ledger.chats import Chats
from signoff.ledger.grants import Grants
from signoff.ledger.outbox import Outbox
from signoff.ledger.parts import Shared
from signoff.ledger.principals import Principals
from signoff.ledger.records import Clock
from signoff.ledger.stores import Backend
from signoff.ledger.tasks import Tasks


class Ledger:
    """One async interface over every backend. Use as `async with ledger:` or `start()` / `close()`."""

    def __init__(
        self, backend: Backend, *, clock: Clock | None = None, keyring: Keyring | None = None
    ) -> None:
        shared = Shared(backend, clock=clock, keyring=keyring)
        self._shared, self._backend = shared, backend
        self.approvals = Approvals(shared)
        self.grants = Grants(shared)
        self.audit = Audit(shared)
        self.tasks = Tasks(shared)
        self.chats = Chats(shared)
        self.principals = Principals(shared)
        self.outbox = Outbox(shared)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, and create or migrate the schema."""
        await self._backend.start()

    async def close(self) -> None:
        """Finish queued writes and release connections; waiters in this process stop being woken by other
        processes."""
        await self._shared.committer.drain()
        await self._shared.watcher.close()
        await self._backend.close()

    async def upgrade(self) -> tuple[int, int]:
        """Create or migrate the schema without serving (`signoff db upgrade`); returns its version
        before and after. `start` does the same, so this is for operators who migrate ahead of a rollout.
        A ledger with no schema of its own has version 0."""
        return await self._backend.upgrade()
