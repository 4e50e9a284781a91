"""The PostgreSQL ledger: one truth for many workers on many machines (see `backend`)."""

from __future__ import annotations

from signoff.core.audit import Keyring
from signoff.ledger.base import Ledger
from signoff.ledger.postgres.backend import PostgresBackend
from signoff.ledger.postgres.schema import SCHEMA_VERSION, upgrade
from signoff.ledger.records import Clock


class PostgresLedger(Ledger):
    """`dsn` is a libpq connection string or URL; `schema` holds the ledger's tables (created on start).

    `connect_timeout` bounds reaching the server; `pool_timeout` bounds waiting here for one of the
    `pool_size` connections, which a busy worker does long before the server is slow."""

    backend: PostgresBackend

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "signoff",
        pool_size: int = 10,
        connect_timeout: float = 5.0,
        pool_timeout: float = 30.0,
        poll_interval: float = 1.0,
        clock: Clock | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        backend = PostgresBackend(
            dsn,
            schema=schema,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
            poll_interval=poll_interval,
        )
        super().__init__(backend, clock=clock, keyring=keyring)

    @property
    def schema(self) -> str:
        return self.backend.schema


__all__ = ["SCHEMA_VERSION", "PostgresLedger", "upgrade"]
