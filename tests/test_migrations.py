"""Every backend's schema is versioned: a store made by any earlier version is migrated step by step, with
its records kept, and `signoff db upgrade` does it ahead of a rollout. A newer schema is refused."""

from __future__ import annotations

import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest
from redis import asyncio as aioredis

from signoff.core.call import ToolCall
from signoff.core.errors import LedgerUnavailable
from signoff.ledger import SqliteLedger
from signoff.ledger.redis import SCHEMA_VERSION as REDIS_VERSION
from signoff.ledger.redis import RedisLedger
from signoff.ledger.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from signoff.ledger.sqlite.schema import MIGRATIONS
from tests.conftest import REDIS, SIGNOFF, drop


def sqlite_at(path: Path, version: int) -> None:
    """A file as signoff left it at `version`, with one approval in it (every version has approvals)."""
    with sqlite3.connect(path) as db:
        for migration in MIGRATIONS[:version]:
            db.executescript(migration)
        record = '{"id":"apr_old"}'
        db.execute(
            "INSERT INTO approvals VALUES ('apr_old', 'chat', 'call', 'pending', NULL, 1.0, ?)", (record,)
        )
        db.execute(f"PRAGMA user_version = {version}")


def columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


@pytest.mark.parametrize("version", range(1, SQLITE_VERSION))
async def test_an_old_sqlite_file_is_migrated_step_by_step_and_keeps_its_records(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "old.db"
    sqlite_at(path, version)
    assert await SqliteLedger(path).upgrade() == (version, SQLITE_VERSION)
    assert "owner" in columns(path, "chats") and columns(path, "principals")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT id FROM approvals").fetchall() == [("apr_old",)]
    async with SqliteLedger(path) as ledger:  # every store works on the migrated file
        await ledger.principals.register("alice", ["finance"], actor="test")
        await ledger.chats.save("c", b"{}", version=0, owner="alice")
        call = ToolCall("c1", "pay", {"amount": 1})
        await ledger.approvals.open(call, chat_id="c", description="pay", rule="r")
        await ledger.tasks.create(ToolCall("c2", "export"), chat_id="c", worker="w", actor="test")
        assert (await ledger.audit.verify())[1] is None


async def test_a_chat_state_kept_in_pieces_goes_back_to_its_row_byte_for_byte(tmp_path: Path) -> None:
    """Version 7 kept a state over 16 KB in pieces cut at any byte, inside a character too; version 8
    joins them in order into the row, where its history waits to become entries at the chat's next save."""
    path = tmp_path / "old.db"
    sqlite_at(path, 7)
    state = ('{"history":[' + '"é€😀",' * 9000 + "1]}").encode()
    pieces = [state[at : at + 16 * 1024] for at in range(0, len(state), 16 * 1024)]
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO chats VALUES ('long', 3, x'', 1.0, 'alice')")
        db.execute("INSERT INTO chats VALUES ('short', 2, ?, 1.0, 'bob')", (b'{"history":[]}',))
        db.executemany(  # in no particular order
            "INSERT INTO chat_chunks VALUES ('long', ?, ?)", reversed(list(enumerate(pieces)))
        )
    assert await SqliteLedger(path).upgrade() == (7, SQLITE_VERSION)
    async with SqliteLedger(path) as ledger:
        long, short = await ledger.chats.load("long"), await ledger.chats.load("short")
    assert long is not None and short is not None
    with pytest.raises(UnicodeDecodeError):  # a piece ends inside a character
        pieces[0].decode()
    assert (long.state, long.version, long.owner, list(long.entries)) == (state, 3, "alice", [])
    assert (short.state, short.owner) == (b'{"history":[]}', "bob")


async def test_a_fresh_sqlite_file_has_the_schema_an_old_one_is_migrated_to(tmp_path: Path) -> None:
    async with SqliteLedger(tmp_path / "fresh.db"):
        pass
    sqlite_at(tmp_path / "old.db", 1)
    await SqliteLedger(tmp_path / "old.db").upgrade()

    def schema(path: Path) -> list[tuple[str, str]]:
        with sqlite3.connect(path) as db:
            return sorted(db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))

    assert schema(tmp_path / "fresh.db") == schema(tmp_path / "old.db")
    for table in ("approvals", "chats", "tasks", "principals"):
        assert columns(tmp_path / "fresh.db", table) == columns(tmp_path / "old.db", table)


async def test_a_newer_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    sqlite_at(path, SQLITE_VERSION)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SQLITE_VERSION + 1}")
    with pytest.raises(LedgerUnavailable, match="newer than this signoff's"):
        async with SqliteLedger(path):
            pass


def test_db_upgrade_migrates_an_old_file_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    sqlite_at(path, 3)
    env = {"SIGNOFF_LEDGER": f"sqlite:///{path}", "PATH": "/usr/bin:/bin"}
    first = subprocess.run([SIGNOFF, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"ledger schema migrated from version 3 to {SQLITE_VERSION}"
    again = subprocess.run([SIGNOFF, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=60)
    assert again.stdout.strip() == f"ledger schema already at {SQLITE_VERSION}"


async def test_redis_records_its_schema_version_once_and_refuses_a_newer_one() -> None:
    prefix = f"test_{uuid.uuid4().hex[:12]}"
    ledger = RedisLedger(REDIS, prefix=prefix)
    assert await ledger.upgrade() == (0, REDIS_VERSION)
    assert await ledger.upgrade() == (REDIS_VERSION, REDIS_VERSION)
    client = aioredis.Redis.from_url(REDIS)
    try:
        await client.set(f"{prefix}:schema", REDIS_VERSION + 1)
        with pytest.raises(LedgerUnavailable, match="newer than this signoff's"):
            await ledger.start()
        await client.set(f"{prefix}:schema", REDIS_VERSION)
    finally:
        await client.aclose()
    await drop(ledger)
