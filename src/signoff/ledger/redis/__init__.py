"""The Redis ledger: approvals in hashes, changes as Lua compare-and-set, the audit log as a stream (see
`backend`)."""

from __future__ import annotations

from typing import Unpack

from redis import asyncio as aioredis

from signoff.core.audit import Keyring
from signoff.ledger.base import Ledger
from signoff.ledger.records import Clock
from signoff.ledger.redis.backend import RedisBackend
from signoff.ledger.redis.scripts import SCHEMA_VERSION
from signoff.ledger.stores import Pool, PoolOptions


class RedisLedger(Ledger):
    """`url` is a redis-py URL (`redis://[:password@]host:port/db`, `rediss://` for TLS); every key
    starts with `prefix`, so several ledgers can share one database. `pool` options (`PoolOptions`): a
    pool of 20 connections by default."""

    _backend: RedisBackend

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "signoff",
        clock: Clock | None = None,
        keyring: Keyring | None = None,
        **pool: Unpack[PoolOptions],
    ) -> None:
        backend = RedisBackend(url, prefix=prefix, pool=Pool.of(pool, size=20))
        super().__init__(backend, clock=clock, keyring=keyring)

    @property
    def prefix(self) -> str:
        return self._backend.prefix

    @property
    def redis(self) -> aioredis.Redis:
        return self._backend.redis


__all__ = ["SCHEMA_VERSION", "RedisLedger"]
