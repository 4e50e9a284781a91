"""The Redis ledger: approvals in hashes, changes as Lua compare-and-set, the audit log as a stream.

Writes are group-committed (`ledger/committer.py`) the same way as in PostgreSQL: load the records, apply the
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
    {p}:chat-entries:{chat} list its entries, in order
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
    {p}:schema, :epoch    string the schema's version, the ledger's epoch marker (see `failures`)

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
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

import msgspec
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import RedisError

from signoff.core.approval import Approval, State
from signoff.core.audit import GENESIS_HEAD, AuditKey, Head, chain
from signoff.core.errors import LedgerUnavailable, LedgerUnwritable, LedgerWiped
from signoff.ledger.keys import (
    Apply,
    ApprovalKey,
    AskedKey,
    GrantKey,
    Key,
    PrincipalKey,
    StartedKey,
    TaskKey,
    Write,
)
from signoff.ledger.records import Change, Stored
from signoff.ledger.redis import scripts
from signoff.ledger.redis.failures import lost, persistence, safe, unwritable
from signoff.ledger.redis.stores import (
    RedisApprovals,
    RedisChats,
    RedisOutbox,
    RedisPrincipals,
    RedisTasks,
    notice_fields,
    numbered,
    present,
    task_fields,
    task_of,
)
from signoff.ledger.rows import TASK_COLUMNS, approval_record, grant_record, principal_record
from signoff.ledger.stores import Backend, Heard, Pool

encode = msgspec.json.Encoder().encode
R = TypeVar("R")
_HASHES: dict[type[Key], tuple[str, Callable[[bytes], Any]]] = {
    ApprovalKey: ("a", approval_record),
    GrantKey: ("g", grant_record),
    PrincipalKey: ("p", principal_record),
}
"""The hash each keyed record lives in, by the prefix of its key, and how to read its `record` field."""


class _Stale(Exception):
    """A record moved between the load and the script: run the batch again on fresh records."""


class RedisBackend(Backend):
    def __init__(self, url: str, *, prefix: str, pool: Pool) -> None:
        self.url = url
        self.prefix = prefix
        self.pooling = pool
        self.poll_interval = pool.poll_interval
        self._hold(
            RedisApprovals(self), RedisTasks(self), RedisChats(self), RedisPrincipals(self), RedisOutbox(self)
        )
        self._redis: aioredis.Redis | None = None
        self._turns = asyncio.Semaphore(pool.size)
        """One per pooled connection a call may hold; the watcher's subscription has one more of its own."""
        self._pinger: aioredis.Redis | None = None
        """The readiness probe's own client (see `Backend.ping`), which reconnects by itself."""
        self._scripts: dict[str, Any] = {}
        self._head: Head = GENESIS_HEAD
        self._epoch = b""
        """The epoch marker the ledger held when this process started."""
        self._wiped: str | None = None
        """Set once the marker is found gone or another's: then every call fails with it."""

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    async def start(self) -> None:
        pool = aioredis.BlockingConnectionPool.from_url(  # callers beyond the pool wait their turn
            self.url,
            max_connections=self.pooling.size + 1,
            timeout=self.pooling.pool_timeout,
            socket_connect_timeout=self.pooling.connect_timeout,
            socket_timeout=self.pooling.socket_timeout,
            health_check_interval=30,
            # A pooled connection is dead after the server restarts: try a fresh one before giving up. A
            # write whose reply was lost and is sent again finds its own change and loses its CAS, so a
            # retry can report "already decided" for a decision that landed, never apply one twice.
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=6),
        )
        client = aioredis.Redis.from_pool(pool)
        try:
            await scripts.migrate(client, self.prefix, safe(self.url))
            self._epoch = cast(bytes | None, await client.get(self.key("epoch"))) or b""
            if not self._epoch:  # emptied between its migration and now
                raise LedgerWiped(lost(self.url, self.prefix, None))
        except RedisError as exc:
            await client.aclose()
            raise LedgerUnavailable(f"cannot reach Redis ledger {safe(self.url)}: {exc}") from exc
        except BaseException:
            await client.aclose()
            raise
        self._redis = client
        self._scripts = {
            name.lower(): client.register_script(getattr(scripts, name))
            for name in ("COMMIT", "LOAD_CHAT", "SAVE_CHAT", "LEASE", "BEGIN_REPLY", "LOG_FRAMES",
                         "FORGET_REPLIES", "REPORT_TASKS", "BEAT", "CLAIM", "SETTLE")
        }  # fmt: skip

    async def upgrade(self) -> tuple[int, int]:
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=self.pooling.connect_timeout)
        try:
            return await scripts.migrate(client, self.prefix, safe(self.url)), scripts.SCHEMA_VERSION
        except RedisError as exc:
            raise LedgerUnavailable(f"cannot reach Redis ledger {safe(self.url)}: {exc}") from exc
        finally:
            await client.aclose()

    async def close(self) -> None:
        if self._pinger is not None:
            await self._pinger.aclose()
            self._pinger = None
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    async def volatile(self) -> str | None:
        return await persistence(self.url, self.pooling.connect_timeout)

    async def ping(self) -> None:
        """Read the epoch marker, which tells that the server answers and still holds this ledger."""
        if self._wiped is not None:
            raise LedgerWiped(self._wiped)
        if self._pinger is None:  # one try: a probe that fails is asked again half a second later
            within, once = self.pooling.connect_timeout, Retry(NoBackoff(), 0)
            self._pinger = aioredis.Redis.from_url(self.url, socket_connect_timeout=within, retry=once)
        try:
            self._held(await self._pinger.get(self.key("epoch")))
        except RedisError as exc:
            raise LedgerUnavailable(f"the Redis ledger {safe(self.url)} failed: {exc}") from exc

    def _held(self, found: object) -> None:
        """Check the epoch marker `found`: `LedgerWiped` from now on if it is not this ledger's."""
        if found != self._epoch:
            self._wiped = lost(self.url, self.prefix, found)
            raise LedgerWiped(self._wiped)

    @property
    def redis(self) -> aioredis.Redis:
        if self._redis is None:
            raise RuntimeError(
                "the Redis ledger is not started: use `async with ledger:` or `await ledger.start()`"
            )
        return self._redis

    async def call(self, fn: Callable[[aioredis.Redis], Any]) -> Any:
        """Run one command or pipeline, retries included, within `socket_timeout`: a failure is
        `LedgerUnavailable`, naming the server, a write refused (see `failures`) `LedgerUnwritable`, and
        any call once the ledger is found wiped `LedgerWiped`."""
        if self._wiped is not None:
            raise LedgerWiped(self._wiped)
        async with self.turn():
            try:
                async with asyncio.timeout(within := self.pooling.socket_timeout):
                    return await fn(self.redis)
            except TimeoutError:
                raise LedgerUnavailable(f"the Redis ledger {safe(self.url)} took over {within:g} s") from None
            except RedisError as exc:
                if (why := unwritable(exc)) is not None:
                    raise LedgerUnwritable(why) from exc
                raise LedgerUnavailable(f"the Redis ledger {safe(self.url)} failed: {exc}") from exc

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """One of the pool's connections for the caller, waited for within `pool_timeout`, before `call`
        times the server: so a queue on a busy worker is never taken for a slow ledger."""
        try:
            async with asyncio.timeout(waited := self.pooling.pool_timeout):
                await self._turns.acquire()
        except TimeoutError:
            why = f"no connection came free within {waited:g} s"
            raise LedgerUnavailable(f"the Redis ledger {safe(self.url)} failed: {why}") from None
        try:
            yield
        finally:
            self._turns.release()

    async def script(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run one of the ledger's scripts; with `client`, queue it on that pipeline instead."""
        if client is not None:
            return await self._scripts[name](keys=keys, args=args, client=client)
        return await self.call(lambda r: self._scripts[name](keys=keys, args=args, client=r))

    async def records(self, kind: str, ids: Iterable[str | bytes], decode: Callable[[bytes], R]) -> list[R]:
        """The `record` field of the `kind` hash of each id, decoded, in order, skipping any that vanished."""
        keys = [self.key(kind, i if isinstance(i, str) else i.decode()) for i in ids]

        async def fetch(redis: aioredis.Redis) -> list[bytes | None]:
            pipe = redis.pipeline(transaction=False)
            for key in keys:
                pipe.hget(key, "record")
            return list(await pipe.execute())

        return [decode(record) for record in await self.call(fetch) if record is not None] if keys else []

    async def lease(self, name: str, holder: str, now: float, ttl: float) -> bool:
        keys, args = [self.key("lease", name)], [holder, max(1, int(ttl * 1000))]
        return bool(await self.script("lease", keys, args))

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[Heard]:
        """A subscription to `{p}:decided`, whose messages are the decided records."""
        try:
            async with self.redis.pubsub() as pubsub:
                await pubsub.subscribe(self.key("decided"))

                async def heard(seconds: float) -> list[Approval | str]:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=seconds)
                    return [] if message is None else [approval_record(message["data"])]

                yield heard
        except (RedisError, OSError) as exc:
            raise LedgerUnavailable(f"the Redis ledger's watcher failed: {exc}") from exc

    # -- the one transaction: load, run the steps, compare-and-set ------------------------------------------

    async def transact(self, keys: Sequence[Key], apply: Apply, key: AuditKey) -> list[Change]:
        while True:
            writes = apply(await self._load(keys))
            if not writes:
                return []
            try:
                return await self._store(writes, key)
            except _Stale:
                continue

    async def _load(self, keys: Sequence[Key]) -> dict[Key, Stored]:
        """The records, and the audit head, in one round trip: reading the head here rather than trusting
        the one this process last wrote saves a second script call whenever another process wrote since."""
        hashed = [key for key in keys if isinstance(key, ApprovalKey | GrantKey | PrincipalKey)]
        tasks = [key for key in keys if isinstance(key, TaskKey)]
        calls = [key for key in keys if isinstance(key, AskedKey | StartedKey)]

        async def fetch(redis: aioredis.Redis) -> list[Any]:
            pipe = redis.pipeline(transaction=False)
            pipe.hmget(self.key("head"), "seq", "hash")
            for key in hashed:
                pipe.hmget(self.key(_HASHES[type(key)][0], key.id), "record", "rev")
            for task in tasks:
                pipe.hmget(self.key("t", task.id), *TASK_COLUMNS.split(", "))
            for call in calls:
                index = "calls" if isinstance(call, AskedKey) else "tcalls"
                pipe.hget(self.key(index), encode([call.chat_id, call.call_id]))
            return list(await pipe.execute())

        (seq, head), *replies = await self.call(fetch)
        self._head = (int(seq), head.decode()) if seq is not None else GENESIS_HEAD
        stored: dict[Key, Stored] = {}
        for key, (record, rev) in zip(hashed, replies, strict=False):
            if record is not None:
                stored[key] = Stored(_HASHES[type(key)][1](record), int(rev))
        for task_key, row in zip(tasks, replies[len(hashed) :], strict=False):
            if (task := task_of(row)) is not None:
                stored[task_key] = Stored(task, task.seq)
        asked: list[tuple[Key, Key]] = [
            (call, ApprovalKey(i.decode()) if isinstance(call, AskedKey) else TaskKey(i.decode()))
            for call, i in zip(calls, replies[len(hashed) + len(tasks) :], strict=True)
            if i
        ]
        if asked:
            found = await self._load([record for _, record in asked])
            for call, record in asked:
                if record in found:
                    stored[call] = found[record]
        return stored

    async def _store(self, batch: Sequence[Write], key: AuditKey) -> list[Change]:
        """One `COMMIT` script, which checks before it writes (see the module docstring)."""
        revs: dict[Key, list[object]] = {}
        calls, approvals, grants, principals, created = [], [], [], [], set[str]()
        tasks, tcalls, tseqs = [], [], dict[str, str]()
        for write in batch:
            change = write.change
            if (t := change.task) is not None:
                call = encode([t.chat_id, t.call.call_id]).decode() if write.new else None
                if call is not None:
                    tcalls.append(call)
                    created.add(t.id)
                elif t.id not in created and write.rev is not None:
                    tseqs.setdefault(t.id, str(write.rev))
                tasks.append(task_fields(t, call))
            elif (r := change.principal) is not None:  # a new one must still be new: its rev is 0
                revs.setdefault(PrincipalKey(r.id), ["p", r.id, write.rev or 0])
                principals.append({"id": r.id, "record": encode(r).decode(), "hash": r.token_hash})
            elif write.new and (a := change.approval) is not None:
                calls.append(encode([a.chat_id, a.call.call_id]).decode())
                created.add(a.id)
            elif isinstance(write.key, ApprovalKey | GrantKey) and write.key.id not in created:
                assert write.rev is not None
                revs.setdefault(write.key, [_HASHES[type(write.key)][0], write.key.id, write.rev])
            if (a := change.approval) is not None:
                approval = present(
                    id=a.id, record=encode(a).decode(), state=str(a.state),
                    call=calls[-1] if write.new else None, chat=a.chat_id,
                    deadline=a.deadline if write.new and a.state is State.PENDING else None,
                )  # fmt: skip
                approvals.append(approval)
            if (g := change.grant) is not None:
                grants.append({"id": g.id, "record": encode(g).decode(), "tool": g.tool})
        events = [event for write in batch for event in write.change.events]
        notices = [
            {"id": n.id, "approval": n.approval_id, "channel": n.channel, "due": repr(n.next_at),
             "fields": notice_fields(n)}
            for write in batch for n in write.change.notices
        ]  # fmt: skip
        payload = {
            "revs": list(revs.values()), "calls": calls, "approvals": approvals, "grants": grants,
            "tasks": tasks, "tcalls": tcalls, "tseqs": [list(pair) for pair in tseqs.items()],
            "principals": principals, "notices": notices,
        }  # fmt: skip
        while True:
            entries, head = [], self._head
            for event in events:
                entry = chain(event, head, key)
                entries.append([entry.seq, encode(entry).decode()])
                head = entry.head
            payload.update(head=self._head[0], entries=entries, hash=head[1], epoch=self._epoch.decode())
            reply = await self.script("commit", [], [self.prefix, encode(payload)])
            outcome = reply[0].decode()
            if outcome == "wiped":
                self._held(reply[1])
            if outcome == "stale":
                raise _Stale
            if outcome == "head":  # another process wrote since: chain after its entries instead
                self._head = (int(reply[1]), reply[2].decode() if reply[2] else GENESIS_HEAD[1])
                continue
            self._head = head
            seqs = iter(reply[1])
            return [numbered(write.change, seqs) for write in batch]
