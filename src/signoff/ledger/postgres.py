"""The PostgreSQL ledger: one truth for many workers on many machines.

Every write is one transaction that first takes a transaction-level advisory lock of the ledger's schema.
That serializes writers exactly as SQLite's `BEGIN IMMEDIATE` does, for two reasons: the audit log is a
hash chain, so each entry must see the one before it, and a decision must read the record it changes
without another decision slipping in between (first wins, no lost update). Reads take no lock.

Holding that lock through the commit's WAL flush would allow only about a thousand writes a second, so a
process's writes are group-committed (`ledger/batch.py`): one transaction stores all that queued meanwhile.
Task changes join those batches. Progress reports and heartbeats, which write no audit entries, take only
the tasks' own lock, so they never wait for decisions.

A decision wakes waiters on every worker through `NOTIFY`, sent inside the deciding transaction so it is
delivered only if the decision committed. Notifications can be missed (a dropped listening connection, a
restart), so a watcher also polls the approvals its process waits on every `poll_interval` seconds: a
missed notification can only delay a wakeup, never lose it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditEntry, AuditKey, Head, Keyring
from signoff.core.errors import LedgerUnavailable, Unstorable
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger import rows
from signoff.ledger.base import Change, Clock, Progress, ReplyFrames, ReplyLog, StoredChat, TaskQuery
from signoff.ledger.batch import Batch, Batched, Key, Stored, Write
from signoff.ledger.rows import (
    AUDIT_COLUMNS,
    AUDIT_HEAD,
    POSTGRES,
    Statement,
    approvals_query,
    audit_entry,
    grants_query,
    lease,
    writes,
)

log = logging.getLogger("signoff.ledger")

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
)
"""The schema, one migration per version: version N is the state after MIGRATIONS[N - 1]. Append only."""
SCHEMA_VERSION = len(MIGRATIONS)
_approval = msgspec.json.Decoder(Approval).decode
_grant = msgspec.json.Decoder(Grant).decode
_registered = msgspec.json.Decoder(Registered).decode


class PostgresLedger(Batched):
    """`dsn` is a libpq connection string or URL; `schema` holds the ledger's tables (created on start).

    `connect_timeout` bounds reaching the server; `pool_timeout` bounds waiting here for one of the
    `pool_size` connections, which a busy worker does long before the server is slow."""

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
        super().__init__(**({"clock": clock} if clock else {}), keyring=keyring)
        self.dsn = dsn
        self.schema = schema
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.pool_timeout = pool_timeout
        self.poll_interval = poll_interval
        self._lock_key = _lock_key(f"signoff:{schema}")  # per schema: separate ledgers never wait
        self._tasks_key = _lock_key(f"signoff:{schema}:tasks")
        self._channel = _channel(schema)
        self._pool: AsyncConnectionPool | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await upgrade(self.dsn, self.schema, connect_timeout=self.connect_timeout)
        pool = AsyncConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self.pool_size,
            timeout=self.pool_timeout,
            kwargs={"autocommit": True, "options": f"-c search_path={self.schema}"},
            open=False,
            name="signoff",
            check=AsyncConnectionPool.check_connection,  # after a server restart, drop dead connections
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise LedgerUnavailable(f"cannot reach PostgreSQL ledger {_safe(self.dsn)}: {exc}") from exc
        self._pool = pool

    async def upgrade(self) -> tuple[int, int]:
        return await upgrade(self.dsn, self.schema, connect_timeout=self.connect_timeout)

    async def close(self) -> None:
        await self._drain()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._pool is None:
            raise RuntimeError(
                "the PostgreSQL ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise LedgerUnavailable(f"the PostgreSQL ledger {_safe(self.dsn)} failed: {exc}") from exc
        except psycopg.DataError as exc:
            raise Unstorable(f"the PostgreSQL ledger cannot store this value: {exc}") from exc

    async def _rows(self, query: str, params: Sequence[object] = ()) -> list[Any]:
        async with self._connection() as conn:
            cursor = await conn.execute(query, params)
            return await cursor.fetchall()

    @contextlib.asynccontextmanager
    async def _batch(self) -> AsyncIterator[Batch]:
        """A transaction holding the schema's write lock, pipelined: the lock, the head and the loads go in
        one round trip, and the writes with the commit in one more."""
        async with self._connection() as conn, conn.pipeline(), conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            yield _Transaction(conn, self._channel, self._tasks_key, self.keyring.current)

    # -- reads ----------------------------------------------------------------------------------------------

    async def _load(self, approval_id: str) -> Approval | None:
        rows = await self._rows("SELECT record FROM approvals WHERE id = %s", (approval_id,))
        return _approval(rows[0][0]) if rows else None

    async def _find(self, chat_id: str, call_id: str) -> Approval | None:
        query = "SELECT record FROM approvals WHERE chat_id = %s AND call_id = %s"
        rows = await self._rows(query, (chat_id, call_id))
        return _approval(rows[0][0]) if rows else None

    async def _query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        state_name = None if state is None else str(state)
        query = approvals_query(POSTGRES, chat_id=chat_id, state=state_name, due_by=due_by, limit=limit)
        return [_approval(record) for (record,) in await self._rows(*query)]

    async def _grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        query = grants_query(POSTGRES, chat_id=chat_id, tool=tool, active=active)
        return [_grant(record) for (record,) in await self._rows(*query)]

    async def _audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        query = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > %s ORDER BY seq LIMIT %s"
        return [audit_entry(row) for row in await self._rows(query, (after_seq, limit))]

    async def _last_seq(self) -> int:
        rows = await self._rows("SELECT coalesce(max(seq), 0) FROM audit")
        return int(rows[0][0])

    async def _load_principal(self, principal_id: str) -> Registered | None:
        found = await self._rows(f"{rows.PRINCIPALS} WHERE id = %s", (principal_id,))
        return _registered(found[0][0]) if found else None

    async def _principal_by_token(self, token_hash: str) -> Registered | None:
        found = await self._rows(f"{rows.PRINCIPALS} WHERE token_hash = %s", (token_hash,))
        return _registered(found[0][0]) if found else None

    async def _principals(self) -> list[Registered]:
        return [_registered(record) for (record,) in await self._rows(f"{rows.PRINCIPALS} ORDER BY seq")]

    async def _load_chat(self, chat_id: str) -> StoredChat | None:
        query = "SELECT chat_id, version, state, updated_at, owner FROM chats WHERE chat_id = %s"
        rows = await self._rows(query, (chat_id,))
        if not rows:
            return None
        chat_id, version, state, updated_at, owner = rows[0]
        return StoredChat(chat_id, version, bytes(state), updated_at, owner)

    async def _save_chat(self, chat: StoredChat) -> bool:
        if chat.version == 1:
            query = (
                "INSERT INTO chats (chat_id, version, state, updated_at, owner) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (chat_id) DO NOTHING"
            )
            params: tuple[object, ...] = (chat.chat_id, chat.version, chat.state, chat.updated_at, chat.owner)
        else:  # the version check makes a concurrent save lose cleanly: one conditional UPDATE
            query = _SAVE_NEXT_VERSION
            params = (chat.version, chat.state, chat.updated_at, chat.chat_id, chat.version - 1)
        async with self._connection() as conn:
            cursor = await conn.execute(query, params)
            return cursor.rowcount == 1

    async def _log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        async with self._connection() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cursor:
            for statement, runs in rows.log_replies(POSTGRES, batch, now):
                if runs:
                    await cursor.executemany(statement.encode(), runs)

    async def _reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        (head, head_params), (frames, frames_params) = rows.reply_log_queries(POSTGRES, chat_id, after)
        found = await self._rows(head, head_params)
        if not found:
            return None
        reply, meta, done, updated_at = found[0]
        logged = [bytes(frame) for (frame,) in await self._rows(frames, frames_params)]
        return ReplyLog(reply, bytes(meta), done, updated_at, logged)

    async def _forget_replies(self, before: float) -> int:
        return await self._execute(rows.forget_replies(POSTGRES, before))

    async def _execute(self, statements: Sequence[Statement]) -> int:
        """Run `statements` in one transaction; how many rows the last one changed."""
        async with self._connection() as conn, conn.transaction():
            changed = 0
            for statement, params in statements:
                changed = (await conn.execute(statement.encode(), params)).rowcount
            return changed

    async def _lease(self, name: str, holder: str, ttl: float) -> bool:
        statement, params = lease(POSTGRES, name, holder, now=self.clock(), ttl=ttl)
        async with self._connection() as conn:
            cursor = await conn.execute(statement.encode(), params)
            return cursor.rowcount == 1

    # -- tasks --------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _task_write(self) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], int]]:
        """A transaction holding the tasks' own write lock, and the newest change number. The lock makes
        change numbers follow commit order, so a feed reading `seq > n` never skips a change committed
        late; it is not the approvals' lock, so progress never waits for decisions. A batch that writes
        tasks takes it after the approvals' lock, and nothing takes them the other way round."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._tasks_key,))
            row = await (await conn.execute(rows.TASK_SEQ)).fetchone()
            yield conn, int(row[0]) if row else 0

    async def _load_task(self, task_id: str) -> Task | None:
        found = await self._rows(*rows.task_by(POSTGRES, "id", task_id))
        return rows.task_from_row(found[0]) if found else None

    async def _query_tasks(self, query: TaskQuery) -> list[Task]:
        found = await self._rows(*rows.tasks_query(POSTGRES, query))
        return [rows.task_from_row(row) for row in found]

    async def _last_task_seq(self) -> int:
        return int((await self._rows(rows.TASK_SEQ))[0][0])

    async def _report(self, reports: Sequence[Progress], now: float) -> list[str]:
        async with self._task_write() as (conn, seq):
            statement, runs = rows.report_tasks(POSTGRES, reports, now, seq)
            async with conn.cursor() as cursor:
                await cursor.executemany(statement.encode(), runs)
            ids = [r.task_id for r in reports]
            query = "SELECT id FROM tasks WHERE id = ANY(%s) AND state = 'running' AND cancel_by != ''"
            return [task_id for (task_id,) in await (await conn.execute(query, (ids,))).fetchall()]

    async def _beat(self, worker: str, now: float) -> list[str]:
        renew, cancelling = rows.beat(POSTGRES, worker, now)
        async with self._task_write() as (conn, _):  # the lock orders it with reports: no deadlock
            await _execute(conn, renew)
            return [task_id for (task_id,) in await (await _execute(conn, cancelling)).fetchall()]

    # -- decisions made by other processes ----------------------------------------------------------------

    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_others())

    async def _watch_others(self) -> None:
        """Listen while anyone here waits, waking each waiter as its notification arrives; and every
        `poll_interval`, read every watched approval, so a missed notification only delays a wakeup."""
        while self.notifier.watched():
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, connect_timeout=int(self.connect_timeout)
                ) as listener:
                    await listener.execute(f"LISTEN {self._channel}")
                    while ids := self.notifier.watched():
                        await self._wake(ids)  # the first time: what was decided before we listened
                        async for heard in listener.notifies(timeout=self.poll_interval):
                            await self._heard(heard.payload)
            except (psycopg.Error, LedgerUnavailable) as exc:  # reconnect; waiters stay parked meanwhile
                log.warning("the PostgreSQL ledger's listener failed (%s); retrying", exc)
                await asyncio.sleep(self.poll_interval)

    async def _heard(self, payload: str) -> None:
        """A notification is the decided record itself, so the waiter resumes without reading it back;
        or, for a record too big for a notification, its id."""
        if payload.startswith("{"):
            self.notifier.notify(_approval(payload))
        elif self.notifier.watches(payload):
            await self._wake([payload])

    async def _wake(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            query = "SELECT record FROM approvals WHERE state != 'pending' AND id = ANY(%s)"
            for (record,) in await self._rows(query, (chunk,)):
                self.notifier.notify(_approval(record))


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
        raise LedgerUnavailable(f"cannot reach PostgreSQL ledger {_safe(dsn)}: {exc}") from exc
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


_SAVE_NEXT_VERSION = """
    UPDATE chats SET version = %s, state = %s, updated_at = %s WHERE chat_id = %s AND version = %s
"""


def _lock_key(name: str) -> int:
    """A 64-bit advisory lock key from a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


_MIGRATION_LOCK = _lock_key("signoff:migrations")


_PAYLOAD_LIMIT = 7900
"""Bytes of a `NOTIFY` payload: PostgreSQL refuses 8000 or more."""


def _channel(schema: str) -> str:
    """The schema's `NOTIFY` channel. Channels are per database, so each schema needs its own, and a
    plain identifier (a schema name may need quoting, and may be longer than a channel name can be)."""
    return "signoff_decided_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class _Transaction(Batch):
    def __init__(
        self, conn: psycopg.AsyncConnection[Any], channel: str, tasks_key: int, key: AuditKey
    ) -> None:
        self.conn = conn
        self.key = key
        self.channel = channel
        self.tasks_key = tasks_key
        self.head: Head = GENESIS_HEAD
        self.task_seq = 0

    async def load(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        """Every record in one round trip, with the audit head the writes will chain after; tasks under
        the tasks' write lock too, with the newest change number."""
        approvals = [key[1] for key in keys if key[0] == "approval"]
        grants = [key[1] for key in keys if key[0] == "grant"]
        calls = [key for key in keys if key[0] == "call"]
        tasks = [key[1] for key in keys if key[0] == "task"]
        task_calls = [key for key in keys if key[0] == "tcall"]
        principals = [key[1] for key in keys if key[0] == "principal"]
        task_seq = None
        if tasks or task_calls:
            await self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.tasks_key,))
            task_seq = await self.conn.execute(rows.TASK_SEQ)
        head = await self.conn.execute(AUDIT_HEAD)
        by_id = "SELECT record FROM approvals WHERE id = ANY(%s)"
        by_call = (
            "SELECT record FROM approvals WHERE (chat_id, call_id) IN"
            " (SELECT * FROM unnest(%s::text[], %s::text[]))"
        )
        task_by_call = (
            f"SELECT {rows.TASK_COLUMNS} FROM tasks WHERE (chat_id, call_id) IN"
            " (SELECT * FROM unnest(%s::text[], %s::text[]))"
        )
        reads = [  # only the queries this batch needs: each costs the server a plan and a scan
            (kind, await self.conn.execute(query, params))
            for kind, wanted, query, params in (
                ("approval", approvals, by_id, (approvals,)),
                ("grant", grants, "SELECT record FROM grants WHERE id = ANY(%s)", (grants,)),
                ("call", calls, by_call, ([c[1] for c in calls], [c[2] for c in calls])),
                ("task", tasks, f"SELECT {rows.TASK_COLUMNS} FROM tasks WHERE id = ANY(%s)", (tasks,)),
                ("tcall", task_calls, task_by_call, ([c[1] for c in task_calls], [c[2] for c in task_calls])),
                ("principal", principals, f"{rows.PRINCIPALS} WHERE id = ANY(%s)", (principals,)),
            )
            if wanted
        ]
        row = await head.fetchone()
        self.head = (row[0], row[1]) if row else GENESIS_HEAD
        if task_seq is not None:
            self.task_seq = int((await task_seq.fetchall())[0][0])
        stored: dict[Key, Stored] = {}
        for kind, cursor in reads:
            if kind in ("task", "tcall"):
                for found in await cursor.fetchall():
                    task = rows.task_from_row(found)
                    key = ("task", task.id) if kind == "task" else ("tcall", task.chat_id, task.call.call_id)
                    stored[key] = Stored(task, task.seq)
                continue
            for (record,) in await cursor.fetchall():
                if kind == "principal":
                    principal = _registered(record)
                    stored[("principal", principal.id)] = Stored(principal, 0)
                elif kind == "grant":
                    grant = _grant(record)
                    stored[("grant", grant.id)] = Stored(grant, 0)
                else:
                    approval = _approval(record)
                    if kind == "approval":
                        stored[("approval", approval.id)] = Stored(approval, 0)
                    else:
                        stored[("call", approval.chat_id, approval.call.call_id)] = Stored(approval, 0)
        return stored

    async def store(self, batch: Sequence[Write]) -> list[Change]:
        """Every statement, sent without waiting for replies; runs of the same statement go as one
        `executemany`. Decisions are announced with `NOTIFY`, delivered only if the batch commits."""
        statements: list[Statement] = []
        stored: list[Change] = []
        for write in batch:
            change = write.change
            if change.task is not None:  # under the tasks' lock, taken by `load`
                self.task_seq += 1
                change = dataclasses.replace(
                    change, task=msgspec.structs.replace(change.task, seq=self.task_seq)
                )
            stored.append(change)
            more, self.head = writes(POSTGRES, change, self.head, self.key, new=write.new)
            statements += more
            if (a := write.change.approval) is not None and a.state is not State.PENDING:
                record = msgspec.json.encode(a).decode()
                heard = record if len(record.encode()) < _PAYLOAD_LIMIT else a.id
                statements.append(("SELECT pg_notify(%s, %s)", (self.channel, heard)))
        async with self.conn.cursor() as cursor:
            for statement, group in itertools.groupby(statements, key=lambda s: s[0]):
                await cursor.executemany(statement.encode(), [params for _, params in group])
        return stored


async def _execute(conn: psycopg.AsyncConnection[Any], statement: Statement) -> psycopg.AsyncCursor[Any]:
    query, params = statement
    return await conn.execute(query.encode(), params)


def _safe(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparsable DSN)"
    return " ".join(f"{k}={v}" for k, v in info.items() if k != "password")
