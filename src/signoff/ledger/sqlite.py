"""The SQLite ledger: the embedded default, one file in WAL mode, safe across processes.

Each operation is one plain function run on a thread the ledger owns, holding its own `sqlite3`
connection. A write is a whole `BEGIN IMMEDIATE … COMMIT` inside that one function: SQLite's write lock is
taken up front, so reading a record, applying the core step and appending its audit entries never
interleave with another writer, in this process or any other; and because the function runs to its end on
the thread, a caller cancelled halfway can never leave a transaction open. This is why aiosqlite is not
used: it hands every statement to its thread separately (six hops per decision, ~110 µs each here, against
~15 µs of SQLite work) and has no public way to run a transaction as one unit.

A process learns of decisions made elsewhere (the CLI, another worker) by watching `PRAGMA data_version`,
which SQLite bumps whenever another connection commits; it polls only while someone here is waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditEntry, AuditEvent, Keyring
from signoff.core.errors import LedgerUnavailable, NotFound
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger import rows
from signoff.ledger.base import Change, Clock, Ledger, Progress, ReplyFrames, ReplyLog, StoredChat, TaskQuery
from signoff.ledger.rows import (
    AUDIT_COLUMNS,
    AUDIT_HEAD,
    SQLITE,
    approvals_query,
    audit_entry,
    grants_query,
    lease,
    writes,
)

Synchronous = Literal["normal", "full"]
T = TypeVar("T")

SCHEMA_VERSION = 6
UPGRADES = {6: "ALTER TABLE chats ADD COLUMN owner TEXT"}
"""What a file made by an older version needs beyond `SCHEMA` (which only creates what is missing): the
statement that brings it to each version."""
SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    state TEXT NOT NULL,
    deadline REAL,
    created_at REAL NOT NULL,
    record TEXT NOT NULL,
    UNIQUE (chat_id, call_id)
);
CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals (state, deadline);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    chat_id TEXT,
    active INTEGER NOT NULL,
    created_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS grants_by_tool ON grants (tool, active);
CREATE TABLE IF NOT EXISTS chats (
    chat_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    state BLOB NOT NULL,
    updated_at REAL NOT NULL,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT NOT NULL,
    before TEXT,
    after TEXT,
    detail TEXT NOT NULL,
    prev TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS replies (
    chat_id TEXT PRIMARY KEY,
    reply TEXT NOT NULL,
    meta BLOB NOT NULL,
    done INTEGER NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS frames (
    chat_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    frame BLOB NOT NULL,
    PRIMARY KEY (chat_id, n)
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    state TEXT NOT NULL,
    worker TEXT NOT NULL,
    cancel_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    record TEXT NOT NULL,
    progress INTEGER NOT NULL,
    message TEXT NOT NULL,
    updated_at REAL NOT NULL,
    heartbeat REAL NOT NULL,
    seq INTEGER NOT NULL,
    UNIQUE (chat_id, call_id)
);
CREATE INDEX IF NOT EXISTS tasks_by_seq ON tasks (seq);
CREATE INDEX IF NOT EXISTS tasks_by_chat ON tasks (chat_id, created_at);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state, heartbeat);
CREATE INDEX IF NOT EXISTS tasks_by_worker ON tasks (worker, state);
CREATE TABLE IF NOT EXISTS principals (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    record TEXT NOT NULL
);
"""
_approval = msgspec.json.Decoder(Approval).decode
_grant = msgspec.json.Decoder(Grant).decode
_registered = msgspec.json.Decoder(Registered).decode


