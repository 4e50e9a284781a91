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

from signoff.core.approval import Approval
from signoff.core.audit import AuditEntry, AuditKey, Head, chain
from signoff.core.grant import Grant
from signoff.core.notice import Delivery, Notice
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.records import Change, Progress, ReplyFrames, StoredChat, TaskQuery

AUDIT_COLUMNS = "seq, at, actor, action, subject, before, after, detail, prev, hash"
AUDIT_HEAD = "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"
"""The last entry, which a write chains its entries after; read inside the write's transaction."""

Params = tuple[object, ...]
Statement = tuple[str, Params]


@dataclass(frozen=True)
class Dialect:
    """How one driver differs: its parameter marker, the column that orders rows inserted in the same
    instant, the LIMIT value that means none, and whether a list binds as one array parameter."""

    mark: str
    order: str
    unlimited: object
    arrays: bool

    def among(self, column: str, values: Sequence[object]) -> Statement:
        """`column` is one of `values`: one array parameter where the driver binds lists (a statement
        the same whatever the count), else a marker each."""
        if self.arrays:
            return f"{column} = ANY({self.mark})", (list(values),)
        return f"{column} IN ({_marks(self.mark, len(values))})", tuple(values)


SQLITE = Dialect(mark="?", order="rowid", unlimited=-1, arrays=False)
POSTGRES = Dialect(mark="%s", order="seq", unlimited=None, arrays=True)
encode = msgspec.json.Encoder().encode
approval_record = msgspec.json.Decoder(Approval).decode
grant_record = msgspec.json.Decoder(Grant).decode
principal_record = msgspec.json.Decoder(Registered).decode
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


def writes(
    dialect: Dialect, change: Change, head: Head, key: AuditKey, *, new: bool
) -> tuple[list[Statement], Head]:
    """The statements that store `change`, its audit entries chained after `head` with `key`, and the new
    head; `new` inserts the approval or the task rather than updating it. A task comes with its change
    number."""
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
    if (t := change.task) is not None:
        statements.append(insert_task(dialect, t) if new else update_task(dialect, t))
    if (p := change.principal) is not None:
        upsert = (
            f"INSERT INTO principals (id, token_hash, created_at, record) VALUES ({_marks(mark, 4)})"
            " ON CONFLICT (id) DO UPDATE SET record = excluded.record"
        )
        statements.append((upsert, (p.id, p.token_hash, p.created_at, encode(p).decode())))
    statements += [insert_notice(dialect, n) for n in change.notices]
    insert = f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES ({_marks(mark, 10)})"
    for event in change.events:
        entry = chain(event, head, key)
        detail = encode(entry.detail).decode()
        row = (entry.seq, entry.at, entry.actor, entry.action, entry.subject)
        statements.append((insert, (*row, entry.before, entry.after, detail, entry.prev, entry.hash)))
        head = entry.head
    return statements, head


def save_chat(dialect: Dialect, chat: StoredChat) -> Statement:
    """Insert a new chat (version 1) unless it exists, or replace the version that was read: a concurrent
    save loses cleanly, changing no row."""
    m = dialect.mark
    if chat.version == 1:
        insert = (
            f"INSERT INTO chats (chat_id, version, state, updated_at, owner) VALUES ({_marks(m, 5)})"
            " ON CONFLICT (chat_id) DO NOTHING"
        )
        return insert, (chat.chat_id, chat.version, chat.state, chat.updated_at, chat.owner)
    update = (
        f"UPDATE chats SET version = {m}, state = {m}, updated_at = {m} WHERE chat_id = {m} AND version = {m}"
    )
    return update, (chat.version, chat.state, chat.updated_at, chat.chat_id, chat.version - 1)


PRINCIPALS = "SELECT record FROM principals"
"""Every registered principal; `WHERE id = …` or `WHERE token_hash = …` for one."""


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


# -- tasks ------------------------------------------------------------------------------------------------
#
# A task is stored as its record plus the columns it is found by. Progress is the exception: a report writes
# only the progress columns (never reading the record), so those columns, not the record's copy, are the
# truth for progress, message, updated_at, heartbeat and seq.

TASK_COLUMNS = "record, progress, message, updated_at, heartbeat, seq"
TASK_SEQ = "SELECT coalesce(max(seq), 0) FROM tasks"
"""The newest change number; read inside the writing transaction, which holds the tasks' write lock."""
_task = msgspec.json.Decoder(Task).decode


def task_from_row(row: Sequence[Any]) -> Task:
    record, progress, message, updated_at, heartbeat, seq = row
    return msgspec.structs.replace(
        _task(record), progress=progress, message=message, updated_at=updated_at, heartbeat=heartbeat, seq=seq
    )


def insert_task(dialect: Dialect, task: Task) -> Statement:
    """Insert unless the chat and call id already have a task (then no row changes)."""
    columns = "id, chat_id, call_id, state, worker, cancel_by, created_at, " + TASK_COLUMNS
    params = (task.id, task.chat_id, task.call.call_id, str(task.state), task.worker, task.cancel_by,
              task.created_at, *_task_values(task))  # fmt: skip
    statement = (
        f"INSERT INTO tasks ({columns}) VALUES ({_marks(dialect.mark, 13)})"
        " ON CONFLICT (chat_id, call_id) DO NOTHING"
    )
    return statement, params


def update_task(dialect: Dialect, task: Task) -> Statement:
    """Replace the task; its writer holds the tasks' write lock, so nothing moved since it was read."""
    m = dialect.mark
    statement = (
        f"UPDATE tasks SET state = {m}, worker = {m}, cancel_by = {m}, record = {m}, progress = {m},"
        f" message = {m}, updated_at = {m}, heartbeat = {m}, seq = {m} WHERE id = {m}"
    )
    return statement, (str(task.state), task.worker, task.cancel_by, *_task_values(task), task.id)


