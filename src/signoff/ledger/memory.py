"""The in-memory ledger, for tests and single-process experiments.

Its transaction runs without awaiting between its read and its write, so on one event loop each is atomic
by construction, and a decision wakes its waiters synchronously through the notifier: nothing polls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditEntry, AuditKey, Head, Keyring, chain
from signoff.core.grant import Grant
from signoff.core.notice import Delivery, Notice, claimable, claimed, soonest
from signoff.core.principal import Registered
from signoff.core.task import Task, TaskState
from signoff.ledger.base import Ledger
from signoff.ledger.keys import Apply, AskedKey, Key, StartedKey, Write
from signoff.ledger.records import (
    Change,
    Clock,
    Entries,
    Progress,
    ReplyFrames,
    ReplyLog,
    Stored,
    StoredChat,
    TaskQuery,
)
from signoff.ledger.stores import ApprovalStore, Backend, ChatStore, OutboxStore, PrincipalStore, TaskStore


class MemoryLedger(Ledger):
    def __init__(self, *, clock: Clock | None = None, keyring: Keyring | None = None) -> None:
        super().__init__(MemoryBackend(), clock=clock, keyring=keyring)


class MemoryBackend(Backend):
    group_commit: ClassVar[bool] = False
    shared: ClassVar[bool] = False

    def __init__(self) -> None:
        self.approval_records: dict[str, Approval] = {}
        self.asked: dict[tuple[str, str], str] = {}
        self.grant_records: dict[str, Grant] = {}
        self.log: list[AuditEntry] = []
        self.head: Head = GENESIS_HEAD
        self.task_records: dict[str, Task] = {}
        self.started: dict[tuple[str, str], str] = {}
        self.task_seq = 0
        self.principal_records: dict[str, Registered] = {}
        self.notices: dict[str, Notice] = {}
        self._records: dict[str, dict[str, Any]] = {
            "approval": self.approval_records,
            "grant": self.grant_records,
            "task": self.task_records,
            "principal": self.principal_records,
        }
        self._calls = {"approval": self.asked, "task": self.started}
        """Records by the field of a change that holds them, and the by-call indexes: a key names both."""
        self._hold(_Approvals(self), _Tasks(self), _Chats(), _Principals(self), _Outbox(self))

    async def transact(self, keys: Sequence[Key], apply: Apply, key: AuditKey) -> list[Change]:
        """No await between the load and the store: atomic on the event loop. The entries are chained,
        which can fail, before anything is stored."""
        stored = {}
        for k in keys:
            if (record := self._load(k)) is not None:
                stored[k] = Stored(record, 0)
        writes = apply(stored)
        head, entries = self.head, []
        for write in writes:
            for event in write.change.events:
                entry = chain(event, head, key)
                entries.append(entry)
                head = (entry.seq, entry.hash)
        changes = []
        for write in writes:
            changes.append(self._store(write))
        self.log += entries
        self.head = head
        return changes

    def _store(self, write: Write) -> Change:
        change = write.change
        if (a := change.approval) is not None:
            self.approval_records[a.id] = a
            if write.new:
                self.asked.setdefault((a.chat_id, a.call.call_id), a.id)
        if (g := change.grant) is not None:
            self.grant_records[g.id] = g
        if change.task is not None:
            t = self.store_task(change.task)
            if write.new:
                self.started.setdefault((t.chat_id, t.call.call_id), t.id)
            change = dataclasses.replace(change, task=t)
        if (p := change.principal) is not None:
            self.principal_records[p.id] = p
        self.notices.update((n.id, n) for n in change.notices)
        return change

    def _load(self, key: Key) -> Approval | Grant | Task | Registered | None:
        records: dict[str, Approval | Grant | Task | Registered] = self._records[key.field]
        if isinstance(key, AskedKey | StartedKey):
            found = self._calls[key.field].get((key.chat_id, key.call_id))
            return None if found is None else records[found]
        return records.get(key.id)

    def store_task(self, task: Task) -> Task:
        self.task_seq += 1
        stored = msgspec.structs.replace(task, seq=self.task_seq)
        self.task_records[task.id] = stored
        return stored


@dataclasses.dataclass
class _Approvals(ApprovalStore):
    db: MemoryBackend

    async def load(self, approval_id: str) -> Approval | None:
        return self.db.approval_records.get(approval_id)

    async def load_many(self, approval_ids: Sequence[str]) -> list[Approval]:
        return [a for i in approval_ids if (a := self.db.approval_records.get(i)) is not None]

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        found = self.db.asked.get((chat_id, call_id))
        return None if found is None else self.db.approval_records[found]

    async def query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        found = [
            a
            for a in self.db.approval_records.values()
            if (chat_id is None or a.chat_id == chat_id)
            and (state is None or a.state is state)
            and (due_by is None or (a.deadline is not None and a.deadline <= due_by))
        ]
        return found[:limit]

    async def decided(self, approval_ids: Sequence[str]) -> list[Approval]:
        found = (self.db.approval_records.get(i) for i in approval_ids)
        return [a for a in found if a is not None and a.state is not State.PENDING]

    async def grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        return [
            g
            for g in self.db.grant_records.values()
            if (tool is None or g.tool == tool)
            and (chat_id is None or g.chat_id is None or g.chat_id == chat_id)
            and (not active or g.active)
        ]

    async def audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        return self.db.log[after_seq : after_seq + limit]

    async def last_seq(self) -> int:
        return len(self.db.log)


@dataclasses.dataclass
class _Tasks(TaskStore):
    db: MemoryBackend

    async def load(self, task_id: str) -> Task | None:
        return self.db.task_records.get(task_id)

    async def query(self, query: TaskQuery) -> list[Task]:
        return query.select(self.db.task_records.values())

    async def last_seq(self) -> int:
        return self.db.task_seq

    async def report(self, reports: Sequence[Progress], now: float) -> list[str]:
        cancelled = []
        for report in reports:
            task = self.db.task_records.get(report.task_id)
            if task is None or task.state is not TaskState.RUNNING:
                continue
            self.db.store_task(
                msgspec.structs.replace(
                    task, progress=report.progress, message=report.message, updated_at=now, heartbeat=now
                )
            )
            if task.cancel_by:
                cancelled.append(task.id)
        return cancelled

    async def beat(self, worker: str, now: float) -> list[str]:
        cancelled = []
        for task in list(self.db.task_records.values()):
            if task.worker == worker and not task.state.finished:
                self.db.task_records[task.id] = msgspec.structs.replace(task, heartbeat=now)
                if task.cancel_by and task.state is TaskState.RUNNING:
                    cancelled.append(task.id)
        return cancelled


class _Chats(ChatStore):
    def __init__(self) -> None:
        self.saved: dict[str, StoredChat] = {}
        self.replies: dict[str, ReplyLog] = {}

    async def load(self, chat_id: str, held: int | None) -> StoredChat | None:
        return self.saved.get(chat_id)  # nothing to read: the state is at hand

    async def save(self, chat: StoredChat, entries: Entries | None) -> bool:
        current = self.saved.get(chat.chat_id)
        if (0 if current is None else current.version) != chat.version - 1:
            return False
        had = () if current is None else current.entries
        kept = had if entries is None else (*had[: entries.kept], *entries.added)
        owner = chat.owner if current is None else current.owner
        self.saved[chat.chat_id] = dataclasses.replace(chat, owner=owner, entries=kept)
        return True

    async def log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        for entry in batch:
            if entry.meta is not None:
                self.replies[entry.chat_id] = ReplyLog(entry.reply, entry.meta, False, now, [])
            log = self.replies.get(entry.chat_id)
            if log is not None and log.reply == entry.reply:
                kept = [*log.frames, *entry.frames[len(log.frames) - entry.start :]]
                self.replies[entry.chat_id] = ReplyLog(log.reply, log.meta, log.done or entry.done, now, kept)

    async def reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        log = self.replies.get(chat_id)
        return None if log is None else dataclasses.replace(log, frames=log.frames[after:])

    async def forget_replies(self, before: float) -> int:
        old = [chat_id for chat_id, log in self.replies.items() if log.updated_at < before]
        for chat_id in old:
            del self.replies[chat_id]
        return len(old)


@dataclasses.dataclass
class _Principals(PrincipalStore):
    db: MemoryBackend

    async def load(self, principal_id: str) -> Registered | None:
        return self.db.principal_records.get(principal_id)

    async def by_token(self, token_hash: str) -> Registered | None:
        return next((p for p in self.db.principal_records.values() if p.token_hash == token_hash), None)

    async def all(self) -> list[Registered]:
        return list(self.db.principal_records.values())


@dataclasses.dataclass
class _Outbox(OutboxStore):
    db: MemoryBackend

    async def claim(self, channel: str, holder: str, now: float, until: float, limit: int) -> list[Notice]:
        due = sorted((n for n in self.db.notices.values() if claimable(n, channel, now)), key=soonest)
        taken = [claimed(n, holder, until) for n in due[:limit]]
        self.db.notices.update((n.id, n) for n in taken)
        return taken

    async def settle(self, notices: Sequence[tuple[Notice, str]]) -> set[str]:
        settled = set()
        for notice, holder in notices:
            if (stored := self.db.notices.get(notice.id)) is not None and stored.holder == holder:
                self.db.notices[notice.id] = notice
                settled.add(notice.id)
        return settled

    async def load(self, notice_id: str) -> Notice | None:
        return self.db.notices.get(notice_id)

    async def query(
        self, *, state: Delivery | None, approval_id: str | None, limit: int | None
    ) -> list[Notice]:
        found = [
            n
            for n in self.db.notices.values()
            if (state is None or n.state == state) and (approval_id is None or n.approval_id == approval_id)
        ]
        return found[:limit]
