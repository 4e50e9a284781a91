"""The Redis ledger's stores: reads of its hashes and indexes (see the backend's docstring for the keys),
and the writes nothing audits, each one script."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec
from redis import asyncio as aioredis

from signoff.core.approval import Approval, State
from signoff.core.audit import AuditEntry
from signoff.core.grant import Grant
from signoff.core.notice import Delivery, Notice
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.records import Change, Entries, Progress, ReplyFrames, ReplyLog, StoredChat, TaskQuery
from signoff.ledger.rows import (
    NOTICE_COLUMNS,
    TASK_COLUMNS,
    approval_record,
    grant_record,
    principal_record,
    task_from_row,
)
from signoff.ledger.stores import ApprovalStore, ChatStore, OutboxStore, PrincipalStore, TaskStore

R = TypeVar("R")


class Database(Protocol):
    """What the stores need of the backend that makes them: its client, through these (and nothing of the
    backend itself, which imports them)."""

    prefix: str

    def key(self, *parts: str) -> str: ...
    async def call(self, fn: Callable[[aioredis.Redis], Any]) -> Any: ...
    async def script(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any: ...
    async def records(
        self, kind: str, ids: Iterable[str | bytes], decode: Callable[[bytes], R]
    ) -> list[R]: ...


_entry = msgspec.json.Decoder(AuditEntry).decode
_encode = msgspec.json.Encoder().encode


@dataclass
class RedisApprovals(ApprovalStore):
    db: Database

    async def load(self, approval_id: str) -> Approval | None:
        return next(iter(await self.db.records("a", [approval_id], approval_record)), None)

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        field = _encode([chat_id, call_id])
        approval_id = await self.db.call(lambda r: r.hget(self.db.key("calls"), field))
        return None if approval_id is None else await self.load(approval_id.decode())

    async def query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        key = self.db.key
        if due_by is not None:
            index, low, high = key("due"), "-inf", str(due_by)
        elif chat_id is not None:
            index, low, high = key("chat", chat_id), "-inf", "+inf"
        elif state is not None:
            index, low, high = key("state", str(state)), "-inf", "+inf"
        else:
            index, low, high = key("order"), "-inf", "+inf"
        ids = await self.db.call(lambda r: r.zrangebyscore(index, low, high))
        found = await self.db.records("a", ids, approval_record)
        found = [
            a
            for a in found
            if (chat_id is None or a.chat_id == chat_id) and (state is None or a.state is state)
        ]
        if due_by is not None:
            found.sort(key=lambda a: a.created_at)
        return found[:limit]

    async def load_many(self, approval_ids: Sequence[str]) -> list[Approval]:
        return await self.db.records("a", approval_ids, approval_record)

    async def decided(self, approval_ids: Sequence[str]) -> list[Approval]:
        found = await self.db.records("a", approval_ids, approval_record)
        return [a for a in found if a.state is not State.PENDING]

    async def grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        index = self.db.key("grants") if tool is None else self.db.key("grants", tool)
        ids = await self.db.call(lambda r: r.zrange(index, 0, -1))
        grants = await self.db.records("g", ids, grant_record)
        return [
            g
            for g in grants
            if (chat_id is None or g.chat_id is None or g.chat_id == chat_id) and (not active or g.active)
        ]

    async def audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        start = f"({after_seq}-1" if after_seq else "-"
        found = await self.db.call(lambda r: r.xrange(self.db.key("audit"), start, "+", count=limit))
        return [_entry(fields[b"e"]) for _, fields in found]

    async def last_seq(self) -> int:
        return int(await self.db.call(lambda r: r.hget(self.db.key("head"), "seq")) or 0)


@dataclass
class RedisTasks(TaskStore):
    db: Database

    async def load(self, task_id: str) -> Task | None:
        found = await self._load([task_id])
        return found[0] if found else None

    async def _load(self, ids: Sequence[str]) -> list[Task]:
        async def fetch(redis: aioredis.Redis) -> list[Any]:
            pipe = redis.pipeline(transaction=False)
            for task_id in ids:
                pipe.hmget(self.db.key("t", task_id), *TASK_COLUMNS.split(", "))
            return list(await pipe.execute())

        found = await self.db.call(fetch) if ids else []
        return [task for row in found if (task := task_of(row)) is not None]

    async def query(self, query: TaskQuery) -> list[Task]:
        key = self.db.key
        if query.after_seq is not None:
            index, low, high = key("tchanges"), f"({query.after_seq}", "+inf"
        elif query.beat_before is not None:
            index, low, high = key("tlive"), "-inf", f"({query.beat_before!r}"
        elif query.chat_id is not None:
            index, low, high = key("tchat", query.chat_id), "-inf", "+inf"
        else:
            index, low, high = key("tall"), "-inf", "+inf"
        ids = await self.db.call(lambda r: r.zrangebyscore(index, low, high))
        return query.select(await self._load([i.decode() for i in ids]))

    async def last_seq(self) -> int:
        return int(await self.db.call(lambda r: r.get(self.db.key("tseq"))) or 0)

    async def report(self, reports: Sequence[Progress], now: float) -> list[str]:
        cancelling = []
        for start in range(0, len(reports), 1000):  # one script call holds the server for the whole batch
            args: list[Any] = [self.db.prefix, repr(now)]
            for r in reports[start : start + 1000]:
                args += [r.task_id, r.progress, r.message]
            cancelling += [i.decode() for i in await self.db.script("report_tasks", [], args)]
        return cancelling

    async def beat(self, worker: str, now: float) -> list[str]:
        return [i.decode() for i in await self.db.script("beat", [], [self.db.prefix, worker, repr(now)])]


@dataclass
class RedisChats(ChatStore):
    db: Database

    async def load(self, chat_id: str, held: int | None) -> StoredChat | None:
        found = await self.db.script("load_chat", self._chat_keys(chat_id), ["" if held is None else held])
        if found is None:
            return None
        version, state, updated_at, owner, *entries = found
        return StoredChat(chat_id, int(version), state, float(updated_at), owner.decode() or None, entries)

    async def save(self, chat: StoredChat, entries: Entries | None) -> bool:
        args = [chat.version, chat.state, repr(chat.updated_at), chat.owner or ""]
        args += [""] if entries is None else [entries.kept, *entries.added]
        return bool(await self.db.script("save_chat", self._chat_keys(chat.chat_id), args))

    def _chat_keys(self, chat_id: str) -> list[str]:
        return [self.db.key("chat-state", chat_id), self.db.key("chat-entries", chat_id)]

    async def log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        """One pipeline of scripts, each atomic: a log that begins starts over, then takes its entries."""

        async def log(redis: aioredis.Redis) -> None:
            pipe = redis.pipeline(transaction=False)
            for e in batch:
                keys = self._keys(e.chat_id)
                if e.meta is not None:
                    await self.db.script("begin_reply", keys, [e.reply, e.meta, repr(now), e.chat_id], pipe)
                args = [e.reply, e.start, int(e.done), repr(now), e.chat_id, *e.frames]
                await self.db.script("log_frames", keys, args, pipe)  # queued, not sent
            await pipe.execute()

        await self.db.call(log)

    def _keys(self, chat_id: str) -> list[str]:
        return [self.db.key("reply", chat_id), self.db.key("frames", chat_id), self.db.key("replies")]

    async def reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        async def read(redis: aioredis.Redis) -> list[Any]:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.hmget(self.db.key("reply", chat_id), "reply", "meta", "done", "updated_at")
                pipe.lrange(self.db.key("frames", chat_id), after, -1)
                return list(await pipe.execute())

        (reply, meta, done, updated_at), frames = await self.db.call(read)
        if reply is None:
            return None
        return ReplyLog(reply.decode(), bytes(meta), done == b"1", float(updated_at), list(frames))

    async def forget_replies(self, before: float) -> int:
        keys, args = [self.db.key("replies")], [self.db.prefix, repr(before)]
        return int(await self.db.script("forget_replies", keys, args))


@dataclass
class RedisPrincipals(PrincipalStore):
    db: Database

    async def load(self, principal_id: str) -> Registered | None:
        return next(iter(await self.db.records("p", [principal_id], principal_record)), None)

    async def by_token(self, token_hash: str) -> Registered | None:
        principal_id = await self.db.call(lambda r: r.hget(self.db.key("tokens"), token_hash))
        return None if principal_id is None else await self.load(principal_id.decode())

    async def all(self) -> list[Registered]:
        ids = await self.db.call(lambda r: r.zrange(self.db.key("principals"), 0, -1))
        return await self.db.records("p", ids, principal_record)


def task_of(row: Sequence[Any]) -> Task | None:
    """A task from its hash's `TASK_COLUMNS`; None if it has none."""
    record, progress, message, at, beat, seq = row
    if record is None:
        return None
    return task_from_row((record, int(progress), message.decode(), float(at), float(beat), int(seq)))


