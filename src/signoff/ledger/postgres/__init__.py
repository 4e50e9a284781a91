"""The PostgreSQL ledger: one truth for many workers on many machines (see `backend`)."""

from __future__ import annotations

from typing import Unpack

from signoff.core.audit import Keyring
from signoff.ledger.base import Ledger
from signoff.ledger.postgres.backend import PostgresBackend
from signoff.ledger.postgres.schema import SCHEMA_VERSION, upgrade
from signoff.ledger.records import Clock
from signoff.ledger.stores import Pool, PoolOptions


class PostgresLedger(Ledger):
    """`dsn` is a libpq connection string or URL; `schema` holds the ledger's tables (created on start).
    `pool` options (`PoolOptions`): a pool of 10 connections by default."""

    _backend: PostgresBackend

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "signoff",
        clock: Clock | None = None,
        keyring: Keyring | None = None,
        **pool: Unpack[PoolOptions],
    ) -> None:
        backend = PostgresBackend(dsn, schema=schema, pool=Pool.of(pool, size=10))
        super().__init__(backend, clock=clock, keyring=keyring)

    @property
    def schema(self) -> str:
        return self._backend.schema


__all__ = ["SCHEMA_VERSION", "PostgresLedger", "upgrade"]
