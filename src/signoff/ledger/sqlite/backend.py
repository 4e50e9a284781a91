"""The SQLite database: one file in WAL mode, safe across processes, worked on by one connection.

Each operation is one plain function holding the connection: a read, or a whole `BEGIN IMMEDIATE …
COMMIT`. SQLite's write lock is taken up front, so loading the records, running the steps and appending
their audit entries never interleave with another writer, in this process or any other; and because the
function runs to its end, a caller cancelled halfway can never leave a transaction open. This is why
aiosqlite is not used: it hands every statement to its thread separately (six hops per decision, ~110 µs
each here, against ~15 µs of SQLite work) and has no public way to run a transaction as one unit.

Where the function runs is the point of this module. With `synchronous=normal` a commit only appends to
the WAL, without waiting for the disk, so an operation is tens of microseconds of work: it runs at once, on
the event loop, as long as nothing makes it wait. A hop to a thread would cost more than the work, and
under load the loop and the thread fight over the GIL (the profile showed the ledger's thread at a quarter
of the server's CPU). What could make it wait goes to the ledger's thread instead, so the loop never
stalls:
- another connection's write lock (the CLI, another worker): the inline attempt does not wait for it
  (`busy_timeout` 0), and on `SQLITE_BUSY` the whole function runs again on the thread, which waits up
  to the ledger's `busy_timeout` (the ledger timeout: 5 s by default);
- the WAL checkpoint, which writes the database file and waits for the disk: automatic checkpoints are
  off, and the thread checkpoints after every `CHECKPOINT_EVERY` commits, on a connection of its own
  (or, once the WAL is over `WAL_LIMIT`, on the ledger's, truncating it);
- with `synchronous=full` every commit waits for the disk, so everything runs on the thread.
While anything runs on the thread, later operations queue behind it there, in order, so the connection is
never used by two at once.

A process learns of decisions made elsewhere (the CLI, another worker) through the watcher's reads, which
`PRAGMA data_version` spares while no other connection has committed.

SQLite's errors never leave `run` raw: a full disk, a read-only file or a failed write is
`LedgerUnwritable`, a lock held past the timeout or a file that can't be opened or read is
`LedgerUnavailable`, so a route answers a 503, never a 500. A failed commit leaves no transaction open.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from signoff.core.audit import GENESIS_HEAD, AuditKey
from signoff.core.errors import LedgerUnavailable, LedgerUnwritable
from signoff.ledger import rows
from signoff.ledger.keys import Apply, ApprovalKey, AskedKey, GrantKey, Key, PrincipalKey, StartedKey, TaskKey
from signoff.ledger.records import Change, Stored
from signoff.ledger.rows import AUDIT_HEAD, SQLITE, approval_record, grant_record, principal_record
from signoff.ledger.sql import SqlApprovals, SqlPrincipals
from signoff.ledger.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from signoff.ledger.sqlite.stores import (
    SqliteChats,
    SqliteOutbox,
    SqliteTasks,
)
from signoff.ledger.stores import Backend

Synchronous = Literal["normal", "full"]
T = TypeVar("T")
log = logging.getLogger("signoff.ledger")

WAIT = 30.0
"""Seconds an operation on the ledger's thread waits for another connection's write lock, by default."""
UNWRITABLE = {
    sqlite3.SQLITE_FULL: "disk full",
    sqlite3.SQLITE_READONLY: "read-only",
    sqlite3.SQLITE_IOERR: "disk I/O error",
}
"""SQLite's primary error codes that mean nothing can be stored now, and what each means."""
UNAVAILABLE = {
    sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PERM, sqlite3.SQLITE_PROTOCOL,
}  # fmt: skip
"""SQLite's primary error codes that mean the database can't be used now; any other is a bug."""
CHECKPOINT_EVERY = 500
"""Commits between checkpoints: the WAL stays a few MB, and each checkpoint stays short."""
WAL_LIMIT = 16 * 1024 * 1024
"""Bytes of WAL past which a checkpoint runs on the ledger's connection, with operations queued behind it
and the WAL truncated: checkpoints beside a stream of writes never let the WAL start over."""


