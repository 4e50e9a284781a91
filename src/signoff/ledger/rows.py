"""What the SQL ledgers write and read, as statements with their parameters.

SQLite and PostgreSQL store the same records the same way; only how a statement runs differs (a thread
for one, a connection pool for the other) and how a parameter is marked (`?` or `%s`). So the statements
are built here without I/O, and each backend runs them inside its own write transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from signoff.core.audit import AuditEntry, Head, chain
from signoff.ledger.base import Change, ReplyFrames

AUDIT_COLUMNS = "seq, at, actor, action, subject, before, after, detail, prev, hash"
AUDIT_HEAD = "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"
"""The last entry, which a write chains its entries after; read inside the write's transaction."""

Params = tuple[object, ...]
Statement = tuple[str, Params]


@dataclass(frozen=True)
class Dialect:
    """How one driver differs: its parameter marker, the column that orders rows inserted in the same
    instant, and the LIMIT value that means none."""

    mark: str
    order: str
    unlimited: object


SQLITE = Dialect(mark="?", order="rowid", unlimited=-1)
POSTGRES = Dialect(mark="%s", order="seq", unlimited=None)
encode = msgspec.json.Encoder().encode
_detail = msgspec.json.Decoder(dict[str, Any]).decode


def approvals_query(
    dialect: Dialect, *, chat_id: str | None, state: str | None, due_by: float | None, limit: int | None
) -> Statement:
    """Approvals oldest first; `due_by` keeps those with a deadline at or before it."""
    mark = dialect.mark
    where, params = _where_equal(mark, chat_id=chat_id, state=state)
    if due_by is not None:
        where += f" AND deadline IS NOT NULL AND deadline <= {mark}"
        params.append(due_by)
    query = f"SELECT record FROM approvals WHERE {where} ORDER BY created_at, {dialect.order} LIMIT {mark}"
    return query, (*params, dialect.unlimited if limit is None else limit)


def grants_query(dialect: Dialect, *, chat_id: str | None, tool: str | None, active: bool) -> Statement:
    """Grants oldest first; with `chat_id`, those of that chat and those of every chat."""
    where, params = _where_equal(dialect.mark, tool=tool)
    if chat_id is not None:
        where += f" AND (chat_id IS NULL OR chat_id = {dialect.mark})"
        params.append(chat_id)
    if active:
        where += " AND active = TRUE"
    return f"SELECT record FROM grants WHERE {where} ORDER BY created_at, {dialect.order}", tuple(params)


def writes(dialect: Dialect, change: Change, head: Head, *, new: bool) -> tuple[list[Statement], Head]:
    """The statements that store `change`, its audit entries chained after `head`, and the new head;
    `new` inserts the approval rather than updating it."""
    mark = dialect.mark
    statements: list[Statement] = []
    if (a := change.approval) is not None:
        record = encode(a).decode()
        if new:
            columns = "id, chat_id, call_id, state, deadline, created_at, record"
            params: tuple[object, ...] = (
                a.id, a.chat_id, a.call.call_id, str(a.state), a.deadline, a.created_at, record
            )  # fmt: skip
            statements.append((f"INSERT INTO approvals ({columns}) VALUES ({_marks(mark, 7)})", params))
        else:
            update = f"UPDATE approvals SET state = {mark}, record = {mark} WHERE id = {mark}"
            statements.append((update, (str(a.state), record, a.id)))
    if (g := change.grant) is not None:
        upsert = (
            f"INSERT INTO grants (id, tool, chat_id, active, created_at, record) VALUES ({_marks(mark, 6)})"
            " ON CONFLICT (id) DO UPDATE SET active = excluded.active, record = excluded.record"
        )
        statements.append((upsert, (g.id, g.tool, g.chat_id, g.active, g.created_at, encode(g).decode())))
    insert = f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES ({_marks(mark, 10)})"
    for event in change.events:
        entry = chain(event, head)
        detail = encode(entry.detail).decode()
        row = (entry.seq, entry.at, entry.actor, entry.action, entry.subject)
        statements.append((insert, (*row, entry.before, entry.after, detail, entry.prev, entry.hash)))
        head = entry.head
    return statements, head


