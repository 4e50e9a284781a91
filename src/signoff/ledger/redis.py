"""The Redis ledger: approvals in hashes, changes as Lua compare-and-set, the audit log as a stream.

Writes are group-committed (`ledger/batch.py`) the same way as in PostgreSQL: load the records, apply the
core's pure steps in Python, then store the results and their chained audit entries. Redis has no
transaction that can span the Python steps, so the store is one Lua script (atomic on the server) that
checks first and writes only if nothing moved since the load:

- every record's `rev` (a task's change number) must be the one that was loaded, and no new approval's or
  task's call may have been asked meanwhile, or the script answers `stale` and the batch runs again on
  fresh records. This is where a second decision from another process loses: its rerun sees a decided
  approval.
- the audit head must be the one the entries were chained after, or the script answers with the real
  head and the entries are chained again. The steps do not run again: no record changed.

A process has one committer, which reads the head with the records, so only a write from another
process landing between that read and the script costs a retry.

Keys live under one prefix (`signoff` by default):

    {p}:a:{id}            hash   record, state, rev          one approval
    {p}:calls             hash   [chat, call] → id           one approval per chat and call id
    {p}:order             zset   id by insertion number      every approval, oldest first
    {p}:chat:{chat}       zset   id by insertion number      a chat's approvals
    {p}:state:{state}     zset   id by insertion number      approvals in one state
    {p}:due               zset   id by deadline              pending approvals that have one
    {p}:g:{id}            hash   record, rev                 one grant
    {p}:grants[:{tool}]   zset   id by insertion number      grants, all and by tool
    {p}:chat-state:{chat} hash   version, state, updated_at, owner  a chat's server-side state
    {p}:audit             stream entry JSON at id {seq}-1    the hash-chained audit log
    {p}:head              hash   seq, hash                   the audit log's newest entry
    {p}:lease:{name}      string the holder, with a TTL      the deadline sweeper's lease
    {p}:reply:{chat}      hash   reply, meta, done, updated_at  a chat's latest reply log
    {p}:frames:{chat}     list   its frames, in order
    {p}:replies           zset   chat by updated_at          reply logs, to forget old ones
    {p}:t:{id}            hash   record, progress, …, seq    one task (see `ledger/rows.py` on its fields)
    {p}:tcalls            hash   [chat, call] → id           one task per chat and call id
    {p}:tseq              string the newest task change number
    {p}:tchanges          zset   id by change number         every task, last changed last
    {p}:tall, :tchat:{c}  zset   id by creation time         every task, and a chat's
    {p}:tlive             zset   id by heartbeat             unfinished tasks, for the sweeper
    {p}:tworker:{w}       set    ids                         a worker's unfinished tasks
    {p}:p:{id}            hash   record, rev                 one registered principal
    {p}:tokens            hash   token hash → id             principals by their token's hash
    {p}:principals        zset   id by insertion number      every principal, oldest first

A decision is published on `{p}:decided` from inside the script, so only a committed one is heard; the
message is the decided record, so a waiter in another process resumes without reading it back. A
process's watcher subscribes while anyone there waits, and also reads the state of every approval it
waits on each `poll_interval`: pub/sub drops messages while a connection is down, so that sweep is what
makes a missed message only a delay. A single Redis server (with replicas if you like) is supported, not
Redis Cluster: the scripts touch keys they compute themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditEntry, Head, Keyring, chain
from signoff.core.errors import LedgerUnavailable
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.base import Change, Clock, Progress, ReplyFrames, ReplyLog, StoredChat, TaskQuery
from signoff.ledger.batch import Batch, Batched, Conflict, Key, Stored, Write
from signoff.ledger.rows import TASK_COLUMNS, task_from_row

log = logging.getLogger("signoff.ledger")

SCHEMA_VERSION = 1
_approval = msgspec.json.Decoder(Approval).decode
_grant = msgspec.json.Decoder(Grant).decode
_registered = msgspec.json.Decoder(Registered).decode
_DECODERS: dict[str, Callable[[bytes], Any]] = {
    "approval": _approval,
    "grant": _grant,
    "principal": _registered,
}
_entry = msgspec.json.Decoder(AuditEntry).decode
_encode = msgspec.json.Encoder().encode

_COMMIT = """
local p, c = ARGV[1], cjson.decode(ARGV[2])
for _, r in ipairs(c.revs) do
  local rev = tonumber(redis.call('HGET', p .. ':' .. r[1] .. ':' .. r[2], 'rev')) or 0
  if rev ~= r[3] then return {'stale'} end