class SqliteBackend(Backend):
    dialect = SQLITE

    def __init__(
        self, path: str | Path, *, synchronous: Synchronous, poll_interval: float, busy_timeout: float = WAIT
    ) -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        self.poll_interval = poll_interval
        self.wait_ms = max(1, round(busy_timeout * 1000))
        """How long an operation on the ledger's thread waits for another connection's write lock."""
        self._hold(
            SqlApprovals(self),
            SqliteTasks(self),
            SqliteChats(self),
            SqlPrincipals(self),
            SqliteOutbox(self),
        )
        self._db: sqlite3.Connection | None = None
        self._checkpointer: sqlite3.Connection | None = None
        """A connection of the thread's own for checkpoints, so that operations go on inline meanwhile."""
        self._thread: ThreadPoolExecutor | None = None
        self._seen: int | None = None
        """The `data_version` the watcher last read."""
        self._on_thread = 0
        """Operations submitted to the thread and not yet done: while any are, all go there."""
        self._waits = True
        """The connection's busy timeout is `wait_ms` (on the thread), not 0 (inline)."""
        self._commits = 0
        """Commits since the last checkpoint."""

    async def start(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="signoff-sqlite")
        try:
            await self._on_the_thread(self._connect)
        except BaseException:
            await self.close()
            raise

    async def upgrade(self) -> tuple[int, int]:
        before = 0
        if self.path.exists():
            with contextlib.closing(sqlite3.connect(self.path)) as db:
                (before,) = db.execute("PRAGMA user_version").fetchone()
        await self.start()
        await self.close()
        return before, SCHEMA_VERSION

    def _connect(self) -> None:
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {self.wait_ms}")
            self._db.execute("PRAGMA journal_mode = WAL")
            if self.synchronous == "normal":  # commits run inline, so the thread checkpoints
                self._db.execute("PRAGMA wal_autocheckpoint = 0")
            self._db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            with self.transaction() as db:
                (version,) = db.execute("PRAGMA user_version").fetchone()
                if version > SCHEMA_VERSION:
                    raise LedgerUnavailable(
                        f"{self.path} has ledger schema {version}, newer than this signoff's {SCHEMA_VERSION}"
                    )
                for migration in MIGRATIONS[version:]:
                    for statement in filter(str.strip, migration.split(";")):
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open SQLite ledger {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._thread is not None:
            if self._db is not None:
                await self._on_the_thread(self._db.close)
                self._db = None
            await asyncio.wrap_future(self._thread.submit(self._close_checkpointer))
            self._thread.shutdown()
            self._thread = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the connection: inline when nothing can make it wait, else on the ledger's thread
        (see the module's docstring). An error of SQLite's that is an outage is raised as one."""
        try:
            return await self._run(fn, *args)
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code in UNWRITABLE:
                raise LedgerUnwritable(UNWRITABLE[code]) from exc
            if code in UNAVAILABLE:
                raise LedgerUnavailable(f"the SQLite ledger {self.path} failed: {exc}") from exc
            raise

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            raise RuntimeError(
                "the SQLite ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        if self._on_thread or self.synchronous == "full":
            return await self._on_the_thread(fn, *args)
        try:
            if self._waits:
                self._set_wait(0)
            result = fn(*args)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            return await self._on_the_thread(fn, *args)  # nothing of it was written: run it whole there
        if self._commits >= CHECKPOINT_EVERY:
            self._commits = 0
            if _size(self.path.with_name(f"{self.path.name}-wal")) > WAL_LIMIT:
                self._submit(
                    self._checkpoint, "TRUNCATE"
                )  # nobody waits for it; operations queue behind it meanwhile
            else:
                self._thread.submit(self._checkpoint)  # nobody waits for it; it has a connection of its own
        return result

    async def _on_the_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self._submit(fn, *args))

    def _submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue `fn(*args)` on the thread. It counts as on the thread until it has really finished there:
        a caller that stops waiting (cancelled) does not stop a function already running."""
        assert self._thread is not None
        loop = asyncio.get_running_loop()
        self._on_thread += 1
        job = self._thread.submit(self._waiting, fn, *args)
        job.add_done_callback(lambda _: loop.call_soon_threadsafe(self._finished))
        return job

    def _finished(self) -> None:
        self._on_thread -= 1

    def _waiting(self, fn: Callable[..., T], *args: Any) -> T:
        if not self._waits:
            self._set_wait(self.wait_ms)
        return fn(*args)

    def _set_wait(self, ms: int) -> None:
        assert self._db is not None
        self._db.execute(f"PRAGMA busy_timeout = {ms}")
        self._waits = ms > 0

    def _checkpoint(self, mode: Literal["PASSIVE", "TRUNCATE"] = "PASSIVE") -> None:
        """Copy the WAL into the database file: `PASSIVE` as far as readers and writers allow, on the
        thread's own connection while operations go on inline; `TRUNCATE` all of it, emptying the WAL, on
        the ledger's connection, which nothing else uses meanwhile."""
        try:
            if mode == "TRUNCATE":
                db = self._db
            elif self._checkpointer is None:
                db = self._checkpointer = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False
                )
            else:
                db = self._checkpointer
            assert db is not None
            db.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        except sqlite3.Error as exc:  # the WAL still holds every commit: the next checkpoint tries again
            log.warning("SQLite ledger %s: checkpoint failed: %s", self.path, exc)

    def _close_checkpointer(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, taking the write lock at once (`BEGIN IMMEDIATE`)."""
        with self._within("BEGIN IMMEDIATE") as db:
            yield db
        self._commits += 1

    def reading(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A read transaction: every read inside sees one snapshot, whatever other connections commit."""
        return self._within("BEGIN")

    @contextlib.contextmanager
    def _within(self, begin: str) -> Iterator[sqlite3.Connection]:
        """`begin` … `COMMIT`, or `ROLLBACK` if the body or the commit raised. A commit that fails (a full
        disk) may leave the transaction open, and SQLite may have rolled one back already on its own: so it
        is rolled back only if still open, and whatever the rollback says, the first error is the one
        raised. A transaction left open would refuse every later `BEGIN`."""
        db = self._db
        assert db is not None
        db.execute(begin)
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    def select(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        assert self._db is not None
        return self._db.execute(sql, params).fetchall()

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """`select` run where `run` runs it."""
        return await self.run(self.select, sql, params)

    def execute(self, statements: Sequence[rows.Statement]) -> int:
        """Run `statements` in one transaction; how many rows the last one changed."""
        with self.transaction() as db:
            changed = 0
            for statement, params in statements:
                changed = db.execute(statement, params).rowcount
            return changed

    async def transact(self, keys: Sequence[Key], apply: Apply, key: AuditKey) -> list[Change]:
        return await self.run(self._transact, keys, apply, key)

    def _transact(self, keys: Sequence[Key], apply: Apply, key: AuditKey) -> list[Change]:
        with self.transaction() as db:
            stored = {k: found for k in keys if (found := _load(db, k)) is not None}
            writes = apply(stored)
            if not writes:
                return []
            row = db.execute(AUDIT_HEAD).fetchone()
            head = (row[0], row[1]) if row else GENESIS_HEAD
            seq: int | None = None
            changes = []
            for write in writes:
                change = write.change
                if change.task is not None:  # numbered under the write lock: numbers follow commit order
                    seq = (seq if seq is not None else db.execute(rows.TASK_SEQ).fetchone()[0]) + 1
                    change = dataclasses.replace(change, task=msgspec.structs.replace(change.task, seq=seq))
                statements, head = rows.writes(SQLITE, change, head, key, new=write.new)
                for statement, params in statements:
                    db.execute(statement, params)
                changes.append(change)
            return changes

    async def lease(self, name: str, holder: str, now: float, ttl: float) -> bool:
        statement = rows.lease(SQLITE, name, holder, now=now, ttl=ttl)
        return await self.run(self.execute, [statement]) == 1

    async def moved(self) -> bool:
        latest = int((await self.run(self.select, "PRAGMA data_version"))[0][0])
        moved, self._seen = latest != self._seen, latest
        return moved


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _load(db: sqlite3.Connection, key: Key) -> Stored | None:
    match key:
        case ApprovalKey(id):
            found = db.execute("SELECT record FROM approvals WHERE id = ?", (id,)).fetchone()
            return None if found is None else Stored(approval_record(found[0]), 0)
        case AskedKey(chat_id, call_id):
            query = "SELECT record FROM approvals WHERE chat_id = ? AND call_id = ?"
            found = db.execute(query, (chat_id, call_id)).fetchone()
            return None if found is None else Stored(approval_record(found[0]), 0)
        case GrantKey(id):
            found = db.execute("SELECT record FROM grants WHERE id = ?", (id,)).fetchone()
            return None if found is None else Stored(grant_record(found[0]), 0)
        case PrincipalKey(id):
            found = db.execute(f"{rows.PRINCIPALS} WHERE id = ?", (id,)).fetchone()
            return None if found is None else Stored(principal_record(found[0]), 0)
        case TaskKey(id):
            found = db.execute(*rows.task_by(SQLITE, "id", id)).fetchone()
        case StartedKey(chat_id, call_id):
            found = db.execute(*rows.task_by(SQLITE, "chat_id, call_id", chat_id, call_id)).fetchone()
    if found is None:
        return None
    task = rows.task_from_row(found)
    return Stored(task, task.seq)