def lease(dialect: Dialect, name: str, holder: str, *, now: float, ttl: float) -> Statement:
    """Take the lease if it is free, expired or already `holder`'s; it is held if one row changed."""
    mark = dialect.mark
    statement = (
        f"INSERT INTO leases (name, holder, until) VALUES ({_marks(mark, 3)}) ON CONFLICT (name) DO UPDATE"
        " SET holder = excluded.holder, until = excluded.until"
        f" WHERE leases.holder = excluded.holder OR leases.until < {mark}"
    )
    return statement, (name, holder, now + ttl, now)


def log_replies(dialect: Dialect, batch: Sequence[ReplyFrames], now: float) -> list[tuple[str, list[Params]]]:
    """Each statement with the parameters of every run of it, in the order to run them: the logs that
    begin start over first, then every log still on its reply is touched and gets its frames."""
    mark = dialect.mark
    upsert = (
        f"INSERT INTO replies (chat_id, reply, meta, done, updated_at) VALUES ({_marks(mark, 5)})"
        " ON CONFLICT (chat_id) DO UPDATE SET reply = excluded.reply, meta = excluded.meta,"
        " done = excluded.done, updated_at = excluded.updated_at"
    )
    guard = (
        f"UPDATE replies SET done = (done OR {mark}), updated_at = {mark}"
        f" WHERE chat_id = {mark} AND reply = {mark}"
    )
    insert = (
        f"INSERT INTO frames (chat_id, n, frame) SELECT {_marks(mark, 3)} WHERE EXISTS"
        f" (SELECT 1 FROM replies WHERE chat_id = {mark} AND reply = {mark})"
        " ON CONFLICT (chat_id, n) DO NOTHING"
    )
    begun = [e for e in batch if e.meta is not None]
    return [
        (f"DELETE FROM frames WHERE chat_id = {mark}", [(e.chat_id,) for e in begun]),
        (upsert, [(e.chat_id, e.reply, e.meta, False, now) for e in begun]),
        (guard, [(e.done, now, e.chat_id, e.reply) for e in batch]),
        (
            insert,
            [
                (e.chat_id, e.start + i, frame, e.chat_id, e.reply)
                for e in batch
                for i, frame in enumerate(e.frames, 1)
            ],
        ),
    ]


def reply_log_queries(dialect: Dialect, chat_id: str, after: int) -> tuple[Statement, Statement]:
    """The log's row, then its frames: read in this order, a log seen done has all its frames."""
    mark = dialect.mark
    return (
        (f"SELECT reply, meta, done, updated_at FROM replies WHERE chat_id = {mark}", (chat_id,)),
        (f"SELECT frame FROM frames WHERE chat_id = {mark} AND n > {mark} ORDER BY n", (chat_id, after)),
    )


def forget_replies(dialect: Dialect, before: float) -> list[Statement]:
    mark = dialect.mark
    old = f"SELECT chat_id FROM replies WHERE updated_at < {mark}"
    return [
        (f"DELETE FROM frames WHERE chat_id IN ({old})", (before,)),
        (f"DELETE FROM replies WHERE updated_at < {mark}", (before,)),
    ]


def audit_entry(row: Sequence[Any]) -> AuditEntry:
    fields = dict(zip(AUDIT_COLUMNS.split(", "), row, strict=True))
    fields["detail"] = _detail(fields["detail"])
    return AuditEntry(**fields)


def _where_equal(mark: str, **equal: str | None) -> tuple[str, list[object]]:
    """`column = value` for every value given, ANDed."""
    clauses, params = ["1 = 1"], list[object]()
    for column, value in equal.items():
        if value is not None:
            clauses.append(f"{column} = {mark}")
            params.append(value)
    return " AND ".join(clauses), params


def _marks(mark: str, count: int) -> str:
    return ", ".join([mark] * count)