_NOTICE = NOTICE_COLUMNS.split(", ")
_NUMBERS = {"created_at": float, "attempts": int, "next_at": float, "lease_until": float}


def task_fields(task: Task, call: str | None) -> dict[str, object]:
    """A task as `COMMIT` stores it; `call` for a new one."""
    return present(
        id=task.id, call=call, chat=task.chat_id, created=repr(task.created_at),
        record=_encode(task).decode(), state=str(task.state), worker=task.worker, cancel_by=task.cancel_by,
        progress=task.progress, message=task.message, updated_at=repr(task.updated_at),
        heartbeat=repr(task.heartbeat),
    )  # fmt: skip


def numbered(change: Change, seqs: Iterator[Any]) -> Change:
    """The change with its task's change number, the next of `seqs`, if it has a task."""
    if change.task is None:
        return change
    return dataclasses.replace(change, task=msgspec.structs.replace(change.task, seq=int(next(seqs))))


def present(**fields: object) -> dict[str, object]:
    """The fields that have a value: Lua's cjson turns JSON null into a value that is true."""
    return {name: value for name, value in fields.items() if value is not None}


def notice_fields(notice: Notice) -> list[str]:
    """A notice as its hash's fields and values, flat: times as `repr` (Lua would print 14 digits), and
    no delivery time as ''."""
    fields = []
    for name in _NOTICE:
        value = getattr(notice, name)
        fields += [name, "" if value is None else repr(value) if isinstance(value, float) else str(value)]
    return fields


