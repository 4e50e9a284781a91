"""The PostgreSQL ledger's schema: one migration per version, and `upgrade`, which applies them.

The version lives in the schema's `signoff_schema` table, and each migration runs in the same transaction
that records it, under an advisory lock, so several workers starting at once migrate exactly once.
"""

from __future__ import annotations

import hashlib

import psycopg
from psycopg import sql

from signoff.core.errors import LedgerUnavailable

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        chat_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        state TEXT NOT NULL,
        deadline DOUBLE PRECISION,
        created_at DOUBLE PRECISION NOT NULL,
        seq BIGSERIAL,
        record TEXT NOT NULL,
        UNIQUE (chat_id, call_id)
    );
    CREATE INDEX approvals_by_state ON approvals (state, deadline);
    CREATE INDEX approvals_by_chat ON approvals (chat_id, created_at);
    CREATE TABLE grants (
        id TEXT PRIMARY KEY,
        tool TEXT NOT NULL,
        chat_id TEXT,
        active BOOLEAN NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        seq BIGSERIAL,
        record TEXT NOT NULL
    );
    CREATE INDEX grants_by_tool ON grants (tool, active);
    CREATE TABLE chats (
        chat_id TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        state BYTEA NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE audit (
        seq BIGINT PRIMARY KEY,
        at DOUBLE PRECISION NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        subject TEXT NOT NULL,
        before TEXT,
        after TEXT,
        detail TEXT NOT NULL,
        prev TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    """,
    """
    CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        until DOUBLE PRECISION NOT NULL
    );
    """,
    """
    CREATE TABLE replies (
        chat_id TEXT PRIMARY KEY,
        reply TEXT NOT NULL,
        meta BYTEA NOT NULL,
        done BOOLEAN NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE frames (
        chat_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        frame BYTEA NOT NULL,
        PRIMARY KEY (chat_id, n)
    );
    """,
    """
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        chat_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        state TEXT NOT NULL,
        worker TEXT NOT NULL,
        cancel_by TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        record TEXT NOT NULL,
        progress INTEGER NOT NULL,
        message TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        heartbeat DOUBLE PRECISION NOT NULL,
        seq BIGINT NOT NULL,
        UNIQUE (chat_id, call_id)
    );
    CREATE INDEX tasks_by_seq ON tasks (seq);
    CREATE INDEX tasks_by_chat ON tasks (chat_id, created_at);
    CREATE INDEX tasks_by_state ON tasks (state, heartbeat);
    CREATE INDEX tasks_by_worker ON tasks (worker, state);
    """,
    """
    CREATE TABLE principals (
        id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        created_at DOUBLE PRECISION NOT NULL,
        seq BIGSERIAL,
        record TEXT NOT NULL
    );
    ALTER TABLE chats ADD COLUMN owner TEXT;
    """,
    """
    CREATE TABLE chat_entries (
        chat_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        bytes BYTEA NOT NULL,
        PRIMARY KEY (chat_id, n)
    );
    """,
    """
    CREATE TABLE outbox (
        id TEXT PRIMARY KEY,
        approval_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        type TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        seq BIGSERIAL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        next_at DOUBLE PRECISION NOT NULL,
        last_error TEXT NOT NULL,
        delivered_at DOUBLE PRECISION,
        ref TEXT NOT NULL,
        holder TEXT NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX outbox_due ON outbox (channel, state, next_at);
    CREATE INDEX outbox_by_approval ON outbox (approval_id);
    """,
)
"""The schema, one migration per version: version N is the state after MIGRATIONS[N - 1]. Append only."""
SCHEMA_VERSION = len(MIGRATIONS)


async def upgrade(dsn: str, schema: str = "signoff", *, connect_timeout: float = 5.0) -> tuple[int, int]:
    """Create or migrate the ledger's schema to `SCHEMA_VERSION`; returns (before, after).

    Safe to run twice and from several workers at once: migrations run under an advisory lock, and each
    applied version is recorded in the same transaction as its migration.
    """
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=int(connect_timeout)
        )
    except psycopg.Error as exc:
        raise LedgerUnavailable(f"cannot reach PostgreSQL ledger {safe(dsn)}: {exc}") from exc
    name = sql.Identifier(schema)
    async with conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        await conn.execute(sql.SQL("SET LOCAL search_path = {}").format(name))
        await conn.execute("CREATE TABLE IF NOT EXISTS signoff_schema (version INTEGER NOT NULL)")
        cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM signoff_schema")
        row = await cursor.fetchone()
        before = int(row[0]) if row else 0
        if before > SCHEMA_VERSION:
            raise LedgerUnavailable(
                f"PostgreSQL schema {schema!r} has ledger schema {before}, newer than this signoff's"
                f" {SCHEMA_VERSION}"
            )
        for version in range(before + 1, SCHEMA_VERSION + 1):
            await conn.execute(MIGRATIONS[version - 1].encode())
            await conn.execute("INSERT INTO signoff_schema (version) VALUES (%s)", (version,))
    return before, SCHEMA_VERSION


def lock_key(name: str) -> int:
    """A 64-bit advisory lock key from a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


_MIGRATION_LOCK = lock_key("signoff:migrations")


def safe(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparsable DSN)"
    return " ".join(f"{k}={v}" for k, v in info.items() if k != "password")