class SqliteLedger(Ledger):
    """`synchronous="normal"` (the default) survives any process crash, SIGKILL included; `"full"` also
    survives power loss, at the cost of an fsync per decision."""

    def __init__(
        self,
        path: str | Path = "signoff.db",
        *,
        synchronous: Synchronous = "normal",
        poll_interval: float = 0.05,
        clock: Clock | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        super().__init__(**({"clock": clock} if clock else {}), keyring=keyring)
        self.path = Path(path)
        self.synchronous = synchronous
        self.poll_interval = poll_interval
        self._db: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="signoff-sqlite")
        try:
            await self._run(self._connect)
        except BaseException:
            await self.close()
            raise

    async def upgrade(self) -> tuple[int, int]:
        before = 0
        if self.path.exists():
            with contextlib.closing(sqlite3.connect(self.path)) as db:
                (before,) = db.execute("PRAGMA user_version").fetchone()
        async with self:
            return before, SCHEMA_VERSION

    def _connect(self) -> None:
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout = 30000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            with self._transaction() as db:
                (version,) = db.execute("PRAGMA user_version").fetchone()
                if version > SCHEMA_VERSION:
                    raise LedgerUnavailable(
                        f"{self.path} has ledger schema {version}, newer than this signoff's {SCHEMA_VERSION}"
                    )
                for statement in filter(str.strip, SCHEMA.split(";")):
                    db.execute(statement)
                for target, statement in UPGRADES.items():
                    if 0 < version < target:
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open SQLite ledger {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        if self._thread is not None:
            if self._db is not None:
                await self._run(self._db.close)
                self._db = None
            self._thread.shutdown()
            self._thread = None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            raise RuntimeError(
                "the SQLite ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        return await asyncio.get_running_loop().run_in_executor(self._thread, partial(fn, *args))

    def _transaction(self) -> _Transaction:
        assert self._db is not None
        return _Transaction(self._db)

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        assert self._db is not None
        return self._db.execute(sql, params).fetchall()

    # -- primitives: each runs as one function on the ledger's thread -------------------------------------

    async def _insert(self, approval: Approval, event: AuditEvent) -> Approval:
        return await self._run(self._insert_sync, approval, event)

    def _insert_sync(self, approval: Approval, event: AuditEvent) -> Approval:
        with self._transaction() as db:
            row = db.execute(
                "SELECT record FROM approvals WHERE chat_id = ? AND call_id = ?",
                (approval.chat_id, approval.call.call_id),
            ).fetchone()
            if row is not None:
                return _approval(row[0])
            self._put(db, Change(approval=approval, events=(event,)), new=True)
        return approval

    async def _load(self, approval_id: str) -> Approval | None:
        rows = await self._run(self._rows, "SELECT record FROM approvals WHERE id = ?", (approval_id,))
        return _approval(rows[0][0]) if rows else None

    async def _find(self, chat_id: str, call_id: str) -> Approval | None:
        sql = "SELECT record FROM approvals WHERE chat_id = ? AND call_id = ?"
        rows = await self._run(self._rows, sql, (chat_id, call_id))
        return _approval(rows[0][0]) if rows else None

    async def _query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        state_name = None if state is None else str(state)
        query = approvals_query(SQLITE, chat_id=chat_id, state=state_name, due_by=due_by, limit=limit)
        return [_approval(record) for (record,) in await self._run(self._rows, *query)]

    async def _mutate(self, approval_id: str, step: Callable[[Approval], Change]) -> Change:
        load = ("SELECT record FROM approvals WHERE id = ?", (approval_id,))
        return await self._run(
            self._mutate_sync, f"approval {approval_id}", load, lambda row: _approval(row[0]), step
        )

    async def _mutate_grant(self, grant_id: str, step: Callable[[Grant], Change]) -> Change:
        load = ("SELECT record FROM grants WHERE id = ?", (grant_id,))
        return await self._run(self._mutate_sync, f"grant {grant_id}", load, lambda row: _grant(row[0]), step)

    def _mutate_sync(
        self, what: str, load: rows.Statement, decode: Callable[[Any], T], step: Callable[[T], Change]
    ) -> Change:
        """Apply `step` to the row `load` reads; `what` names it in the error if there is none."""
        with self._transaction() as db:
            row = db.execute(*load).fetchone()
            if row is None:
                raise NotFound(f"no {what}")
            return self._put(db, step(decode(row)))

    async def _mutate_principal(
        self, principal_id: str, step: Callable[[Registered | None], Change]
    ) -> Change:
        def mutate() -> Change:
            with self._transaction() as db:
                row = db.execute(f"{rows.PRINCIPALS} WHERE id = ?", (principal_id,)).fetchone()
                return self._put(db, step(None if row is None else _registered(row[0])))

        return await self._run(mutate)

    async def _load_principal(self, principal_id: str) -> Registered | None:
        found = await self._run(self._rows, f"{rows.PRINCIPALS} WHERE id = ?", (principal_id,))
        return _registered(found[0][0]) if found else None

    async def _principal_by_token(self, token_hash: str) -> Registered | None:
        found = await self._run(self._rows, f"{rows.PRINCIPALS} WHERE token_hash = ?", (token_hash,))
        return _registered(found[0][0]) if found else None

    async def _principals(self) -> list[Registered]:
        found = await self._run(self._rows, f"{rows.PRINCIPALS} ORDER BY created_at, rowid")
        return [_registered(record) for (record,) in found]

    async def _append(self, events: Sequence[AuditEvent]) -> None:
        def append() -> None:
            with self._transaction() as db:
                self._put(db, Change(events=tuple(events)))

        await self._run(append)

    async def _grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        query = grants_query(SQLITE, chat_id=chat_id, tool=tool, active=active)
        return [_grant(record) for (record,) in await self._run(self._rows, *query)]

    async def _audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        sql = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > ? ORDER BY seq LIMIT ?"
        return [audit_entry(row) for row in await self._run(self._rows, sql, (after_seq, limit))]

    async def _last_seq(self) -> int:
        rows = await self._run(self._rows, "SELECT coalesce(max(seq), 0) FROM audit")
        return int(rows[0][0])

    async def _load_chat(self, chat_id: str) -> StoredChat | None:
        sql = "SELECT chat_id, version, state, updated_at, owner FROM chats WHERE chat_id = ?"
        rows = await self._run(self._rows, sql, (chat_id,))
        return StoredChat(*rows[0]) if rows else None

    async def _save_chat(self, chat: StoredChat) -> bool:
        return await self._run(self._save_chat_sync, chat)

    def _save_chat_sync(self, chat: StoredChat) -> bool:
        with self._transaction() as db:
            if chat.version == 1:
                sql = (
                    "INSERT INTO chats (chat_id, version, state, updated_at, owner) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (chat_id) DO NOTHING"
                )
                params: tuple[object, ...] = (
                    chat.chat_id, chat.version, chat.state, chat.updated_at, chat.owner
                )  # fmt: skip
            else:
                sql = (
                    "UPDATE chats SET version = ?, state = ?, updated_at = ?"
                    " WHERE chat_id = ? AND version = ?"
                )
                params = (chat.version, chat.state, chat.updated_at, chat.chat_id, chat.version - 1)
            return db.execute(sql, params).rowcount == 1

    async def _lease(self, name: str, holder: str, ttl: float) -> bool:
        statement, params = lease(SQLITE, name, holder, now=self.clock(), ttl=ttl)

        def take() -> bool:
            with self._transaction() as db:
                return db.execute(statement, params).rowcount == 1

        return await self._run(take)

    async def _log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        def log() -> None:
            with self._transaction() as db:
                for statement, runs in rows.log_replies(SQLITE, batch, now):
                    db.executemany(statement, runs)

        await self._run(log)

    async def _reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        (head, head_params), (frames, frames_params) = rows.reply_log_queries(SQLITE, chat_id, after)

        def read() -> ReplyLog | None:
            found = self._rows(head, head_params)
            if not found:
                return None
            reply, meta, done, updated_at = found[0]
            logged = [frame for (frame,) in self._rows(frames, frames_params)]
            return ReplyLog(reply, meta, bool(done), updated_at, logged)

        return await self._run(read)

    async def _forget_replies(self, before: float) -> int:
        return await self._run(self._execute, rows.forget_replies(SQLITE, before))

    def _execute(self, statements: Sequence[rows.Statement]) -> int:
        """Run `statements` in one transaction; how many rows the last one changed."""
        with self._transaction() as db:
            changed = 0
            for statement, params in statements:
                changed = db.execute(statement, params).rowcount
            return changed

    # -- tasks: each write numbers its changes under the write lock, so numbers follow commit order ----------

    async def _insert_task(self, task: Task, event: AuditEvent) -> Task:
        def insert() -> Task:
            with self._transaction() as db:
                found = db.execute(*rows.task_by(SQLITE, "chat_id, call_id", task.chat_id, task.call.call_id))
                if (row := found.fetchone()) is not None:
                    return rows.task_from_row(row)
                stored = self._put(db, Change(task=task, events=(event,)), new=True).task
                assert stored is not None
                return stored

        return await self._run(insert)

    async def _mutate_task(self, task_id: str, step: Callable[[Task], Change]) -> Change:
        load = rows.task_by(SQLITE, "id", task_id)
        return await self._run(self._mutate_sync, f"task {task_id}", load, rows.task_from_row, step)

    async def _load_task(self, task_id: str) -> Task | None:
        found = await self._run(self._rows, *rows.task_by(SQLITE, "id", task_id))
        return rows.task_from_row(found[0]) if found else None

    async def _query_tasks(self, query: TaskQuery) -> list[Task]:
        found = await self._run(self._rows, *rows.tasks_query(SQLITE, query))
        return [rows.task_from_row(row) for row in found]

    async def _last_task_seq(self) -> int:
        return int((await self._run(self._rows, rows.TASK_SEQ))[0][0])

    async def _report(self, reports: Sequence[Progress], now: float) -> list[str]:
        def report() -> list[str]:
            with self._transaction() as db:
                (seq,) = db.execute(rows.TASK_SEQ).fetchone()
                db.executemany(*rows.report_tasks(SQLITE, reports, now, seq))
                ids = [r.task_id for r in reports]
                return [
                    task_id
                    for start in range(0, len(ids), 500)
                    for (task_id,) in db.execute(*rows.cancelling(SQLITE, ids[start : start + 500]))
                ]

        return await self._run(report)

    async def _beat(self, worker: str, now: float) -> list[str]:
        renew, cancelling = rows.beat(SQLITE, worker, now)

        def beat() -> list[str]:
            with self._transaction() as db:
                db.execute(*renew)
                return [task_id for (task_id,) in db.execute(*cancelling)]

        return await self._run(beat)

    # -- decisions made by other processes ----------------------------------------------------------------

    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_others())

    async def _watch_others(self) -> None:
        version = None  # so the first pass looks: a decision may have landed before the watcher started
        while ids := self.notifier.watched():
            latest, decided = await self._run(self._decided_since, version, ids)
            for approval in decided:
                self.notifier.notify(approval)
            version = latest
            await asyncio.sleep(self.poll_interval)

    def _decided_since(self, version: int | None, ids: list[str]) -> tuple[int, list[Approval]]:
        (latest,) = self._rows("PRAGMA data_version")[0]
        if latest == version:
            return latest, []
        decided = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT record FROM approvals WHERE state != 'pending' AND id IN ({marks})"
            decided += [_approval(record) for (record,) in self._rows(sql, chunk)]
        return latest, decided

    def _put(self, db: sqlite3.Connection, change: Change, *, new: bool = False) -> Change:
        """Store `change` in the open transaction, its task with the next change number; the change as
        stored."""
        if change.task is not None:
            (seq,) = db.execute(rows.TASK_SEQ).fetchone()
            change = dataclasses.replace(change, task=msgspec.structs.replace(change.task, seq=seq + 1))
        row = db.execute(AUDIT_HEAD).fetchone()
        statements, _ = writes(
            SQLITE, change, (row[0], row[1]) if row else GENESIS_HEAD, self.keyring.current, new=new
        )
        for statement, params in statements:
            db.execute(statement, params)
        return change


class _Transaction:
    """`BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` if the body raised."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
