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
from signoff.core.errors import LedgerUnavailable, LedgerWiped
from signoff.ledger.approvals import Approvals
from signoff.ledger.audit import Audit
from signoff.ledger.chats import Chats
from signoff.ledger.grants import Grants
from signoff.ledger.outage import Outage
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


PROBE = "probe"
PROBE_EXPIRED = -3600.0
"""The write `probe` makes: a lease named `PROBE` taken with an expiry an hour past, so that every probe, of
any process and whatever the clocks of its machine, takes it anew and writes its row. It holds nothing."""


def outage_of(ledger: Ledger) -> Outage:
    """The ledger's outages as this process meets them (see `ledger.outage`): what its background loops
    tell, and what `/readyz` reads."""
    return ledger._shared.outage


async def probe(ledger: Ledger) -> None:
    """Ask the ledger something cheap and tell its outage how that went: raises `LedgerUnavailable`. While
    its writes fail, store something nobody reads too (`LedgerUnwritable` if refused): a ledger that can't
    write still answers reads, and only a write stored shows that it writes again, in every process.

    A ledger found to have lost its data (`LedgerWiped`) ends every wait in this process with that error:
    no decision will come for an approval that is gone."""
    outage = outage_of(ledger)
    try:
        await ledger._backend.ping()
    except LedgerUnavailable as exc:
        outage.failed(exc)
        if isinstance(exc, LedgerWiped):
            ledger._shared.notifier.fail(exc.gone)
        raise
    outage.recovered()
    if outage.unwritable:
        await ledger._shared.lease(PROBE, PROBE_EXPIRED)


async def volatile(ledger: Ledger) -> str | None:
    """Why the ledger's server would forget everything it holds when it restarts (a Redis that keeps
    nothing on disk, or that won't say), asked before the ledger starts; None when it keeps its data."""
    return await ledger._backend.volatile()
