"""The approvals store of both SQL ledgers.

SQLite and PostgreSQL keep approvals, grants and the audit log in the same tables (see `rows`), so their
reads are the same statements in two dialects. Only how a statement runs differs, and that is what each
backend hands this store: a `select`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from signoff.core.approval import Approval, State
from signoff.core.audit import AuditEntry
from signoff.core.grant import Grant
from signoff.ledger import rows
from signoff.ledger.rows import AUDIT_COLUMNS, Dialect, approval_record, grant_record
from signoff.ledger.stores import ApprovalStore

Select = Callable[[str, Sequence[object]], Awaitable[list[Any]]]


@dataclass
class SqlApprovals(ApprovalStore):
    dialect: Dialect
    select: Select

    async def load(self, approval_id: str) -> Approval | None:
        return await self._one(f"SELECT record FROM approvals WHERE id = {self.dialect.mark}", (approval_id,))

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        mark = self.dialect.mark
        sql = f"SELECT record FROM approvals WHERE chat_id = {mark} AND call_id = {mark}"
        return await self._one(sql, (chat_id, call_id))

    async def query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        state_name = None if state is None else str(state)
        query = rows.approvals_query(
            self.dialect, chat_id=chat_id, state=state_name, due_by=due_by, limit=limit
        )
        return await self._all(*query)

    async def load_many(self, approval_ids: Sequence[str]) -> list[Approval]:
        among, params = self.dialect.among("id", approval_ids)
        return await self._all(f"SELECT record FROM approvals WHERE {among}", params)

    async def decided(self, approval_ids: Sequence[str]) -> list[Approval]:
        among, params = self.dialect.among("id", approval_ids)
        return await self._all(f"SELECT record FROM approvals WHERE state != 'pending' AND {among}", params)

    async def grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        query = rows.grants_query(self.dialect, chat_id=chat_id, tool=tool, active=active)
        return [grant_record(record) for (record,) in await self.select(*query)]

    async def audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        mark = self.dialect.mark
        sql = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > {mark} ORDER BY seq LIMIT {mark}"
        return [rows.audit_entry(row) for row in await self.select(sql, (after_seq, limit))]

    async def last_seq(self) -> int:
        return int((await self.select("SELECT coalesce(max(seq), 0) FROM audit", ()))[0][0])

    async def _one(self, sql: str, params: Sequence[object]) -> Approval | None:
        found = await self.select(sql, params)
        return approval_record(found[0][0]) if found else None

    async def _all(self, sql: str, params: Sequence[object]) -> list[Approval]:
        return [approval_record(record) for (record,) in await self.select(sql, params)]
