"""The PostgreSQL database: one truth for many workers on many machines.

Every audited write is one transaction that first takes a transaction-level advisory lock of the ledger's
schema. That serializes writers exactly as SQLite's `BEGIN IMMEDIATE` does, for two reasons: the audit
log is a hash chain, so each entry must see the one before it, and a decision must read the record it
changes without another decision slipping in between (first wins, no lost update). Reads take no lock.
Holding that lock through the commit's WAL flush would allow only about a thousand writes a second; group
commit (`ledger/committer.py`) makes it one transaction per batch instead.

Task changes join those batches. Progress reports and heartbeats, which write no audit entries, take only
the tasks' own lock, so they never wait for decisions.

A decision is announced with `NOTIFY`, sent inside the deciding transaction so it is delivered only if
the decision committed; the payload is the decided record, so the watcher on another worker resumes its
waiter without reading it back.

An error of PostgreSQL's never leaves `connection` raw: a full disk, a read-only server or one out of
memory is `LedgerUnwritable`, a server that can't be reached (or has no connection to spare) is
`LedgerUnavailable`, each within the pool's timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditKey, Head
from signoff.core.errors import LedgerUnavailable, LedgerUnwritable, Unstorable
from signoff.ledger import rows
from signoff.ledger.keys import (
    Apply,
    ApprovalKey,
    AskedKey,
    GrantKey,
    Key,
    PrincipalKey,
    StartedKey,
    TaskKey,
    Write,
)
from signoff.ledger.postgres.schema import lock_key, safe, upgrade
from signoff.ledger.postgres.stores import (
    PostgresChats,
    PostgresOutbox,
    PostgresTasks,
)
from signoff.ledger.records import Change, Stored
from signoff.ledger.rows import (
    AUDIT_HEAD,
    POSTGRES,
    Statement,
    approval_record,
    grant_record,
    principal_record,
)
from signoff.ledger.sql import SqlApprovals, SqlPrincipals
from signoff.ledger.stores import Backend, Heard, Pool

_PAYLOAD_LIMIT = 7900
"""Bytes of a `NOTIFY` payload: PostgreSQL refuses 8000 or more."""
UNWRITABLE = {"53100": "disk full", "25006": "read-only", "53200": "out of memory"}
"""The SQLSTATEs that mean the server stores nothing now (disk_full, read_only_sql_transaction,
out_of_memory), and what each means. Too many connections (53300) is an outage, not this."""
RECONNECT = 1.0
"""Seconds the pool keeps trying to replace a lost connection before it leaves that to the next caller who
needs one. psycopg_pool waits twice as long after each failed try (1, 2, 4 … s), so after a long outage its
next try was half a minute away, and the server was back long before the pool knew; with tries cut short,
each caller (`/readyz`'s probe, twice a second) starts a fresh one, and the pool is back within about a
second of the server."""


class PostgresBackend(Backend):
    dialect = POSTGRES

    def __init__(self, dsn: str, *, schema: str, pool: Pool) -> None:
        self.dsn = dsn
        self.schema = schema
        self.pooling = pool
        self.poll_interval = pool.poll_interval
        self._hold(
            SqlApprovals(self),
            PostgresTasks(self),
            PostgresChats(self),
            SqlPrincipals(self),
            PostgresOutbox(self),
        )
        self.connect_timeout = max(1, math.ceil(pool.connect_timeout))
        """libpq's own: whole seconds, where 0 would wait for ever."""
        self.lock_key = lock_key(f"signoff:{schema}")  # per schema: separate ledgers never wait
        self.tasks_key = lock_key(f"signoff:{schema}:tasks")
        self.channel = "signoff_decided_" + hashlib.sha256(schema.encode()).hexdigest()[:16]
        """The schema's `NOTIFY` channel. Channels are per database, so each schema needs its own, and a
        plain identifier (a schema name may need quoting, and may be longer than a channel name can be)."""
        self._pool: AsyncConnectionPool | None = None
        self._pinger: psycopg.AsyncConnection[Any] | None = None
        """The readiness probe's own connection (see `Backend.ping`), made again after any failure."""

    async def start(self) -> None:
        await self.upgrade()
        pool = AsyncConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self.pooling.size,
            timeout=self.pooling.pool_timeout,
            kwargs={"autocommit": True, "options": f"-c search_path={self.schema}"},
            open=False,
            name="signoff",
            check=AsyncConnectionPool.check_connection,  # after a server restart, drop dead connections
            reconnect_timeout=RECONNECT,
        )
        try:
            await pool.open(wait=True, timeout=self.pooling.connect_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise LedgerUnavailable(f"cannot reach PostgreSQL ledger {safe(self.dsn)}: {exc}") from exc
        self._pool = pool

    async def upgrade(self) -> tuple[int, int]:
        return await upgrade(self.dsn, self.schema, connect_timeout=self.connect_timeout)

    async def close(self) -> None:
        await self._unping()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def ping(self) -> None:
        try:
            if self._pinger is None:
                self._pinger = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, connect_timeout=self.connect_timeout
                )
            await self._pinger.execute("SELECT 1")
        except BaseException as exc:  # cancelled (timed out) too: the connection may be mid-query
            await self._unping()
            if isinstance(exc, psycopg.Error):
                raise LedgerUnavailable(f"the PostgreSQL ledger {safe(self.dsn)} failed: {exc}") from exc
            raise

    async def _unping(self) -> None:
        pinger, self._pinger = self._pinger, None
        if pinger is not None:
            with contextlib.suppress(psycopg.Error):
                await pinger.close()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._pool is None:
            raise RuntimeError(
                "the PostgreSQL ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            if exc.sqlstate in UNWRITABLE:
                raise LedgerUnwritable(UNWRITABLE[exc.sqlstate]) from exc
            if isinstance(exc, psycopg.OperationalError):  # the pool's timeout is one too
                raise LedgerUnavailable(f"the PostgreSQL ledger {safe(self.dsn)} failed: {exc}") from exc
            if isinstance(exc, psycopg.DataError):
                raise Unstorable(f"the PostgreSQL ledger cannot store this value: {exc}") from exc
            raise

    async def fetch(self, query: str, params: Sequence[object] = ()) -> list[Any]:
        async with self.connection() as conn:
            cursor = await conn.execute(query, params)
            return await cursor.fetchall()

    async def execute(self, statements: Sequence[Statement]) -> int:
        """Run `statements` in one transaction; how many rows the last one changed."""
        async with self.connection() as conn, conn.transaction():
            changed = 0
            for statement, params in statements:
                changed = (await conn.execute(statement.encode(), params)).rowcount
            return changed

    async def transact(self, keys: Sequence[Key], apply: Apply, key: AuditKey) -> list[Change]:
        """Pipelined under the schema's write lock: the lock, the head and the loads go in one round trip,
        and the writes with the commit in one more."""
        async with self.connection() as conn, conn.pipeline(), conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.lock_key,))
            batch = _Batch(conn, self, key)
            writes = apply(await batch.load(keys))
            return await batch.store(writes) if writes else []

    async def lease(self, name: str, holder: str, now: float, ttl: float) -> bool:
        return await self.execute([rows.lease(POSTGRES, name, holder, now=now, ttl=ttl)]) == 1

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[Heard]:
        """A connection of its own that `LISTEN`s; a notification is the decided record, or its id for a
        record too big for one."""
        try:
            connecting = psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=self.connect_timeout
            )
            async with await connecting as listener:
                await listener.execute(f"LISTEN {self.channel}")

                async def heard(seconds: float) -> list[Approval | str]:
                    async for note in listener.notifies(timeout=seconds, stop_after=1):
                        payload = note.payload
                        return [approval_record(payload) if payload.startswith("{") else payload]
                    return []

                yield heard
        except psycopg.Error as exc:
            raise LedgerUnavailable(f"the PostgreSQL ledger's listener failed: {exc}") from exc

    @contextlib.asynccontextmanager
    async def task_write(self) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], int]]:
        """A transaction holding the tasks' own write lock, and the newest change number. The lock makes
        change numbers follow commit order, so a feed reading `seq > n` never skips a change committed
        late; it is not the approvals' lock, so progress never waits for decisions. A batch that writes
        tasks takes it after the approvals' lock, and nothing takes them the other way round."""
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.tasks_key,))
            row = await (await conn.execute(rows.TASK_SEQ)).fetchone()
            yield conn, int(row[0]) if row else 0