def notice_of(values: Sequence[bytes | None]) -> Notice | None:
    if values[0] is None:
        return None
    found: dict[str, Any] = {}
    for name, raw in zip(_NOTICE, values, strict=True):
        text = (raw or b"").decode()
        found[name] = _NUMBERS[name](text) if name in _NUMBERS else text
    found["delivered_at"] = float(found["delivered_at"]) if found["delivered_at"] else None
    return Notice(**found)


@dataclass
class RedisOutbox(OutboxStore):
    db: Database

    async def claim(self, channel: str, holder: str, now: float, until: float, limit: int) -> list[Notice]:
        args = [self.db.prefix, channel, holder, repr(now), repr(until), limit]
        ids = await self.db.script("claim", [], args)
        return [n for n in await self._load([i.decode() for i in ids]) if n is not None]

    async def settle(self, notices: Sequence[tuple[Notice, str]]) -> set[str]:
        """One pipeline of scripts, each atomic."""

        async def settle(redis: aioredis.Redis) -> list[Any]:
            pipe = redis.pipeline(transaction=False)
            for notice, holder in notices:
                due = repr(max(notice.next_at, notice.lease_until))
                args = [self.db.prefix, holder, notice.id, notice.state, due, *notice_fields(notice)]
                await self.db.script("settle", [], args, pipe)  # queued, not sent
            return list(await pipe.execute())

        answers = await self.db.call(settle)
        return {n.id for (n, _), settled in zip(notices, answers, strict=True) if settled}

    async def load(self, notice_id: str) -> Notice | None:
        return (await self._load([notice_id]))[0]

    async def query(
        self, *, state: Delivery | None, approval_id: str | None, limit: int | None
    ) -> list[Notice]:
        index = self.db.key("outbox") if approval_id is None else self.db.key("oa", approval_id)
        ids = await self.db.call(lambda r: r.zrange(index, 0, -1))
        notices = await self._load([i.decode() for i in ids])
        return [n for n in notices if n is not None and (state is None or n.state == state)][:limit]

    async def _load(self, ids: Sequence[str]) -> list[Notice | None]:
        async def fetch(redis: aioredis.Redis) -> list[Any]:
            pipe = redis.pipeline(transaction=False)
            for notice_id in ids:
                pipe.hmget(self.db.key("o", notice_id), _NOTICE)
            return list(await pipe.execute())

        return [notice_of(values) for values in await self.db.call(fetch)]
