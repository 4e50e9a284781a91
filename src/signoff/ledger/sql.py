"""What both SQL ledgers read alike: approvals (with grants and the audit log), principals, tasks, notices.

SQLite and PostgreSQL keep these in the same tables (see `rows`), so their reads are the same statements in
two dialects. Only how a statement runs differs, and that is what each backend gives these stores: its
`dialect` and its `fetch`. The writes of tasks and notices stay each backend's own (each takes its locks in
its own way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from signoff.core.approval import Approval, State
from signoff.core.audit import AuditEntry
from signoff.core.grant import Grant
from signoff.core.notice import Delivery, Notice
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger import rows
from signoff.ledger.records import TaskQuery
from signoff.ledger.rows import (
    AUDIT_COLUMNS,
    PRINCIPALS,
    Dialect,
    approval_record,
    grant_record,
    principal_record,
)
from signoff.ledger.stores import ApprovalStore, OutboxStore, PrincipalStore, TaskStore

T = TypeVar("T")


class Reader(Protocol):
    """What the shared stores need of a SQL backend."""

    @property
    def dialect(self) -> Dialect: ...
    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Any]: ...


@dataclass
class _Reads:
    db: Reader

    async def _first(self, decode: Callable[[Any], T], sql: str, params: Sequence[object]) -> T | None:
        """The first row's `record`, decoded; None for no row."""
        found = await self.db.fetch(sql, params)
        return decode(found[0][0]) if found else None

    async def _each(self, decode: Callable[[Any], T], sql: str, params: Sequence[object]) -> list[T]:
        """Every row's `record`, decoded."""
        return [decode(record) for (record,) in await self.db.fetch(sql, params)]


@dataclass
class SqlApprovals(_Reads, ApprovalStore):
    async def load(self, approval_id: str) -> Approval | None:
        sql = f"SELECT record FROM approvals WHERE id = {self.db.dialect.mark}"
        return await self._first(approval_record, sql, (approval_id,))

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        mark = self.db.dialect.mark
        sql = f"SELECT record FROM approvals WHERE chat_id = {mark} AND call_id = {mark}"
        return await self._first(approval_record, sql, (chat_id, call_id))

    async def query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        state_name = None if state is None else str(state)
        query = rows.approvals_query(
            self.db.dialect, chat_id=chat_id, state=state_name, due_by=due_by, limit=limit
        )
        return await self._each(approval_record, *query)

    async def load_many(self, approval_ids: Sequence[str]) -> list[Approval]:
        among, params = self.db.dialect.among("id", approval_ids)
        return await self._each(approval_record, f"SELECT record FROM approvals WHERE {among}", params)

    async def decided(self, approval_ids: Sequence[str]) -> list[Approval]:
        among, params = self.db.dialect.among("id", approval_ids)
        sql = f"SELECT record FROM approvals WHERE state != 'pending' AND {among}"
        return await self._each(approval_record, sql, params)

    async def grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        query = rows.grants_query(self.db.dialect, chat_id=chat_id, tool=tool, active=active)
        return await self._each(grant_record, *query)

    async def audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        mark = self.db.dialect.mark
        sql = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > {mark} ORDER BY seq LIMIT {mark}"
        return [rows.audit_entry(row) for row in await self.db.fetch(sql, (after_seq, limit))]

    async def last_seq(self) -> int:
        return int((await self.db.fetch("SELECT coalesce(max(seq), 0) FROM audit", ()))[0][0])


@dataclass
class SqlPrincipals(_Reads, PrincipalStore):
    async def load(self, principal_id: str) -> Registered | None:
        return await self._first(
            principal_record, f"{PRINCIPALS} WHERE id = {self.db.dialect.mark}", (principal_id,)
        )

    async def by_token(self, token_hash: str) -> Registered | None:
        sql = f"{PRINCIPALS} WHERE token_hash = {self.db.dialect.mark}"
        return await self._first(principal_record, sql, (token_hash,))

    async def all(self) -> list[Registered]:
        return await self._each(
            principal_record, f"{PRINCIPALS} ORDER BY created_at, {self.db.dialect.order}", ()
        )


@dataclass
class SqlTaskReads(_Reads, TaskStore):
    """A task store's reads; a backend's task store adds its writes."""

    async def load(self, task_id: str) -> Task | None:
        found = await self.db.fetch(*rows.task_by(self.db.dialect, "id", task_id))
        return rows.task_from_row(found[0]) if found else None

    async def query(self, query: TaskQuery) -> list[Task]:
        return [
            rows.task_from_row(row) for row in await self.db.fetch(*rows.tasks_query(self.db.dialect, query))
        ]

    async def last_seq(self) -> int:
        return int((await self.db.fetch(rows.TASK_SEQ, ()))[0][0])


@dataclass
class SqlOutboxReads(_Reads, OutboxStore):
    """An outbox store's reads; a backend's outbox store adds its claims and settles."""

    async def load(self, notice_id: str) -> Notice | None:
        found = await self.db.fetch(*rows.notice_by_id(self.db.dialect, notice_id))
        return rows.notice_from_row(found[0]) if found else None

    async def query(
        self, *, state: Delivery | None, approval_id: str | None, limit: int | None
    ) -> list[Notice]:
        query = rows.notices_query(self.db.dialect, state=state, approval_id=approval_id, limit=limit)
        return [rows.notice_from_row(row) for row in await self.db.fetch(*query)]
