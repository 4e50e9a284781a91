"""Shared fixtures: every ledger contract test runs against every backend built so far."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from signoff.ledger import Ledger, MemoryLedger, SqliteLedger

BACKENDS = ["memory", "sqlite"]
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
    return SqliteLedger(tmp_path / "signoff.db", clock=clock)


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


@pytest.fixture
async def clocked_ledger(backend: str, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Ledger]:
    async with make_ledger(backend, tmp_path, clock) as opened:
        yield opened


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running the `signoff` command against a ledger of the test's own."""
    return {**os.environ, "SIGNOFF_LEDGER": f"sqlite:///{tmp_path / 'cli.db'}", "COLUMNS": "200"}