end
for _, call in ipairs(c.calls) do
  if redis.call('HEXISTS', p .. ':calls', call) == 1 then return {'stale'} end
end
for _, t in ipairs(c.tseqs) do
  if redis.call('HGET', p .. ':t:' .. t[1], 'seq') ~= t[2] then return {'stale'} end
end
for _, call in ipairs(c.tcalls) do
  if redis.call('HEXISTS', p .. ':tcalls', call) == 1 then return {'stale'} end
end
local head = redis.call('HMGET', p .. ':head', 'seq', 'hash')
local seq = tonumber(head[1]) or 0
if seq ~= c.head then return {'head', seq, head[2]} end
for _, a in ipairs(c.approvals) do
  local key = p .. ':a:' .. a.id
  if a.call then
    local n = redis.call('INCR', p .. ':n')
    redis.call('HSET', key, 'record', a.record, 'state', a.state, 'rev', 1)
    redis.call('HSET', p .. ':calls', a.call, a.id)
    redis.call('ZADD', p .. ':order', n, a.id)
    redis.call('ZADD', p .. ':chat:' .. a.chat, n, a.id)
    redis.call('ZADD', p .. ':state:' .. a.state, n, a.id)
    if a.deadline then redis.call('ZADD', p .. ':due', a.deadline, a.id) end
  else
    local was = redis.call('HGET', key, 'state')
    redis.call('HSET', key, 'record', a.record, 'state', a.state)
    redis.call('HINCRBY', key, 'rev', 1)
    if was ~= a.state then
      local n = redis.call('ZSCORE', p .. ':order', a.id)
      redis.call('ZREM', p .. ':state:' .. was, a.id)
      redis.call('ZADD', p .. ':state:' .. a.state, n, a.id)
      redis.call('ZREM', p .. ':due', a.id)
      if a.state ~= 'pending' then redis.call('PUBLISH', p .. ':decided', a.record) end
    end
  end
end
for _, g in ipairs(c.grants) do
  local key = p .. ':g:' .. g.id
  redis.call('HSET', key, 'record', g.record)
  if redis.call('HINCRBY', key, 'rev', 1) == 1 then
    local n = redis.call('INCR', p .. ':n')
    redis.call('ZADD', p .. ':grants', n, g.id)
    redis.call('ZADD', p .. ':grants:' .. g.tool, n, g.id)
  end
end
local seqs = {}
for _, t in ipairs(c.tasks) do
  local key = p .. ':t:' .. t.id
  if t.call then
    redis.call('HSET', p .. ':tcalls', t.call, t.id)
    redis.call('ZADD', p .. ':tchat:' .. t.chat, t.created, t.id)
    redis.call('ZADD', p .. ':tall', t.created, t.id)
  end
  local was = redis.call('HGET', key, 'worker')
  if was then redis.call('SREM', p .. ':tworker:' .. was, t.id) end
  local seq = redis.call('INCR', p .. ':tseq')
  redis.call('HSET', key, 'record', t.record, 'state', t.state, 'worker', t.worker,
    'cancel_by', t.cancel_by, 'progress', t.progress, 'message', t.message,
    'updated_at', t.updated_at, 'heartbeat', t.heartbeat, 'seq', seq)
  redis.call('ZADD', p .. ':tchanges', seq, t.id)
  if t.state == 'pending' or t.state == 'running' then
    redis.call('ZADD', p .. ':tlive', t.heartbeat, t.id)
    redis.call('SADD', p .. ':tworker:' .. t.worker, t.id)
  else
    redis.call('ZREM', p .. ':tlive', t.id)
  end
  table.insert(seqs, seq)
end
for _, r in ipairs(c.principals) do
  local key = p .. ':p:' .. r.id
  redis.call('HSET', key, 'record', r.record)
  if redis.call('HINCRBY', key, 'rev', 1) == 1 then
    redis.call('HSET', p .. ':tokens', r.hash, r.id)
    redis.call('ZADD', p .. ':principals', redis.call('INCR', p .. ':n'), r.id)
  end
