"""What every part of a ledger shares: its backend, its clock and key, its waiters and its one writer.

A `Ledger` is its parts, one per concept (approvals, grants, audit, tasks, chats, principals), each holding
the rules of its concept over the backend's store for it. They are built over one `Shared`, so all of them
write through one committer and one audit chain, and each part's interface stays the size of its concept.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time

from signoff.core.audit import AuditEvent, Keyring
from signoff.core.errors import LedgerUnavailable
from signoff.ledger.committer import Committer
from signoff.ledger.notifier import Notifier
from signoff.ledger.outage import Outage
from signoff.ledger.records import Change, Clock
from signoff.ledger.stores import Backend
from signoff.ledger.watcher import Watcher


class Shared:
    sweep_lease = 5.0
    """Seconds one process's sweepers hold their leases: if it dies, another takes over after this."""

    def __init__(
        self, backend: Backend, *, clock: Clock | None = None, keyring: Keyring | None = None
    ) -> None:
        self.backend = backend
        self.clock = clock or time.time
        self.keyring = keyring or _default_keyring(backend)
        """The audit key the chain, decisions and grants are proven with, and older ones they may carry."""
        self.notifier = Notifier()
        self.outage = Outage()
        """The ledger's outages as this process meets them: every write and every background loop tells it."""
        self.committer = Committer(backend, self.keyring, self.outage)
        self.watcher = Watcher(backend, self.notifier, self.outage)
        self.told = asyncio.Event()
        """Set when this process writes notices, so its outbox worker need not wait for its next look."""
        self.holder = secrets.token_hex(8)
        """This process, as it holds leases and claims."""
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        """This process as a person finds it: where a claimed call ran."""

    async def record(self, action: str, subject: str, actor: str, **detail: object) -> None:
        """Append an event that changes no state (a failed approver, a refused forgery, a grant used),
        stamped with the ledger's clock like every transition."""
        event = AuditEvent(at=self.clock(), actor=actor, action=action, subject=subject, detail=detail)
        await self.committer.write(None, lambda _: Change(events=(event,)))

    async def lease(self, name: str, ttl: float | None = None) -> bool:
        """Whether this process holds the sweeper lease `name` now (taking or renewing it, for `ttl`
        seconds, by default `sweep_lease`). One taken is a row written: it tells the outage so."""
        ttl = self.sweep_lease if ttl is None else ttl
        try:
            held = await self.backend.lease(name, self.holder, self.clock(), ttl)
        except LedgerUnavailable as exc:
            self.outage.failed(exc)
            raise
        self.outage.recovered(wrote=held)
        return held


class Part:
    """One concept's part of a ledger. `clock` is the ledger's: what its records are stamped with."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self.clock = shared.clock


def _default_keyring(backend: Backend) -> Keyring:
    """The key every process using this ledger shares: `SIGNOFF_AUDIT_KEY_FILE`, or the one in the user's
    data directory, made on first use (see `ledger.keyfile`). A ledger nobody else reads gets a key that
    lives as long as it does."""
    if not backend.shared:
        return Keyring.ephemeral()
    from signoff.ledger.keyfile import load_keyring

    return load_keyring().keyring
