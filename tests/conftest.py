"""Shared fixtures: every ledger contract test runs against every backend built so far.

With `SIGNOFF_TEST_WORKERS=N`, `scripts/test` runs the suite on pytest-xdist workers, a file to a worker
(`--dist loadfile`): a module's costly fixture (a fresh venv, the MCP conformance suite's run) is built
once. Each test has a PostgreSQL schema, a Redis prefix and ports of its own, and one that stops or
restarts a server uses a server of its own (`tests.test_faults.postgres_cluster`, `redis_server`), never
the machine's."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
import redis
from psycopg import sql

from signoff.demo.runtime import RUNTIMES
from signoff.ledger import Ledger, MemoryLedger, SqliteLedger, open_ledger
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.redis import RedisLedger

if TYPE_CHECKING:
    from tests.chats import Site

BACKENDS = ["memory", "sqlite", "postgres", "redis"]
SHARED = ["sqlite", "postgres", "redis"]
"""The backends several processes can share."""
POSTGRES = os.environ.get("SIGNOFF_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL server the tests use; each test gets a schema of its own there."""
REDIS = os.environ.get("SIGNOFF_TEST_REDIS", "redis://127.0.0.1:6379/0")
"""The Redis server the tests use; each test gets a key prefix of its own there."""
ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
os.environ.setdefault(
    "SIGNOFF_AUDIT_KEY_FILE", str(Path(tempfile.mkdtemp(prefix="signoff-key-")) / "audit.key")
)
"""One audit key for the whole run, outside the user's data directory: every ledger a test opens, in this
process or in the servers and CLIs it starts (they inherit the environment), proves with it."""


class FakeClock:
    """A clock tests move by hand, so deadline logic is checked without sleeping."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_ledger(backend: str, tmp_path: Path, clock: Callable[[], float] | None = None) -> Ledger:
    if backend == "memory":
        return MemoryLedger(clock=clock)
    if backend == "postgres":
        return PostgresLedger(
            POSTGRES, schema=f"test_{uuid.uuid4().hex[:12]}", clock=clock, poll_interval=0.05
        )
    if backend == "redis":
        return RedisLedger(REDIS, prefix=f"test_{uuid.uuid4().hex[:12]}", clock=clock, poll_interval=0.05)
    return SqliteLedger(tmp_path / "signoff.db", clock=clock)


async def drop(ledger: Ledger) -> None:
    """Remove a test's PostgreSQL schema or Redis keys, so the servers do not fill up with them."""
    if isinstance(ledger, PostgresLedger):
        async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(ledger.schema)))
    if isinstance(ledger, RedisLedger):
        async with redis.asyncio.Redis.from_url(REDIS) as client:
            keys = [key async for key in client.scan_iter(match=f"{ledger.prefix}:*", count=1000)]
            for start in range(0, len(keys), 1000):
                await client.delete(*keys[start : start + 1000])


def shared_url(backend: str, tmp_path: Path) -> str:
    """A URL for a fresh, empty ledger of a shared backend, which other processes can open too."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    if backend == "postgres":
        return f"{POSTGRES}?schema={name}"
    if backend == "redis":
        return f"{REDIS}?prefix={name}"
    return f"sqlite:///{tmp_path / (name + '.db')}"


async def drop_url(url: str) -> None:
    """Remove what a `shared_url` ledger left on its server."""
    await drop(open_ledger(url))


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh ledger URL on each shared backend, removed after the test."""
    url = shared_url(str(request.param), tmp_path)
    yield url
    asyncio.run(drop_url(url))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    """The agent framework a demo runs on."""
    return str(request.param)


@pytest.fixture
async def site(runtime: str) -> AsyncIterator[Site]:
    """The demo agent on `runtime`, served in this process with the demo's policy."""
    from signoff.demo.walkthrough import demo_policy
    from tests.chats import serve_demo  # it imports this module's neighbours, which import this one

    async for served in serve_demo(runtime, demo_policy()):
        yield served


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def ledger(backend: str, tmp_path: Path) -> AsyncIterator[Ledger]:
    async with make_ledger(backend, tmp_path) as opened:
        yield opened
    await drop(opened)


@pytest.fixture
async def clocked_ledger(backend: str, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Ledger]:
    async with make_ledger(backend, tmp_path, clock) as opened:
        yield opened
    await drop(opened)


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running the `signoff` command against a ledger of the test's own."""
    return {**os.environ, "SIGNOFF_LEDGER": f"sqlite:///{tmp_path / 'cli.db'}", "COLUMNS": "200"}