def task_by(dialect: Dialect, column: str, *values: object) -> Statement:
    """The task whose `column` (or columns, comma-separated) equal `values`."""
    where = " AND ".join(f"{name} = {dialect.mark}" for name in column.split(", "))
    return f"SELECT {TASK_COLUMNS} FROM tasks WHERE {where}", values


def tasks_query(dialect: Dialect, query: TaskQuery) -> Statement:
    mark = dialect.mark
    where, params = _where_equal(mark, chat_id=query.chat_id)
    if query.states is not None:
        where += f" AND state IN ({_marks(mark, len(query.states))})"
        params += [str(state) for state in query.states]
    for column, operator, value in (("seq", ">", query.after_seq), ("heartbeat", "<", query.beat_before)):
        if value is not None:
            where += f" AND {column} {operator} {mark}"
            params.append(value)
    order = "seq" if query.after_seq is not None else f"created_at, {dialect.order}"
    statement = f"SELECT {TASK_COLUMNS} FROM tasks WHERE {where} ORDER BY {order} LIMIT {mark}"
    return statement, (*params, dialect.unlimited if query.limit is None else query.limit)


def report_tasks(
    dialect: Dialect, reports: Sequence[Progress], now: float, seq: int
) -> tuple[str, list[Params]]:
    """One statement and its runs: each report numbered after `seq`, written only to a running task."""
    m = dialect.mark
    statement = (
        f"UPDATE tasks SET progress = {m}, message = {m}, updated_at = {m}, heartbeat = {m}, seq = {m}"
        f" WHERE id = {m} AND state = 'running'"
    )
    return statement, [
        (r.progress, r.message, now, now, seq + i, r.task_id) for i, r in enumerate(reports, 1)
    ]


def cancelling(dialect: Dialect, ids: Sequence[str]) -> Statement:
    """Which of the running tasks `ids` someone asked to cancel."""
    among, params = dialect.among("id", ids)
    return f"SELECT id FROM tasks WHERE {among} AND state = 'running' AND cancel_by != ''", params


def beat(dialect: Dialect, worker: str, now: float) -> list[Statement]:
    """Renew the worker's unfinished tasks, then find its running ones someone asked to cancel."""
    m = dialect.mark
    return [
        (
            f"UPDATE tasks SET heartbeat = {m} WHERE worker = {m} AND state IN ('pending', 'running')",
            (now, worker),
        ),
        (f"SELECT id FROM tasks WHERE worker = {m} AND state = 'running' AND cancel_by != ''", (worker,)),
    ]


def _task_values(task: Task) -> tuple[object, ...]:
    return (encode(task).decode(), task.progress, task.message, task.updated_at, task.heartbeat, task.seq)


# -- the outbox -------------------------------------------------------------------------------------------
#
# A notice is its columns alone: a claim and a settle write them in place, and nothing else is kept.

NOTICE_COLUMNS = (
    "id, approval_id, channel, type, created_at, state, attempts, next_at, last_error, delivered_at, ref,"
    " holder, lease_until"
)


def notice_from_row(row: Sequence[Any]) -> Notice:
    return Notice(**dict(zip(NOTICE_COLUMNS.split(", "), row, strict=True)))


def insert_notice(dialect: Dialect, notice: Notice) -> Statement:
    values = tuple(getattr(notice, column) for column in NOTICE_COLUMNS.split(", "))
    return f"INSERT INTO outbox ({NOTICE_COLUMNS}) VALUES ({_marks(dialect.mark, 13)})", values


def claim_notices(
    dialect: Dialect, channel: str, holder: str, now: float, until: float, limit: int, *, skip_locked: bool
) -> Statement:
    """Hold the channel's due notices nobody holds, soonest first, and return them as held; `skip_locked`
    lets concurrent claimers on PostgreSQL pass over each other's rows instead of queueing on them."""
    m = dialect.mark
    due = (
        f"SELECT id FROM outbox WHERE channel = {m} AND state = 'pending' AND next_at <= {m}"
        f" AND lease_until <= {m} ORDER BY next_at, created_at LIMIT {m}"
        + (" FOR UPDATE SKIP LOCKED" if skip_locked else "")
    )
    statement = (
        f"UPDATE outbox SET holder = {m}, lease_until = {m}, attempts = attempts + 1"
        f" WHERE id IN ({due}) RETURNING {NOTICE_COLUMNS}"
    )
    return statement, (holder, until, channel, now, now, limit)


def settle_notice(dialect: Dialect, notice: Notice, holder: str) -> Statement:
    m = dialect.mark
    statement = (
        f"UPDATE outbox SET state = {m}, attempts = {m}, next_at = {m}, last_error = {m}, delivered_at = {m},"
        f" ref = {m}, holder = {m}, lease_until = {m} WHERE id = {m} AND holder = {m}"
    )
    n = notice
    return statement, (
        n.state, n.attempts, n.next_at, n.last_error, n.delivered_at, n.ref, n.holder, n.lease_until, n.id,
        holder
    )  # fmt: skip


def notices_query(
    dialect: Dialect, *, state: Delivery | None, approval_id: str | None, limit: int | None
) -> Statement:
    where, params = _where_equal(dialect.mark, state=state, approval_id=approval_id)
    statement = (
        f"SELECT {NOTICE_COLUMNS} FROM outbox WHERE {where} ORDER BY created_at, {dialect.order}"
        f" LIMIT {dialect.mark}"
    )
    return statement, (*params, dialect.unlimited if limit is None else limit)


def notice_by_id(dialect: Dialect, notice_id: str) -> Statement:
    return f"SELECT {NOTICE_COLUMNS} FROM outbox WHERE id = {dialect.mark}", (notice_id,)
