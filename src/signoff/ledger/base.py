"""The ledger: durable approvals, first-wins decisions, single-use claims, grants, tasks, chats, principals
and the audit that records them all, over any backend.

A ledger is its parts, one per concept (`ledger/approvals.py`, `tasks.py`, `chats.py`, `principals.py`),
over one `Backend` (`ledger/stores.py`) that supplies a store per concept and the one transaction every
audited write shares. All the rules live in the parts and in the core; a backend only reads and stores.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from signoff.ledger.approvals import ApprovalLedger
from signoff.ledger.chats import ChatLedger
from signoff.ledger.principals import PrincipalLedger
from signoff.ledger.tasks import TaskLedger


class Ledger(ApprovalLedger, TaskLedger, ChatLedger, PrincipalLedger):
    """One async interface over every backend. Use as `async with ledger:` or `start()` / `close()`."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, and create or migrate the schema."""
        await self.backend.start()

    async def close(self) -> None:
        """Finish queued writes and release connections; waiters in this process stop being woken by other
        processes."""
        await self.committer.drain()
        await self.watcher.close()
        await self.backend.close()

    async def upgrade(self) -> tuple[int, int]:
        """Create or migrate the schema without serving (`signoff db upgrade`); returns its version
        before and after. `start` does the same, so this is for operators who migrate ahead of a rollout.
        A ledger with no schema of its own has version 0."""
        return await self.backend.upgrade()
