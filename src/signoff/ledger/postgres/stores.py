"""The PostgreSQL ledger's stores: plain reads from the pool, and the writes nothing audits."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from signoff.core.notice import Notice, soonest
from signoff.ledger import rows
from signoff.ledger.records import Entries, Progress, ReplyFrames, ReplyLog, StoredChat
from signoff.ledger.rows import POSTGRES
from signoff.ledger.sql import Reader, SqlOutboxReads, SqlTaskReads
from signoff.ledger.stores import ChatStore


class Database(Reader, Protocol):
    """What the stores need of the backend that makes them: its pool, through these (and nothing of the
    backend itself, which imports them)."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...
    async def execute(self, statements: Sequence[rows.Statement]) -> int: ...
    def task_write(self) -> AbstractAsyncContextManager[tuple[psycopg.AsyncConnection[Any], int]]: ...


@dataclass
class PostgresTasks(SqlTaskReads):
    db: Database

    async def report(self, reports: Sequence[Progress], now: float) -> list[str]:
        async with self.db.task_write() as (conn, seq):
            statement, runs = rows.report_tasks(POSTGRES, reports, now, seq)
            async with conn.cursor() as cursor:
                await cursor.executemany(statement.encode(), runs)
            query, params = rows.cancelling(POSTGRES, [r.task_id for r in reports])
            return [task_id for (task_id,) in await (await conn.execute(query, params)).fetchall()]

    async def beat(self, worker: str, now: float) -> list[str]:
        (renew, renew_params), (cancelling, cancelling_params) = rows.beat(POSTGRES, worker, now)
        async with self.db.task_write() as (conn, _):  # the lock orders it with reports: no deadlock
            await conn.execute(renew.encode(), renew_params)
            found = await conn.execute(cancelling.encode(), cancelling_params)
            return [task_id for (task_id,) in await found.fetchall()]


_SAVE_ENTRIES = (
    "WITH saved AS ({save} RETURNING chat_id),"
    " gone AS (DELETE FROM chat_entries WHERE chat_id IN (SELECT chat_id FROM saved) AND n >= %s),"
    " added AS (INSERT INTO chat_entries (chat_id, n, bytes)"
    " SELECT chat_id, %s + e.i - 1, e.bytes FROM saved, unnest(%s::bytea[]) WITH ORDINALITY AS e (bytes, i)"
    " ON CONFLICT (chat_id, n) DO UPDATE SET bytes = excluded.bytes)"
    " SELECT chat_id FROM saved"
)
"""A chat's save with its entries' change. The statements of one `WITH` run on one snapshot in no set
order, so the rows they touch are kept apart: the delete takes the entries after the new last one, and
the added ones overwrite any they land on."""


@dataclass
class PostgresChats(ChatStore):
    db: Database

    async def load(self, chat_id: str, held: int | None) -> StoredChat | None:
        query = (
            "SELECT chat_id, version, CASE WHEN version = %s THEN ''::bytea ELSE state END, updated_at,"
            " owner, CASE WHEN version = %s THEN '{}'::bytea[] ELSE ARRAY("
            "SELECT bytes FROM chat_entries AS e WHERE e.chat_id = chats.chat_id ORDER BY n) END"
            " FROM chats WHERE chat_id = %s"
        )
        found = await self.db.fetch(query, (held, held, chat_id))
        if not found:
            return None
        chat_id, version, state, updated_at, owner, entries = found[0]
        return StoredChat(chat_id, version, bytes(state), updated_at, owner, [bytes(e) for e in entries])

    async def save(self, chat: StoredChat, entries: Entries | None) -> bool:
        statement, params = rows.save_chat(POSTGRES, chat)
        if entries is not None:  # one statement: the entries change only where the row did
            statement = _SAVE_ENTRIES.format(save=statement)
            params = (*params, entries.kept + len(entries.added), entries.kept, list(entries.added))
        async with self.db.connection() as conn:
            return (await conn.execute(statement.encode(), params)).rowcount == 1

    async def log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        async with self.db.connection() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cursor:
            for statement, runs in rows.log_replies(POSTGRES, batch, now):
                if runs:
                    await cursor.executemany(statement.encode(), runs)

    async def reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        (head, head_params), (frames, frames_params) = rows.reply_log_queries(POSTGRES, chat_id, after)
        found = await self.db.fetch(head, head_params)
        if not found:
            return None
        reply, meta, done, updated_at = found[0]
        logged = [bytes(frame) for (frame,) in await self.db.fetch(frames, frames_params)]
        return ReplyLog(reply, bytes(meta), done, updated_at, logged)

    async def forget_replies(self, before: float) -> int:
        return await self.db.execute(rows.forget_replies(POSTGRES, before))


@dataclass
class PostgresOutbox(SqlOutboxReads):
    db: Database

    async def claim(self, channel: str, holder: str, now: float, until: float, limit: int) -> list[Notice]:
        statement, params = rows.claim_notices(POSTGRES, channel, holder, now, until, limit, skip_locked=True)
        async with self.db.connection() as conn, conn.transaction():
            found = await (await conn.execute(statement.encode(), params)).fetchall()
        return sorted(map(rows.notice_from_row, found), key=soonest)

    async def settle(self, notices: Sequence[tuple[Notice, str]]) -> set[str]:
        """One transaction, pipelined: a round trip for the whole batch."""
        async with self.db.connection() as conn, conn.transaction(), conn.pipeline():
            cursors = []
            for notice, holder in notices:
                statement, params = rows.settle_notice(POSTGRES, notice, holder)
                cursors.append(await conn.execute(statement.encode(), params))
        return {n.id for (n, _), cursor in zip(notices, cursors, strict=True) if cursor.rowcount == 1}
