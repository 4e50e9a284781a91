"""The SQLite ledger: the embedded default, one file in WAL mode, safe across processes.

Writes run in `BEGIN IMMEDIATE` transactions, which take SQLite's single write lock up front: reading a
record, applying the core step and appending its audit entries can then never interleave with another
writer, in this process or any other. A process learns of decisions made elsewhere (the CLI, another
worker) by watching `PRAGMA data_version`, which SQLite bumps whenever another connection commits; it
polls only while someone in this process is waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import msgspec

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditEntry, AuditEvent, Head, chain
from signoff.core.errors import LedgerUnavailable, NotFound
from signoff.core.grant import Grant
from signoff.ledger.base import Change, Clock, Ledger

Synchronous = Literal["normal", "full"]

SCHEMA_VERSION = 1
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
"""

_encode = msgspec.json.Encoder().encode
_approval = msgspec.json.Decoder(Approval).decode
_grant = msgspec.json.Decoder(Grant).decode
_detail = msgspec.json.Decoder(dict[str, Any]).decode


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
    ) -> None:
        super().__init__(**({"clock": clock} if clock else {}))
        self.path = Path(path)
        self.synchronous = synchronous
        self.poll_interval = poll_interval
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # Checked here, not left to connect(): aiosqlite leaks its worker thread when connecting fails.
        if not self.path.parent.is_dir():
            raise LedgerUnavailable(
                f"cannot open SQLite ledger {self.path}: {self.path.parent} is not a directory"
            )
        if self.path.is_dir():
            raise LedgerUnavailable(f"cannot open SQLite ledger {self.path}: it is a directory")
        try:
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            await self._db.execute("PRAGMA busy_timeout = 30000")
            await self._db.execute("PRAGMA journal_mode = WAL")
            await self._db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            async with self._write() as db:
                version = next(iter(await db.execute_fetchall("PRAGMA user_version")))[0]
                if version > SCHEMA_VERSION:
                    raise LedgerUnavailable(
                        f"{self.path} has ledger schema {version}, newer than this signoff's {SCHEMA_VERSION}"
                    )
                for statement in filter(str.strip, SCHEMA.split(";")):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            await self.close()
            raise LedgerUnavailable(f"cannot open SQLite ledger {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError(
                "the SQLite ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        return self._db

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            db = self.db
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                with contextlib.suppress(sqlite3.OperationalError):
                    await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")

    async def _rows(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        async with self._lock:
            return list(await self.db.execute_fetchall(sql, params))

    # -- primitives ---------------------------------------------------------------------------------------

    async def _insert(self, approval: Approval, event: AuditEvent) -> Approval:
        async with self._write() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT record FROM approvals WHERE chat_id = ? AND call_id = ?",
                    (approval.chat_id, approval.call.call_id),
                )
            )
            if rows:
                return _approval(rows[0][0])
            await self._put(db, Change(approval=approval, events=(event,)), new=True)
        return approval

    async def _load(self, approval_id: str) -> Approval | None:
        rows = await self._rows("SELECT record FROM approvals WHERE id = ?", (approval_id,))
        return _approval(rows[0][0]) if rows else None

    async def _find(self, chat_id: str, call_id: str) -> Approval | None:
        rows = await self._rows(
            "SELECT record FROM approvals WHERE chat_id = ? AND call_id = ?", (chat_id, call_id)
        )
        return _approval(rows[0][0]) if rows else None

    async def _query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        where, params = _where(chat_id=chat_id, state=None if state is None else str(state))
        if due_by is not None:
            where += " AND deadline IS NOT NULL AND deadline <= ?"
            params.append(due_by)
        sql = f"SELECT record FROM approvals WHERE {where} ORDER BY created_at, rowid LIMIT ?"
        rows = await self._rows(sql, [*params, -1 if limit is None else limit])
        return [_approval(record) for (record,) in rows]

    async def _mutate(self, approval_id: str, step: Callable[[Approval], Change]) -> Change:
        async with self._write() as db:
            rows = list(
                await db.execute_fetchall("SELECT record FROM approvals WHERE id = ?", (approval_id,))
            )
            if not rows:
                raise NotFound(f"no approval {approval_id}")
            change = step(_approval(rows[0][0]))
            await self._put(db, change)
        return change

    async def _mutate_grant(self, grant_id: str, step: Callable[[Grant], Change]) -> Change:
        async with self._write() as db:
            rows = list(await db.execute_fetchall("SELECT record FROM grants WHERE id = ?", (grant_id,)))
            if not rows:
                raise NotFound(f"no grant {grant_id}")
            change = step(_grant(rows[0][0]))
            await self._put(db, change)
        return change

    async def _append(self, events: Sequence[AuditEvent]) -> None:
        async with self._write() as db:
            await self._chain(db, events)

    async def _grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        where, params = _where(tool=tool)
        if chat_id is not None:
            where += " AND (chat_id IS NULL OR chat_id = ?)"
            params.append(chat_id)
        if active:
            where += " AND active = 1"
        rows = await self._rows(f"SELECT record FROM grants WHERE {where} ORDER BY created_at, rowid", params)
        return [_grant(record) for (record,) in rows]

    async def _audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        rows = await self._rows(
            "SELECT seq, at, actor, action, subject, before, after, detail, prev, hash FROM audit"
            " WHERE seq > ? ORDER BY seq LIMIT ?",
            (after_seq, limit),
        )
        return [
            AuditEntry(
                seq=seq,
                at=at,
                actor=actor,
                action=action,
                subject=subject,
                before=before,
                after=after,
                detail=_detail(detail),
                prev=prev,
                hash=hash_,
            )
            for (seq, at, actor, action, subject, before, after, detail, prev, hash_) in rows
        ]

    # -- writing, inside a transaction --------------------------------------------------------------------

    async def _put(self, db: aiosqlite.Connection, change: Change, *, new: bool = False) -> None:
        if (a := change.approval) is not None:
            if new:
                await db.execute(
                    "INSERT INTO approvals (id, chat_id, call_id, state, deadline, created_at, record)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        a.id,
                        a.chat_id,
                        a.call.call_id,
                        str(a.state),
                        a.deadline,
                        a.created_at,
                        _encode(a).decode(),
                    ),
                )
            else:
                await db.execute(
                    "UPDATE approvals SET state = ?, record = ? WHERE id = ?",
                    (str(a.state), _encode(a).decode(), a.id),
                )
        if (g := change.grant) is not None:
            await db.execute(
                "INSERT INTO grants (id, tool, chat_id, active, created_at, record) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET active = excluded.active, record = excluded.record",
                (g.id, g.tool, g.chat_id, int(g.active), g.created_at, _encode(g).decode()),
            )
        await self._chain(db, change.events)

    async def _chain(self, db: aiosqlite.Connection, events: Iterable[AuditEvent]) -> None:
        rows = list(await db.execute_fetchall("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"))
        head: Head = (rows[0][0], rows[0][1]) if rows else GENESIS_HEAD
        for event in events:
            entry = chain(event, head)
            await db.execute(
                "INSERT INTO audit (seq, at, actor, action, subject, before, after, detail, prev, hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.seq,
                    entry.at,
                    entry.actor,
                    entry.action,
                    entry.subject,
                    entry.before,
                    entry.after,
                    _encode(entry.detail).decode(),
                    entry.prev,
                    entry.hash,
                ),
            )
            head = entry.head

    # -- decisions made by other processes ----------------------------------------------------------------

    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_others())

    async def _watch_others(self) -> None:
        version = None  # so the first pass looks: a decision may have landed before the watcher started
        while ids := self.notifier.watched():
            rows = await self._rows("PRAGMA data_version")
            if rows[0][0] != version:
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    decided = await self._rows(
                        f"SELECT record FROM approvals WHERE state != 'pending' AND id IN ({marks})", chunk
                    )
                    for (record,) in decided:
                        self.notifier.notify(_approval(record))
            version = rows[0][0]
            await asyncio.sleep(self.poll_interval)


def _where(**equal: str | None) -> tuple[str, list[object]]:
    clauses, params = ["1 = 1"], list[object]()
    for column, value in equal.items():
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(clauses), params
