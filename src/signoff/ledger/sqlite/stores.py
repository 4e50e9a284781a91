"""The SQLite ledger's stores: each read or write is one function on its connection (see `backend`)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from signoff.core.notice import Notice, soonest
from signoff.ledger import rows
from signoff.ledger.records import Entries, Progress, ReplyFrames, ReplyLog, StoredChat
from signoff.ledger.rows import SQLITE
from signoff.ledger.sql import Reader, SqlOutboxReads, SqlTaskReads
from signoff.ledger.stores import ChatStore

T = TypeVar("T")


class Database(Reader, Protocol):
    """What the stores need of the backend that makes them: its connection, through these (and nothing of
    the backend itself, which imports them)."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...
    def select(self, sql: str, params: Sequence[object] = ()) -> list[Any]: ...
    def execute(self, statements: Sequence[rows.Statement]) -> int: ...
    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...
    def reading(self) -> AbstractContextManager[sqlite3.Connection]: ...


@dataclass
class SqliteTasks(SqlTaskReads):
    """Each write numbers its changes under the write lock, so numbers follow commit order."""

    db: Database

    async def report(self, reports: Sequence[Progress], now: float) -> list[str]:
        def report() -> list[str]:
            with self.db.transaction() as db:
                (seq,) = db.execute(rows.TASK_SEQ).fetchone()
                db.executemany(*rows.report_tasks(SQLITE, reports, now, seq))
                ids = [r.task_id for r in reports]
                return [
                    task_id
                    for start in range(0, len(ids), 500)
                    for (task_id,) in db.execute(*rows.cancelling(SQLITE, ids[start : start + 500]))
                ]

        return await self.db.run(report)

    async def beat(self, worker: str, now: float) -> list[str]:
        renew, cancelling = rows.beat(SQLITE, worker, now)

        def beat() -> list[str]:
            with self.db.transaction() as db:
                db.execute(*renew)
                return [task_id for (task_id,) in db.execute(*cancelling)]

        return await self.db.run(beat)


_ENTRIES = "SELECT bytes FROM chat_entries WHERE chat_id = ? ORDER BY n"


@dataclass
class SqliteChats(ChatStore):
    """A chat's entries are rows beside its own, one each, so a save writes the entries it adds: SQLite
    rewrites a large value page by page, and a state holding a long history cost 0.5 ms to save."""

    db: Database

    async def load(self, chat_id: str, held: int | None) -> StoredChat | None:
        def read() -> StoredChat | None:
            with self.db.reading() as db:  # the row and its entries as one save left them
                query = (
                    "SELECT chat_id, version, CASE WHEN version = ? THEN x'' ELSE state END,"
                    " updated_at, owner FROM chats WHERE chat_id = ?"
                )
                found = db.execute(query, (held, chat_id)).fetchone()
                if found is None:
                    return None
                chat = StoredChat(*found)
                if chat.version == held:
                    return chat
                entries = [entry for (entry,) in db.execute(_ENTRIES, (chat_id,))]
            return dataclasses.replace(chat, entries=entries)

        return await self.db.run(read)

    async def save(self, chat: StoredChat, entries: Entries | None) -> bool:
        def save() -> bool:
            with self.db.transaction() as db:
                if db.execute(*rows.save_chat(SQLITE, chat)).rowcount != 1:
                    return False
                if entries is not None:
                    db.execute(
                        "DELETE FROM chat_entries WHERE chat_id = ? AND n >= ?", (chat.chat_id, entries.kept)
                    )
                    db.executemany(
                        "INSERT INTO chat_entries (chat_id, n, bytes) VALUES (?, ?, ?)",
                        [(chat.chat_id, n, entry) for n, entry in enumerate(entries.added, entries.kept)],
                    )
                return True

        return await self.db.run(save)

    async def log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        def log() -> None:
            with self.db.transaction() as db:
                for statement, runs in rows.log_replies(SQLITE, batch, now):
                    db.executemany(statement, runs)

        await self.db.run(log)

    async def reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        (head, head_params), (frames, frames_params) = rows.reply_log_queries(SQLITE, chat_id, after)

        def read() -> ReplyLog | None:
            found = self.db.select(head, head_params)
            if not found:
                return None
            reply, meta, done, updated_at = found[0]
            logged = [frame for (frame,) in self.db.select(frames, frames_params)]
            return ReplyLog(reply, meta, bool(done), updated_at, logged)

        return await self.db.run(read)

    async def forget_replies(self, before: float) -> int:
        return await self.db.run(self.db.execute, rows.forget_replies(SQLITE, before))


@dataclass
class SqliteOutbox(SqlOutboxReads):
    db: Database

    async def claim(self, channel: str, holder: str, now: float, until: float, limit: int) -> list[Notice]:
        claim = rows.claim_notices(SQLITE, channel, holder, now, until, limit, skip_locked=False)
        return sorted(map(rows.notice_from_row, await self.db.run(self._write, claim)), key=soonest)

    def _write(self, statement: rows.Statement) -> list[Any]:
        with self.db.transaction() as db:
            return db.execute(*statement).fetchall()

    async def settle(self, notices: Sequence[tuple[Notice, str]]) -> set[str]:
        return await self.db.run(self._settle, notices)

    def _settle(self, notices: Sequence[tuple[Notice, str]]) -> set[str]:
        with self.db.transaction() as db:
            return {
                n.id for n, holder in notices if db.execute(*rows.settle_notice(SQLITE, n, holder)).rowcount
            }
