"""The in-memory ledger, for tests and single-process experiments.

Every primitive runs without awaiting between its read and its write, so on one event loop each is atomic
by construction, and a decision wakes its waiters synchronously through the notifier: nothing polls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import msgspec

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditEntry, AuditEvent, Head, Keyring, chain
from signoff.core.errors import NotFound
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task, TaskState
from signoff.ledger.base import (
    Change,
    Clock,
    Ledger,
    Progress,
    ReplyFrames,
    ReplyLog,
    StoredChat,
    TaskQuery,
)


class MemoryLedger(Ledger):
    def __init__(self, *, clock: Clock | None = None, keyring: Keyring | None = None) -> None:
        super().__init__(**({"clock": clock} if clock else {}), keyring=keyring)
        self._approvals: dict[str, Approval] = {}
        self._by_call: dict[tuple[str, str], str] = {}
        self._grant_records: dict[str, Grant] = {}
        self._log: list[AuditEntry] = []
        self._chats: dict[str, StoredChat] = {}
        self._replies: dict[str, ReplyLog] = {}
        self._tasks: dict[str, Task] = {}
        self._task_by_call: dict[tuple[str, str], str] = {}
        self._task_seq = 0
        self._principal_records: dict[str, Registered] = {}

    def _default_keyring(self) -> Keyring:
        """Nobody else ever reads this ledger: a key that lives as long as it does."""
        return Keyring.ephemeral()

    def _head(self) -> Head:
        return self._log[-1].head if self._log else GENESIS_HEAD

    def _commit(self, change: Change) -> Change:
        """Store `change` whole or not at all: its entries are chained, which can fail, before anything is
        stored."""
        head, entries = self._head(), []
        for event in change.events:
            entries.append(chain(event, head, self.keyring.current))
            head = entries[-1].head
        if change.approval is not None:
            self._approvals[change.approval.id] = change.approval
        if change.grant is not None:
            self._grant_records[change.grant.id] = change.grant
        if change.task is not None:
            change = dataclasses.replace(change, task=self._store_task(change.task))
        if change.principal is not None:
            self._principal_records[change.principal.id] = change.principal
        self._log += entries
        return change

    async def _insert(self, approval: Approval, event: AuditEvent) -> Approval:
        key = (approval.chat_id, approval.call.call_id)
        if key in self._by_call:
            return self._approvals[self._by_call[key]]
        self._by_call[key] = approval.id
        self._commit(Change(approval=approval, events=(event,)))
        return approval

    async def _load(self, approval_id: str) -> Approval | None:
        return self._approvals.get(approval_id)

    async def _find(self, chat_id: str, call_id: str) -> Approval | None:
        approval_id = self._by_call.get((chat_id, call_id))
        return None if approval_id is None else self._approvals[approval_id]

    async def _query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        found = [
            a
            for a in self._approvals.values()
            if (chat_id is None or a.chat_id == chat_id)
            and (state is None or a.state is state)
            and (due_by is None or (a.deadline is not None and a.deadline <= due_by))
        ]
        return found[:limit]

    async def _mutate(self, approval_id: str, step: Callable[[Approval], Change]) -> Change:
        approval = self._approvals.get(approval_id)
        if approval is None:
            raise NotFound(f"no approval {approval_id}")
        return self._commit(step(approval))

    async def _mutate_grant(self, grant_id: str, step: Callable[[Grant], Change]) -> Change:
        grant = self._grant_records.get(grant_id)
        if grant is None:
            raise NotFound(f"no grant {grant_id}")
        return self._commit(step(grant))

    async def _mutate_principal(
        self, principal_id: str, step: Callable[[Registered | None], Change]
    ) -> Change:
        return self._commit(step(self._principal_records.get(principal_id)))

    async def _load_principal(self, principal_id: str) -> Registered | None:
        return self._principal_records.get(principal_id)

    async def _principal_by_token(self, token_hash: str) -> Registered | None:
        return next((p for p in self._principal_records.values() if p.token_hash == token_hash), None)

    async def _principals(self) -> list[Registered]:
        return list(self._principal_records.values())

    async def _append(self, events: Sequence[AuditEvent]) -> None:
        self._commit(Change(events=tuple(events)))

    async def _grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        return [
            g
            for g in self._grant_records.values()
            if (tool is None or g.tool == tool)
            and (chat_id is None or g.chat_id is None or g.chat_id == chat_id)
            and (not active or g.active)
        ]

    async def _audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        return self._log[after_seq : after_seq + limit]

    async def _last_seq(self) -> int:
        return len(self._log)

    async def _load_chat(self, chat_id: str) -> StoredChat | None:
        return self._chats.get(chat_id)

    async def _save_chat(self, chat: StoredChat) -> bool:
        current = self._chats.get(chat.chat_id)
        if (0 if current is None else current.version) != chat.version - 1:
            return False
        self._chats[chat.chat_id] = (
            chat if current is None else dataclasses.replace(chat, owner=current.owner)
        )
        return True

    async def _log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        for entry in batch:
            if entry.meta is not None:
                self._replies[entry.chat_id] = ReplyLog(entry.reply, entry.meta, False, now, [])
            log = self._replies.get(entry.chat_id)
            if log is not None and log.reply == entry.reply:
                kept = [*log.frames, *entry.frames[len(log.frames) - entry.start :]]
                self._replies[entry.chat_id] = ReplyLog(
                    log.reply, log.meta, log.done or entry.done, now, kept
                )

    async def _reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        log = self._replies.get(chat_id)
        return None if log is None else dataclasses.replace(log, frames=log.frames[after:])

    async def _forget_replies(self, before: float) -> int:
        old = [chat_id for chat_id, log in self._replies.items() if log.updated_at < before]
        for chat_id in old:
            del self._replies[chat_id]
        return len(old)

    def _store_task(self, task: Task) -> Task:
        self._task_seq += 1
        stored = msgspec.structs.replace(task, seq=self._task_seq)
        self._tasks[task.id] = stored
        return stored

    async def _insert_task(self, task: Task, event: AuditEvent) -> Task:
        key = (task.chat_id, task.call.call_id)
        if key in self._task_by_call:
            return self._tasks[self._task_by_call[key]]
        self._task_by_call[key] = task.id
        stored = self._commit(Change(task=task, events=(event,))).task
        assert stored is not None
        return stored

    async def _mutate_task(self, task_id: str, step: Callable[[Task], Change]) -> Change:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFound(f"no task {task_id}")
        return self._commit(step(task))

    async def _load_task(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    async def _query_tasks(self, query: TaskQuery) -> list[Task]:
        return query.select(self._tasks.values())

    async def _last_task_seq(self) -> int:
        return self._task_seq

    async def _report(self, reports: Sequence[Progress], now: float) -> list[str]:
        cancelled = []
        for report in reports:
            task = self._tasks.get(report.task_id)
            if task is None or task.state is not TaskState.RUNNING:
                continue
            self._store_task(
                msgspec.structs.replace(
                    task, progress=report.progress, message=report.message, updated_at=now, heartbeat=now
                )
            )
            if task.cancel_by:
                cancelled.append(task.id)
        return cancelled

    async def _beat(self, worker: str, now: float) -> list[str]:
        cancelled = []
        for task in list(self._tasks.values()):
            if task.worker == worker and not task.state.finished:
                self._tasks[task.id] = msgspec.structs.replace(task, heartbeat=now)
                if task.cancel_by and task.state is TaskState.RUNNING:
                    cancelled.append(task.id)
        return cancelled
