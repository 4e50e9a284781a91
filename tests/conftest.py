"""Shared fixtures: every ledger contract test runs against every backend built so far."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from signoff.ledger import Ledger, MemoryLedger, SqliteLedger
from signoff.ledger.postgres import PostgresLedger

BACKENDS = ["memory", "sqlite", "postgres"]
POSTGRES = os.environ.get("SIGNOFF_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL server the tests use; each test gets a schema of its own there."""
ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))


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
    return SqliteLedger(tmp_path / "signoff.db", clock=clock)


async def drop(ledger: Ledger) -> None:
    """Remove a test's PostgreSQL schema, so the server does not fill up with them."""
    if isinstance(ledger, PostgresLedger):
        async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(ledger.schema)))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