end
for _, e in ipairs(c.entries) do redis.call('XADD', p .. ':audit', e[1] .. '-1', 'e', e[2]) end
if #c.entries > 0 then redis.call('HSET', p .. ':head', 'seq', c.entries[#c.entries][1], 'hash', c.hash) end
return {'ok', seqs}
"""
"""Store a batch of writes (see `_Transaction.store`) if nothing it was computed from moved: every record's
`rev`, every task's change number and every new approval's or task's call (`stale`), and the audit head
(`head`, with the real one). A task's times come as strings: Lua would print a number with 14 digits.
Answers with the change number each task got."""

_SAVE_CHAT = """
local version = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
if version ~= tonumber(ARGV[1]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'state', ARGV[2], 'updated_at', ARGV[3])
if version == 0 and ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'owner', ARGV[4]) end
return 1
"""

_LOG_FRAMES = """
if redis.call('HGET', KEYS[1], 'reply') ~= ARGV[1] then return 0 end
local have, start = redis.call('LLEN', KEYS[2]), tonumber(ARGV[2])
for i = 6, #ARGV do
  if start + i - 5 > have then redis.call('RPUSH', KEYS[2], ARGV[i]) end
end
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'done', 1) end
redis.call('HSET', KEYS[1], 'updated_at', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
return 1
"""
"""Append frames to the chat's reply log if it is still this reply's; a frame already there (a retry)
is not appended twice."""

_BEGIN_REPLY = """
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'reply', ARGV[1], 'meta', ARGV[2], 'done', 0, 'updated_at', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
"""

_FORGET_REPLIES = """
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
for _, chat in ipairs(old) do
  redis.call('DEL', ARGV[1] .. ':reply:' .. chat, ARGV[1] .. ':frames:' .. chat)
  redis.call('ZREM', KEYS[1], chat)
end
return #old
"""

_REPORT_TASKS = """
local p, now, cancelling = ARGV[1], ARGV[2], {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local key = p .. ':t:' .. id
  if redis.call('HGET', key, 'state') == 'running' then
    local seq = redis.call('INCR', p .. ':tseq')
    redis.call('HSET', key, 'progress', ARGV[i + 1], 'message', ARGV[i + 2], 'updated_at', now,
      'heartbeat', now, 'seq', seq)
    redis.call('ZADD', p .. ':tchanges', seq, id)
    redis.call('ZADD', p .. ':tlive', now, id)
    if redis.call('HGET', key, 'cancel_by') ~= '' then table.insert(cancelling, id) end
  end
end
return cancelling
"""

_BEAT = """
local p, now, cancelling = ARGV[1], ARGV[3], {}
for _, id in ipairs(redis.call('SMEMBERS', p .. ':tworker:' .. ARGV[2])) do
  local key = p .. ':t:' .. id
  redis.call('HSET', key, 'heartbeat', now)
  redis.call('ZADD', p .. ':tlive', now, id)
  local state, by = unpack(redis.call('HMGET', key, 'state', 'cancel_by'))
  if state == 'running' and by ~= '' then table.insert(cancelling, id) end
end
return cancelling
"""

_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""


class RedisLedger(Batched):
    """`url` is a redis-py URL (`redis://[:password@]host:port/db`, `rediss://` for TLS); every key
    starts with `prefix`, so several ledgers can share one database.

    `connect_timeout` bounds reaching the server; `pool_timeout` bounds waiting here for one of the
    `pool_size` connections. The two are apart because a busy worker queues for its pool long before
    the server is slow, and a call refused after a short queue fails a healthy ledger."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "signoff",
        pool_size: int = 20,
        connect_timeout: float = 5.0,
        pool_timeout: float = 30.0,
        poll_interval: float = 1.0,
        clock: Clock | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        super().__init__(**({"clock": clock} if clock else {}), keyring=keyring)
        self.url = url
        self.prefix = prefix
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.pool_timeout = pool_timeout
        self.poll_interval = poll_interval
        self._redis: aioredis.Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._head: Head = GENESIS_HEAD
        self._watcher: asyncio.Task[None] | None = None

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    async def start(self) -> None:
        pool = aioredis.BlockingConnectionPool.from_url(  # callers beyond the pool wait their turn
            self.url,
            max_connections=self.pool_size,
            timeout=self.pool_timeout,
            socket_connect_timeout=self.connect_timeout,
            socket_timeout=30.0,
            health_check_interval=30,
            # A pooled connection is dead after the server restarts: try a fresh one before giving up. A
            # write whose reply was lost and is sent again finds its own change and loses its CAS, so a
            # retry can report "already decided" for a decision that landed, never apply one twice.
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=6),
        )
        client = aioredis.Redis.from_pool(pool)
        try:
            await client.ping()
            await self._migrate(client)
        except RedisError as exc:
            await client.aclose()
            raise LedgerUnavailable(f"cannot reach Redis ledger {_safe(self.url)}: {exc}") from exc
        except BaseException:
            await client.aclose()
            raise
        self._redis = client
        self._scripts = {
            name: client.register_script(source)
            for name, source in (
                ("commit", _COMMIT),
                ("save_chat", _SAVE_CHAT),
                ("lease", _LEASE),
                ("begin_reply", _BEGIN_REPLY),
                ("log_frames", _LOG_FRAMES),
                ("forget_replies", _FORGET_REPLIES),
                ("report_tasks", _REPORT_TASKS),
                ("beat", _BEAT),
            )
        }

    async def _migrate(self, client: aioredis.Redis) -> int:
        """Version 1 needs no data moved, only the version recorded; a newer one is refused."""
        before = int(await client.get(self._key("schema")) or 0)
        if before > SCHEMA_VERSION:
            raise LedgerUnavailable(
                f"Redis ledger {_safe(self.url)} (prefix {self.prefix!r}) has ledger schema {before},"
                f" newer than this signoff's {SCHEMA_VERSION}"
            )
        await client.set(self._key("schema"), SCHEMA_VERSION)
        return before

    async def upgrade(self) -> tuple[int, int]:
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=self.connect_timeout)
        try:
            return await self._migrate(client), SCHEMA_VERSION
        except RedisError as exc:
            raise LedgerUnavailable(f"cannot reach Redis ledger {_safe(self.url)}: {exc}") from exc
        finally:
            await client.aclose()

    async def close(self) -> None:
        await self._drain()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    @property
    def redis(self) -> aioredis.Redis:
        if self._redis is None:
            raise RuntimeError(
                "the Redis ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        return self._redis

    async def _call(self, fn: Callable[[aioredis.Redis], Any]) -> Any:
        """Run one command or pipeline; a connection failure is `LedgerUnavailable`, naming the server."""
        try:
            return await fn(self.redis)
        except RedisError as exc:
            raise LedgerUnavailable(f"the Redis ledger {_safe(self.url)} failed: {exc}") from exc

    async def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._call(lambda r: self._scripts[name](keys=keys, args=args, client=r))

    async def _records(self, keys: Sequence[str]) -> list[bytes]:
        """The `record` field of each hash, in order, skipping any that vanished."""

        async def fetch(redis: aioredis.Redis) -> list[bytes | None]:
            pipe = redis.pipeline(transaction=False)
            for key in keys:
                pipe.hget(key, "record")
            return list(await pipe.execute())

        return [record for record in await self._call(fetch) if record is not None] if keys else []

    @contextlib.asynccontextmanager
    async def _batch(self) -> AsyncIterator[Batch]:
        yield _Transaction(self)

    # -- primitives -----------------------------------------------------------------------------------------

    async def _load(self, approval_id: str) -> Approval | None:
        records = await self._records([self._key("a", approval_id)])
        return _approval(records[0]) if records else None

    async def _find(self, chat_id: str, call_id: str) -> Approval | None:
        field = _encode([chat_id, call_id])
        approval_id = await self._call(lambda r: r.hget(self._key("calls"), field))
        return None if approval_id is None else await self._load(approval_id.decode())

    async def _query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        if due_by is not None:
            index, low, high = self._key("due"), "-inf", str(due_by)
        elif chat_id is not None:
            index, low, high = self._key("chat", chat_id), "-inf", "+inf"
        elif state is not None:
            index, low, high = self._key("state", str(state)), "-inf", "+inf"
        else:
            index, low, high = self._key("order"), "-inf", "+inf"
        ids = await self._call(lambda r: r.zrangebyscore(index, low, high))
        found = [_approval(r) for r in await self._records([self._key("a", i.decode()) for i in ids])]
        found = [
            a
            for a in found
            if (chat_id is None or a.chat_id == chat_id) and (state is None or a.state is state)
        ]
        if due_by is not None:
            found.sort(key=lambda a: a.created_at)
        return found[:limit]

    async def _grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        index = self._key("grants") if tool is None else self._key("grants", tool)
        ids = await self._call(lambda r: r.zrange(index, 0, -1))
        grants = [_grant(r) for r in await self._records([self._key("g", i.decode()) for i in ids])]
        return [
            g
            for g in grants
            if (chat_id is None or g.chat_id is None or g.chat_id == chat_id) and (not active or g.active)
        ]

    async def _load_principal(self, principal_id: str) -> Registered | None:
        records = await self._records([self._key("p", principal_id)])
        return _registered(records[0]) if records else None

    async def _principal_by_token(self, token_hash: str) -> Registered | None:
        principal_id = await self._call(lambda r: r.hget(self._key("tokens"), token_hash))
        return None if principal_id is None else await self._load_principal(principal_id.decode())

    async def _principals(self) -> list[Registered]:
        ids = await self._call(lambda r: r.zrange(self._key("principals"), 0, -1))
        return [_registered(r) for r in await self._records([self._key("p", i.decode()) for i in ids])]

    async def _audit(self, after_seq: int, limit: int) -> list[AuditEntry]:
        start = f"({after_seq}-1" if after_seq else "-"
        rows = await self._call(lambda r: r.xrange(self._key("audit"), start, "+", count=limit))
        return [_entry(fields[b"e"]) for _, fields in rows]

    async def _last_seq(self) -> int:
        return int(await self._call(lambda r: r.hget(self._key("head"), "seq")) or 0)

    async def _load_chat(self, chat_id: str) -> StoredChat | None:
        key = self._key("chat-state", chat_id)
        fields = ("version", "state", "updated_at", "owner")
        version, state, updated_at, owner = await self._call(lambda r: r.hmget(key, *fields))
        if version is None:
            return None
        return StoredChat(chat_id, int(version), bytes(state), float(updated_at), owner and owner.decode())

    async def _save_chat(self, chat: StoredChat) -> bool:
        keys = [self._key("chat-state", chat.chat_id)]
        args = [chat.version, chat.state, repr(chat.updated_at), chat.owner or ""]
        return bool(await self._script("save_chat", keys, args))

    async def _log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None:
        """One pipeline of scripts, each atomic: a log that begins starts over, then takes its frames."""

        async def log(redis: aioredis.Redis) -> None:
            pipe = redis.pipeline(transaction=False)
            for e in batch:
                keys = self._reply_keys(e.chat_id)
                args: list[Any]
                if e.meta is not None:
                    args = [e.reply, e.meta, repr(now), e.chat_id]
                    await self._scripts["begin_reply"](keys=keys, args=args, client=pipe)
                args = [e.reply, e.start, int(e.done), repr(now), e.chat_id, *e.frames]
                await self._scripts["log_frames"](keys=keys, args=args, client=pipe)  # queued, not sent
            await pipe.execute()

        await self._call(log)

    def _reply_keys(self, chat_id: str) -> list[str]:
        return [self._key("reply", chat_id), self._key("frames", chat_id), self._key("replies")]

    async def _reply_log(self, chat_id: str, after: int) -> ReplyLog | None:
        async def read(redis: aioredis.Redis) -> list[Any]:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.hmget(self._key("reply", chat_id), "reply", "meta", "done", "updated_at")
                pipe.lrange(self._key("frames", chat_id), after, -1)
                return list(await pipe.execute())

        (reply, meta, done, updated_at), frames = await self._call(read)
        if reply is None:
            return None
        return ReplyLog(reply.decode(), bytes(meta), done == b"1", float(updated_at), list(frames))

    async def _forget_replies(self, before: float) -> int:
        keys, args = [self._key("replies")], [self.prefix, repr(before)]
        return int(await self._script("forget_replies", keys, args))

    async def _lease(self, name: str, holder: str, ttl: float) -> bool:
        keys, args = [self._key("lease", name)], [holder, max(1, int(ttl * 1000))]
        return bool(await self._script("lease", keys, args))

    # -- tasks --------------------------------------------------------------------------------------------

    async def _load_task(self, task_id: str) -> Task | None:
        found = await self._load_tasks([task_id])
        return found[0] if found else None

    async def _load_tasks(self, ids: Sequence[str]) -> list[Task]:
        async def fetch(redis: aioredis.Redis) -> list[Any]:
            pipe = redis.pipeline(transaction=False)
            for task_id in ids:
                pipe.hmget(self._key("t", task_id), *TASK_COLUMNS.split(", "))
            return list(await pipe.execute())

        rows = await self._call(fetch) if ids else []
        return [task for row in rows if (task := _task(row)) is not None]

    async def _query_tasks(self, query: TaskQuery) -> list[Task]:
        if query.after_seq is not None:
            index, low, high = self._key("tchanges"), f"({query.after_seq}", "+inf"
        elif query.beat_before is not None:
            index, low, high = self._key("tlive"), "-inf", f"({query.beat_before!r}"
        elif query.chat_id is not None:
            index, low, high = self._key("tchat", query.chat_id), "-inf", "+inf"
        else:
            index, low, high = self._key("tall"), "-inf", "+inf"
        ids = await self._call(lambda r: r.zrangebyscore(index, low, high))
        return query.select(await self._load_tasks([i.decode() for i in ids]))

    async def _last_task_seq(self) -> int:
        return int(await self._call(lambda r: r.get(self._key("tseq"))) or 0)

    async def _report(self, reports: Sequence[Progress], now: float) -> list[str]:
        cancelling = []
        for start in range(0, len(reports), 1000):  # one script call holds the server for the whole batch
            args: list[Any] = [self.prefix, repr(now)]
            for r in reports[start : start + 1000]:
                args += [r.task_id, r.progress, r.message]
            cancelling += [i.decode() for i in await self._script("report_tasks", [], args)]
        return cancelling

    async def _beat(self, worker: str, now: float) -> list[str]:
        return [i.decode() for i in await self._script("beat", [], [self.prefix, worker, repr(now)])]

    # -- decisions made by other processes ----------------------------------------------------------------

    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_others())

    async def _watch_others(self) -> None:
        """Subscribe while anyone here waits, and sweep every `poll_interval` (see the module docstring)."""
        channel = self._key("decided")
        while self.notifier.watched():
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(channel)
                    swept = 0.0
                    while ids := self.notifier.watched():
                        if time.monotonic() - swept >= self.poll_interval:
                            await self._wake(ids)
                            swept = time.monotonic()
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=self.poll_interval
                        )
                        if message is not None:  # the decided record itself: no read needed
                            self.notifier.notify(_approval(message["data"]))
            except (RedisError, LedgerUnavailable, OSError) as exc:  # waiters stay parked meanwhile
                log.warning("the Redis ledger's watcher failed (%s); retrying", exc)
                await asyncio.sleep(self.poll_interval)

    async def _wake(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for record in await self._records([self._key("a", i) for i in chunk]):
                self.notifier.notify(_approval(record))


class _Transaction(Batch):
    """Loads in one pipelined round trip; stores with one `_COMMIT`, which checks before it writes."""

    def __init__(self, ledger: RedisLedger) -> None:
        self.ledger = ledger

    async def load(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        """The records, and the audit head, in one round trip: reading the head here rather than trusting
        the one this process last wrote saves a second script call whenever another process wrote since."""
        ledger = self.ledger
        records = [key for key in keys if key[0] in _DECODERS]
        tasks = [key for key in keys if key[0] == "task"]
        calls = [key for key in keys if key[0] in ("call", "tcall")]

        async def fetch(redis: aioredis.Redis) -> list[Any]:
            pipe = redis.pipeline(transaction=False)
            pipe.hmget(ledger._key("head"), "seq", "hash")
            for kind, name in records:
                pipe.hmget(ledger._key(kind[0], name), "record", "rev")
            for _, task_id in tasks:
                pipe.hmget(ledger._key("t", task_id), *TASK_COLUMNS.split(", "))
            for kind, chat, call in calls:
                pipe.hget(ledger._key(kind + "s"), _encode([chat, call]))
            return list(await pipe.execute())

        (seq, head), *replies = await ledger._call(fetch)
        ledger._head = (int(seq), head.decode()) if seq is not None else GENESIS_HEAD
        stored: dict[Key, Stored] = {}
        for key, (record, rev) in zip(records, replies, strict=False):
            if record is not None:
                stored[key] = Stored(_DECODERS[key[0]](record), int(rev))
        for key, row in zip(tasks, replies[len(records) :], strict=False):
            if (task := _task(row)) is not None:
                stored[key] = Stored(task, task.seq)
        asked = [
            (key, ("approval" if key[0] == "call" else "task", i.decode()))
            for key, i in zip(calls, replies[len(records) + len(tasks) :], strict=True)
            if i
        ]
        if asked:
            found = await self.load([record for _, record in asked])
            for key, record in asked:
                if record in found:
                    stored[key] = found[record]
        return stored

    async def store(self, batch: Sequence[Write]) -> list[Change]:
        ledger = self.ledger
        revs: dict[Key, list[object]] = {}
        calls, approvals, grants, principals, created = [], [], [], [], set[str]()
        tasks, tcalls, tseqs = [], [], dict[str, str]()
        for write in batch:
            change = write.change
            if (t := change.task) is not None:
                call = _encode([t.chat_id, t.call.call_id]).decode() if write.new else None
                if call is not None:
                    tcalls.append(call)
                    created.add(t.id)
                elif t.id not in created and write.rev is not None:
                    tseqs.setdefault(t.id, str(write.rev))
                tasks.append(_task_fields(t, call))
            elif (r := change.principal) is not None:  # a new one must still be new: its rev is 0
                revs.setdefault(("principal", r.id), ["p", r.id, write.rev or 0])
                principals.append({"id": r.id, "record": _encode(r).decode(), "hash": r.token_hash})
            elif write.new and (a := change.approval) is not None:
                calls.append(_encode([a.chat_id, a.call.call_id]).decode())
                created.add(a.id)
            elif write.key is not None and write.key[1] not in created and write.rev is not None:
                revs.setdefault(write.key, [write.key[0][0], write.key[1], write.rev])
            if (a := change.approval) is not None:
                approval = _present(
                    id=a.id, record=_encode(a).decode(), state=str(a.state),
                    call=calls[-1] if write.new else None, chat=a.chat_id,
                    deadline=a.deadline if write.new and a.state is State.PENDING else None,
                )  # fmt: skip
                approvals.append(approval)
            if (g := change.grant) is not None:
                grants.append({"id": g.id, "record": _encode(g).decode(), "tool": g.tool})
        events = [event for write in batch for event in write.change.events]
        payload = {
            "revs": list(revs.values()), "calls": calls, "approvals": approvals, "grants": grants,
            "tasks": tasks, "tcalls": tcalls, "tseqs": [list(pair) for pair in tseqs.items()],
            "principals": principals,
        }  # fmt: skip
        while True:
            entries, head = [], ledger._head
            for event in events:
                entry = chain(event, head, ledger.keyring.current)
                entries.append([entry.seq, _encode(entry).decode()])
                head = entry.head
            payload.update(head=ledger._head[0], entries=entries, hash=head[1])
            reply = await ledger._call(
                lambda r: ledger._scripts["commit"](args=[ledger.prefix, _encode(payload)], client=r)
            )
            outcome = reply[0].decode()
            if outcome == "stale":
                raise Conflict
            if outcome == "head":  # another process wrote since: chain after its entries instead
                ledger._head = (int(reply[1]), reply[2].decode() if reply[2] else GENESIS_HEAD[1])
                continue
            ledger._head = head
            seqs = iter(reply[1])
            return [_numbered(write.change, seqs) for write in batch]


def _task(row: Sequence[Any]) -> Task | None:
    """A task from its hash's `TASK_COLUMNS`; None if it has none."""
    record, progress, message, at, beat, seq = row
    if record is None:
        return None
    return task_from_row((record, int(progress), message.decode(), float(at), float(beat), int(seq)))


def _task_fields(task: Task, call: str | None) -> dict[str, object]:
    """A task as `_COMMIT` stores it; `call` for a new one."""
    return _present(
        id=task.id, call=call, chat=task.chat_id, created=repr(task.created_at),
        record=_encode(task).decode(), state=str(task.state), worker=task.worker, cancel_by=task.cancel_by,
        progress=task.progress, message=task.message, updated_at=repr(task.updated_at),
        heartbeat=repr(task.heartbeat),
    )  # fmt: skip


def _numbered(change: Change, seqs: Iterator[Any]) -> Change:
    """The change with its task's change number, the next of `seqs`, if it has a task."""
    if change.task is None:
        return change
    return dataclasses.replace(change, task=msgspec.structs.replace(change.task, seq=int(next(seqs))))


def _present(**fields: object) -> dict[str, object]:
    """The fields that have a value: Lua's cjson turns JSON null into a value that is true."""
    return {name: value for name, value in fields.items() if value is not None}


def _safe(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
