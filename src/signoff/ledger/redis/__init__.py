"""The Redis ledger: approvals in hashes, changes as Lua compare-and-set, the audit log as a stream (see
`backend`)."""

from __future__ import annotations

from redis import asyncio as aioredis

from signoff.core.audit import Keyring
from signoff.ledger.base import Ledger
from signoff.ledger.records import Clock
from signoff.ledger.redis.backend import RedisBackend
from signoff.ledger.redis.scripts import SCHEMA_VERSION


class RedisLedger(Ledger):
    """`url` is a redis-py URL (`redis://[:password@]host:port/db`, `rediss://` for TLS); every key
    starts with `prefix`, so several ledgers can share one database.

    `connect_timeout` bounds reaching the server; `pool_timeout` bounds waiting here for one of the
    `pool_size` connections. The two are apart because a busy worker queues for its pool long before
    the server is slow, and a call refused after a short queue fails a healthy ledger."""

    backend: RedisBackend

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "signoff",
        pool_size: int = 20,
        connect_timeout: float = 5.0,
        pool_timeout: float = 30.0,
        poll_interval: float = 1.0,
        clock: Clock | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        backend = RedisBackend(
            url,
            prefix=prefix,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
            poll_interval=poll_interval,
        )
        super().__init__(backend, clock=clock, keyring=keyring)

    @property
    def prefix(self) -> str:
        return self.backend.prefix

    @property
    def redis(self) -> aioredis.Redis:
        return self.backend.redis


__all__ = ["SCHEMA_VERSION", "RedisLedger"]