_BY_CALL = "(chat_id, call_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"


class _Batch:
    """One write transaction's loads and stores, each in as few round trips as the pipeline allows."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], db: PostgresBackend, key: AuditKey) -> None:
        self.conn = conn
        self.db = db
        self.key = key
        self.head: Head = GENESIS_HEAD
        self.task_seq = 0

    async def load(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        """Every record in one round trip, with the audit head the writes will chain after; tasks under
        the tasks' write lock too, with the newest change number."""
        ids = {
            kind: [k.id for k in keys if isinstance(k, kind)]
            for kind in (ApprovalKey, GrantKey, TaskKey, PrincipalKey)
        }
        asked = [k for k in keys if isinstance(k, AskedKey)]
        started = [k for k in keys if isinstance(k, StartedKey)]
        task_seq = None
        if ids[TaskKey] or started:
            await self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.db.tasks_key,))
            task_seq = await self.conn.execute(rows.TASK_SEQ)
        head = await self.conn.execute(AUDIT_HEAD)
        tasks = f"SELECT {rows.TASK_COLUMNS} FROM tasks WHERE"
        reads = [  # only the queries this batch needs: each costs the server a plan and a scan
            (kind, await self.conn.execute(query, params))
            for kind, wanted, query, params in (
                (
                    ApprovalKey,
                    ids[ApprovalKey],
                    "SELECT record FROM approvals WHERE id = ANY(%s)",
                    (ids[ApprovalKey],),
                ),
                (AskedKey, asked, f"SELECT record FROM approvals WHERE {_BY_CALL}", _pairs(asked)),
                (GrantKey, ids[GrantKey], "SELECT record FROM grants WHERE id = ANY(%s)", (ids[GrantKey],)),
                (TaskKey, ids[TaskKey], f"{tasks} id = ANY(%s)", (ids[TaskKey],)),
                (StartedKey, started, f"{tasks} {_BY_CALL}", _pairs(started)),
                (
                    PrincipalKey,
                    ids[PrincipalKey],
                    f"{rows.PRINCIPALS} WHERE id = ANY(%s)",
                    (ids[PrincipalKey],),
                ),
            )
            if wanted
        ]
        row = await head.fetchone()
        self.head = (row[0], row[1]) if row else GENESIS_HEAD
        if task_seq is not None:
            self.task_seq = int((await task_seq.fetchall())[0][0])
        stored: dict[Key, Stored] = {}
        for kind, cursor in reads:
            stored.update(_keyed(kind, found) for found in await cursor.fetchall())
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
            more, self.head = rows.writes(POSTGRES, change, self.head, self.key, new=write.new)
            statements += more
            if (a := write.change.approval) is not None and a.state is not State.PENDING:
                record = msgspec.json.encode(a).decode()
                heard = record if len(record.encode()) < _PAYLOAD_LIMIT else a.id
                statements.append(("SELECT pg_notify(%s, %s)", (self.db.channel, heard)))
        async with self.conn.cursor() as cursor:
            for statement, group in itertools.groupby(statements, key=lambda s: s[0]):
                await cursor.executemany(statement.encode(), [params for _, params in group])
        return stored


def _keyed(kind: type[Key], row: Sequence[Any]) -> tuple[Key, Stored]:
    """A loaded row under the key of the kind that asked for it."""
    if kind is TaskKey or kind is StartedKey:
        task = rows.task_from_row(row)
        key: Key = TaskKey(task.id) if kind is TaskKey else StartedKey(task.chat_id, task.call.call_id)
        return key, Stored(task, task.seq)
    if kind is PrincipalKey:
        principal = principal_record(row[0])
        return PrincipalKey(principal.id), Stored(principal, 0)
    if kind is GrantKey:
        grant = grant_record(row[0])
        return GrantKey(grant.id), Stored(grant, 0)
    approval = approval_record(row[0])
    key = (
        ApprovalKey(approval.id) if kind is ApprovalKey else AskedKey(approval.chat_id, approval.call.call_id)
    )
    return key, Stored(approval, 0)


def _pairs(keys: Sequence[AskedKey] | Sequence[StartedKey]) -> tuple[list[str], list[str]]:
    return [k.chat_id for k in keys], [k.call_id for k in keys]
