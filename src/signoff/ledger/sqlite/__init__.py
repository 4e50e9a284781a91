"""The SQLite ledger: the embedded default, one file in WAL mode, safe across processes."""

from __future__ import annotations

from pathlib import Path

from signoff.core.audit import Keyring
from signoff.ledger.base import Ledger
from signoff.ledger.records import Clock
from signoff.ledger.sqlite.backend import WAIT, SqliteBackend, Synchronous
from signoff.ledger.sqlite.schema import SCHEMA_VERSION


class SqliteLedger(Ledger):
    """`synchronous="normal"` (the default) survives any process crash, SIGKILL included; `"full"` also
    survives power loss, at the cost of an fsync per commit. `busy_timeout` is the seconds an operation
    waits for another process's write lock before it fails as `LedgerUnavailable`."""

    _backend: SqliteBackend

    def __init__(
        self,
        path: str | Path = "signoff.db",
        *,
        synchronous: Synchronous = "normal",
        poll_interval: float = 0.05,
        busy_timeout: float = WAIT,
        clock: Clock | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        backend = SqliteBackend(
            path, synchronous=synchronous, poll_interval=poll_interval, busy_timeout=busy_timeout
        )
        super().__init__(backend, clock=clock, keyring=keyring)

    @property
    def path(self) -> Path:
        return self._backend.path


__all__ = ["SCHEMA_VERSION", "SqliteLedger", "Synchronous"]
