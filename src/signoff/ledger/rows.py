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
from signoff.ledger.base import Change

AUDIT_COLUMNS = "seq, at, actor, action, subject, before, after, detail, prev, hash"
AUDIT_HEAD = "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"
"""The last entry, which a write chains its entries after; read inside the write's transaction."""

Statement = tuple[str, tuple[object, ...]]


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
