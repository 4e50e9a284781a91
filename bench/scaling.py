"""Multi-process benchmarks for the shared ledgers (PostgreSQL and Redis): how fast a decision made in one
process reaches a tool call waiting in another, and how many decisions two worker processes record per
second. Beside each figure it prints the floor: what the client library alone does against the same server
(a `SELECT 1` or `PING`), so a reader can see how much of a figure is the ledger and how much the wire.

Every figure is printed next to its target from the issue and whether it was met. Progress goes to stderr,
figures to stdout. Each run works in a PostgreSQL schema and a Redis key prefix of its own, and removes them
at exit, Ctrl-C and SIGTERM included; child processes are killed too.

    .venv/bin/python bench/scaling.py                         # = all: latency and throughput, both backends
    .venv/bin/python bench/scaling.py latency --backend redis
    .venv/bin/python bench/scaling.py throughput --backend postgres --postgres postgresql://me@db:5432/bench
    .venv/bin/python bench/scaling.py all --n 0.1             # a tenth of the counts, for a quick look

The helper processes are this script with a hidden role (`_waiter`, `_decider`, `_pinger`), spoken to in
JSON lines over stdin and stdout. See bench/README.md for what each figure means and how it is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from types import FrameType
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import redis
from core import Progress, fmt_rate, over, short, spread
from figures import Report, fmt_time, status, yardstick
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from redis import asyncio as aioredis

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.ledger import Ledger, open_ledger
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.redis import RedisLedger

Backend = Literal["postgres", "redis"]
BACKENDS: tuple[Backend, ...] = ("postgres", "redis")
DEFAULT_URL: dict[Backend, str] = {
    "postgres": "postgresql://postgres@127.0.0.1:5432/test",
    "redis": "redis://127.0.0.1:6379/0",
}
Floor = Literal["select", "commit", "ping"]
FLOORS: dict[Backend, tuple[Floor, ...]] = {"postgres": ("select", "commit"), "redis": ("ping",)}
FLOOR_NAME: dict[Floor, str] = {"select": "SELECT 1", "commit": "INSERT commit", "ping": "PING"}
FLOOR_TABLE = "bench_floor"  # in the run's schema: what the commit floor inserts into

# Targets from the issue.
LATENCY_TARGET: dict[Backend, float] = {"redis": 1e-3, "postgres": 3e-3}
THROUGHPUT_TARGET: dict[Backend, float] = {"redis": 5_000.0, "postgres": 2_000.0}

# Counts at --n 1.
LATENCY_SAMPLES = 300
LATENCY_WARMUP = 20  # samples run first and discarded: connections, caches, first-use allocations
THROUGHPUT_DECISIONS = 10_000  # all workers together
FLOOR_ROUND_TRIPS = 1_000
FLOOR_THROUGHPUT_CALLS: dict[Floor, int] = {"select": 40_000, "commit": 10_000, "ping": 40_000}  # all workers
FLOOR_WARM_CALLS = 1_000  # per worker, before the start signal

WORKERS = 2
CONCURRENCY = 32  # coroutines per worker process
WARM_DECISIONS = 200  # per worker, before the start signal: the pool grows to full size, the code runs hot
WAKE_TIMEOUT = 10.0  # a waiter not woken by then is a lost wake-up: the run fails rather than hangs
REPLY_TIMEOUT = 60.0  # seconds a helper process may take to answer, beyond the work it was given
DECIDER = "bench"
NAME_WIDTH = 31


# -- output -------------------------------------------------------------------------------------------------


def named(name: str) -> str:
    """Padding that lines up figures after a long name: `Report.judge` pads names to 27 characters only."""
    return " " * (NAME_WIDTH - max(27, len(name)))


def spread_figures(samples: Sequence[float]) -> str:
    p50, p99, worst = spread(samples)
    return f"p50 {fmt_time(p50):>9}  p99 {fmt_time(p99):>9}  max {fmt_time(worst):>9}"


def safe(url: str) -> str:
    """The URL without its password, for the header."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


# -- the servers and what a run leaves on them --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    """One backend's server and this run's own corner of it: a schema (PostgreSQL) or key prefix (Redis).

    The corner's name has the process id and a random part, so runs never share or remove each other's
    data, and `remove` deletes only what this run created: never the rest of the database.
    """

    backend: Backend
    url: str
    name: str

    @classmethod
    def of(cls, backend: Backend, url: str) -> Server:
        sep = "_" if backend == "postgres" else "-"
        return cls(backend, url, sep.join(("bench", "scaling", str(os.getpid()), secrets.token_hex(3))))

    @property
    def ledger_url(self) -> str:
        """The server URL with this run's schema or prefix added as `open_ledger` reads it."""
        parts = urlsplit(self.url)
        option = "schema" if self.backend == "postgres" else "prefix"
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != option] + [(option, self.name)]
        return urlunsplit(parts._replace(query=urlencode(query)))

    def remove(self) -> None:
        """Drop the schema or delete the prefix's keys (SCAN, never FLUSHDB). Synchronous, so it also runs
        after an interrupted event loop; bounded by timeouts, so it cannot hang the exit."""
        if self.backend == "postgres":
            with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                conn.execute("SET lock_timeout = '10s'")
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.name)))
            return
        with redis.Redis.from_url(self.url, socket_timeout=10, socket_connect_timeout=5) as client:
            batch: list[bytes] = []
            for key in client.scan_iter(match=f"{self.name}:*", count=1000):
                batch.append(key)
                if len(batch) == 1000:
                    client.delete(*batch)
                    batch.clear()
            if batch:
                client.delete(*batch)

    async def prepare(self) -> None:
        """Create the schema (the ledger would) and the table the commit floor inserts into."""
        if self.backend == "postgres":
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                await conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.name))
                )
                table = sql.Identifier(self.name, FLOOR_TABLE)
                await conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (n BIGINT)").format(table))

    async def version(self) -> str:
        """The server's version, which also checks that it can be reached at all."""
        if self.backend == "postgres":
            async with await psycopg.AsyncConnection.connect(self.url, connect_timeout=5) as conn:
                row = await (await conn.execute("SHOW server_version")).fetchone()
                return f"PostgreSQL {row[0] if row else '?'}"
        async with aioredis.Redis.from_url(self.url, socket_connect_timeout=5) as client:
            info = await client.info("server")
            return f"Redis {info.get('redis_version', '?')}"


def pool_size(server: Server) -> int:
    """The ledger's own pool size (connections per process), so the floor uses as many as the ledger."""
    ledger = open_ledger(server.ledger_url)  # not started: nothing is connected
    assert isinstance(ledger, PostgresLedger | RedisLedger)
    return ledger.pool_size


# -- helper processes ---------------------------------------------------------------------------------------


class Child:
    """One helper process (this script with a hidden role) and its JSON-lines conversation.

    Every message it sends is one line on its stdout; everything else it says (progress, tracebacks) goes
    to stderr, which it shares with this process.
    """

    running: list[asyncio.subprocess.Process] = []  # noqa: RUF012 - one registry per process, on purpose

    def __init__(self, role: str, process: asyncio.subprocess.Process) -> None:
        self.role = role
        self.process = process

    async def send(self, message: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def receive(self, seconds: float = REPLY_TIMEOUT) -> Any:
        assert self.process.stdout is not None
        try:
            async with asyncio.timeout(seconds):
                line = await self.process.stdout.readline()
        except TimeoutError:
            raise RuntimeError(f"the {self.role} process did not answer within {seconds:g} s") from None
        if not line:
            code = await self.process.wait()
            raise RuntimeError(f"the {self.role} process exited with status {code} (its error is above)")
        return json.loads(line)

    async def expect(self, key: str, seconds: float = REPLY_TIMEOUT) -> Any:
        message = await self.receive(seconds)
        if not isinstance(message, dict) or key not in message:
            raise RuntimeError(f"the {self.role} process said {message!r}, expected {key!r}")
        return message[key]

    async def finish(self) -> None:
        """Close its stdin (its cue that nothing more is coming) and check it exits cleanly."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        async with asyncio.timeout(REPLY_TIMEOUT):
            code = await self.process.wait()
        if code != 0:
            raise RuntimeError(f"the {self.role} process exited with status {code}")


@contextlib.asynccontextmanager
async def child(role: str, spec: dict[str, Any]) -> AsyncIterator[Child]:
    """Start `python bench/scaling.py <role>`, send it `spec`, and make sure it is gone afterwards."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, role, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    Child.running.append(process)
    helper = Child(role, process)
    try:
        await helper.send(spec)
        yield helper
        await helper.finish()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        Child.running.remove(process)


def kill_children() -> None:
    """Last resort after an interrupted event loop: kill helpers that are somehow still running."""
    for process in Child.running:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)


class Inbox:
    """A helper's side of the conversation: JSON lines from the parent on stdin, replies on stdout.

    End of input means the parent is gone or done: the helper stops rather than lingering.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    @classmethod
    async def open(cls) -> Inbox:
        reader = asyncio.StreamReader(limit=1 << 26)  # a decider's spec holds thousands of ids
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
        return cls(reader)

    async def receive(self) -> Any:
        line = await self.reader.readline()
        if not line:
            raise SystemExit(0)
        return json.loads(line)

    async def expect(self, word: str) -> None:
        if (message := await self.receive()) != word:
            raise RuntimeError(f"expected {word!r} from the parent, got {message!r}")

    @staticmethod
    def send(message: object) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


# -- fixtures -----------------------------------------------------------------------------------------------


def payment(call_id: str, i: int) -> ToolCall:
    return ToolCall(call_id, "process_payment", {"amount": i, "currency": "USD", "recipient": "Hanako"})


async def open_one(ledger: Ledger, call_id: str, i: int) -> Approval:
    """Open one pending approval as the gate would (a payment, in one of 100 chats)."""
    return await ledger.approvals.open(
        payment(call_id, i), chat_id=f"chat{i % 100}", description="bench", rule="bench"
    )


async def open_many(ledger: Ledger, count: int, prefix: str, label: str) -> list[str]:
    """Open `count` pending approvals from 32 tasks (set-up, not timed) and return their ids in order."""
    ids = [""] * count
    numbers = iter(range(count))
    progress = Progress(label, count)
    done = 0

    async def opener() -> None:
        nonlocal done
        for i in numbers:
            ids[i] = (await open_one(ledger, f"{prefix}{i}", i)).id
            done += 1
            progress.tick(done)

    async with asyncio.TaskGroup() as group:
        for _ in range(CONCURRENCY):
            group.create_task(opener())
    return ids


async def concurrently(calls: int, tasks: int, call: Callable[[int], Awaitable[object]]) -> None:
    """Make `calls` calls `call(0)`, `call(1)`, … from `tasks` coroutines sharing one counter."""
    numbers = iter(range(calls))

    async def worker() -> None:
        for i in numbers:
            await call(i)

    async with asyncio.TaskGroup() as group:
        for _ in range(tasks):
            group.create_task(worker())


class Parks:
    """Counts waiters that have parked in `ledger.approvals.wait`, so the decider acts only once one really
    waits.

    `Approvals.wait` calls the `_watch` hook after it has subscribed and read the approval as pending, right
    before it awaits its future, with nothing in between that could suspend. `open_ledger` builds the
    ledger, so the hook is wrapped on the instance rather than in a subclass; the ledger's own `_watch`
    (which starts its LISTEN / SUBSCRIBE watcher) still runs first.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.count = 0
        self._changed = asyncio.Event()
        inner = ledger.approvals._watch

        def watch() -> None:
            inner()
            self.count += 1
            self._changed.set()

        ledger.approvals._watch = watch  # type: ignore[method-assign]

    async def reach(self, count: int) -> None:
        async with asyncio.timeout(WAKE_TIMEOUT):
            while self.count < count:
                self._changed.clear()
                await self._changed.wait()


# -- roles of the helper processes --------------------------------------------------------------------------


async def resumed_at(ledger: Ledger, approval_id: str) -> tuple[int, str]:
    """A waiter that notes the time as the very first thing after `wait` returns (monotonic clock, which
    all processes on one machine share), and the state it was woken with."""
    approval = await ledger.approvals.wait(approval_id)
    return time.monotonic_ns(), str(approval.state)


async def waiter_role(spec: dict[str, Any], inbox: Inbox) -> None:
    """Process W of the latency figure: opens an approval, waits on it, says "parked", reports when it
    resumed, and on "next" does the same again, `count` times.

    With `standing`, one more approval is waited on throughout, as in any worker with a call pending, so
    the ledger's LISTEN / SUBSCRIBE watcher is already up when a waiter parks: the steady state a person's
    answer (seconds later) always meets. Without it, the watcher stops once nobody in W waits (Redis's at
    once, PostgreSQL's at its next poll, up to a second later), and a decision can race its restart.
    """
    async with open_ledger(spec["url"]) as ledger:
        parks = Parks(ledger)
        standing: asyncio.Task[Approval] | None = None
        try:
            if spec["standing"]:
                anchor = await open_one(ledger, f"{spec['tag']}-standing", 0)
                standing = asyncio.create_task(ledger.approvals.wait(anchor.id))
                await parks.reach(1)
                await asyncio.sleep(0.2)  # the watcher connects and subscribes
            for i in range(spec["count"]):
                approval = await open_one(ledger, f"{spec['tag']}-{i}", i)
                waiting = asyncio.create_task(resumed_at(ledger, approval.id))
                await parks.reach(parks.count + 1)
                inbox.send({"parked": approval.id})
                async with asyncio.timeout(WAKE_TIMEOUT):
                    resumed, state = await waiting
                inbox.send({"resumed": resumed, "state": state})
                await inbox.expect("next")
        finally:
            if standing is not None:
                standing.cancel()
                await asyncio.gather(standing, return_exceptions=True)


async def decider_role(spec: dict[str, Any], inbox: Inbox) -> None:
    """A worker of the throughput figure: warms up on its own approvals, says "ready", and on "go" decides
    its share with 32 coroutines; reports when it started and finished."""
    decision = Decision.approve(DECIDER)
    async with open_ledger(spec["url"]) as ledger:

        async def decide(ids: list[str]) -> None:
            await concurrently(len(ids), CONCURRENCY, lambda i: ledger.approvals.decide(ids[i], decision))

        await decide(spec["warm"])
        inbox.send({"ready": True})
        await inbox.expect("go")
        start = time.monotonic_ns()
        await decide(spec["ids"])
        inbox.send({"done": len(spec["ids"]), "start": start, "end": time.monotonic_ns()})


Call = Callable[[], Awaitable[object]]


@contextlib.asynccontextmanager
async def floor_client(kind: Floor, url: str, schema: str, size: int) -> AsyncIterator[Call]:
    """The client library alone against the same server, with nothing of signoff's: one call is

    - `select`: `SELECT 1` with psycopg (autocommit): the wire and the driver;
    - `commit`: a one-row `INSERT` into the run's floor table (autocommit): adds a commit, and with it the
      server's WAL flush, which every ledger write also waits for;
    - `ping`: `PING` with redis-py asyncio.

    `size` 1 is one plain connection, for round trips one at a time; more is the pool the ledger itself
    uses (psycopg_pool, redis-py's `BlockingConnectionPool`) at that size, a connection checked out per call.
    """
    if kind == "ping":
        client = aioredis.Redis.from_pool(aioredis.BlockingConnectionPool.from_url(url, max_connections=size))
        try:
            yield client.ping
        finally:
            await client.aclose()
        return
    statement: sql.SQL | sql.Composed = sql.SQL("SELECT 1")
    if kind == "commit":
        statement = sql.SQL("INSERT INTO {} (n) VALUES (1)").format(sql.Identifier(schema, FLOOR_TABLE))
    if size == 1:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:

            async def direct() -> object:
                return await conn.execute(statement)

            yield direct
        return
    pool = AsyncConnectionPool(url, min_size=size, max_size=size, kwargs={"autocommit": True}, open=False)
    await pool.open(wait=True, timeout=10)

    async def pooled() -> object:
        async with pool.connection() as conn:
            return await conn.execute(statement)

    try:
        yield pooled
    finally:
        await pool.close()


async def pinger_role(spec: dict[str, Any], inbox: Inbox) -> None:
    """A worker of a floor throughput: the same shape as a decider, with the floor's call as the work."""
    async with floor_client(spec["kind"], spec["url"], spec["schema"], spec["pool"]) as call:
        await concurrently(spec["warm"], CONCURRENCY, lambda i: call())
        inbox.send({"ready": True})
        await inbox.expect("go")
        start = time.monotonic_ns()
        await concurrently(spec["calls"], CONCURRENCY, lambda i: call())
        inbox.send({"done": spec["calls"], "start": start, "end": time.monotonic_ns()})


ROLES: dict[str, Callable[[dict[str, Any], Inbox], Awaitable[None]]] = {
    "_waiter": waiter_role,
    "_decider": decider_role,
    "_pinger": pinger_role,
}


async def run_role(role: str) -> None:
    inbox = await Inbox.open()
    spec = await inbox.receive()
    await ROLES[role](spec, inbox)


# -- 1. latency: a decision in one process to the waiter in another resuming --------------------------------


async def cross_process_latency(
    server: Server, count: int, *, standing: bool
) -> tuple[list[float], list[float]]:
    """This process is D, the decider; a helper is W, the waiter. Returns (latency, decide() time) samples.

    Per sample: W opens an approval, parks in `wait`, says so; D takes t0 right before `decide`; W takes t1
    as the first thing after `wait` returns. Latency is t1 - t0 on the shared monotonic clock.
    """
    label = f"latency {server.backend}" + ("" if standing else ", no standing waiter")
    total = LATENCY_WARMUP + count
    decision = Decision.approve(DECIDER)
    latency, deciding = [], []
    progress = Progress(label, count)
    tag = "latency-standing" if standing else "latency-alone"  # call ids unique within the run's ledger
    spec = {"url": server.ledger_url, "count": total, "standing": standing, "tag": tag}
    async with open_ledger(server.ledger_url) as ledger, child("_waiter", spec) as waiter:
        for n in range(total):
            approval_id = await waiter.expect("parked")
            t0 = time.monotonic_ns()
            await ledger.approvals.decide(approval_id, decision)
            decided = time.monotonic_ns()
            reply = await waiter.receive(WAKE_TIMEOUT)
            if reply.get("state") != str(State.APPROVED):
                raise RuntimeError(f"the waiter woke with {reply!r}, not approved")
            if n >= LATENCY_WARMUP:
                latency.append((reply["resumed"] - t0) / 1e9)
                deciding.append((decided - t0) / 1e9)
                progress.tick(n + 1 - LATENCY_WARMUP)
            await waiter.send("next")
    return latency, deciding


async def round_trips(server: Server, kind: Floor, count: int) -> list[float]:
    """The floor of one round trip from Python: the floor's call on one connection, one call at a time,
    after a warm-up."""
    samples = []
    async with floor_client(kind, server.url, server.name, 1) as call:
        for _ in range(LATENCY_WARMUP + count):
            t0 = time.perf_counter()
            await call()
            samples.append(time.perf_counter() - t0)
    return samples[LATENCY_WARMUP:]


async def bench_latency(report: Report, servers: Sequence[Server], scale: float) -> None:
    report.line("latency: a decision made in process D -> the waiter in process W resuming (one at a time)")
    for server in servers:
        backend, limit = server.backend, LATENCY_TARGET[server.backend]
        count = scaled(FLOOR_ROUND_TRIPS, scale)
        floors = {}
        for kind in FLOORS[backend]:
            status(f"floor {backend}: {count:,} sequential {FLOOR_NAME[kind]} round trips")
            floors[kind] = await round_trips(server, kind, count)
        count = scaled(LATENCY_SAMPLES, scale)
        status(f"latency {backend}: {LATENCY_WARMUP} + {count:,} decisions, each to a waiter elsewhere")
        latency, deciding = await cross_process_latency(server, count, standing=True)
        name = f"latency {backend} cross-process"
        p50, p99, _ = spread(latency)
        report.judge(
            name,
            f"{named(name)}n={len(latency):<6,} {spread_figures(latency)}",
            f"p50/p99 <= {fmt_time(limit)}",
            p50 <= limit and p99 <= limit,
            key=f"p50 {fmt_time(p50)}, p99 {fmt_time(p99)}",
            miss=over(max(p50, p99), limit),
        )
        context = f"{'  of which decide() in D':<{NAME_WIDTH}}{' ' * 9}{spread_figures(deciding)}"
        report.line(f"{context}  (context)")
        status(f"latency {backend} without a standing waiter: {LATENCY_WARMUP} + {count:,} decisions")
        cold, _ = await cross_process_latency(server, count, standing=False)
        report.line(
            f"{'  no standing waiter':<{NAME_WIDTH}}{' ' * 9}{spread_figures(cold)}"
            "  (W's watcher may stop between waits; context)"
        )
        for kind, floor in floors.items():
            report.line(
                f"{'  floor: ' + FLOOR_NAME[kind]:<{NAME_WIDTH}}n={len(floor):<6,} {spread_figures(floor)}"
                "  (round trips on one connection; context)"
            )


# -- 2. throughput: decisions per second from two worker processes ------------------------------------------


async def race(role: str, specs: Sequence[dict[str, Any]], seconds: float) -> tuple[int, float, list[float]]:
    """Start one helper per spec, wait until all are ready, start them together, and return (calls done,
    wall seconds from the start signal to the last finish, each helper's own rate)."""
    async with contextlib.AsyncExitStack() as stack:
        helpers = [await stack.enter_async_context(child(role, spec)) for spec in specs]
        for helper in helpers:
            await helper.expect("ready", seconds)
        start = time.monotonic_ns()
        for helper in helpers:
            await helper.send("go")
        results = [await helper.receive(seconds) for helper in helpers]
    done = sum(r["done"] for r in results)
    wall = (max(r["end"] for r in results) - start) / 1e9
    return done, wall, [r["done"] * 1e9 / (r["end"] - r["start"]) for r in results]


def split(items: Sequence[str], parts: int) -> list[list[str]]:
    return [list(items[k::parts]) for k in range(parts)]


async def decisions_per_second(server: Server, count: int) -> tuple[int, float, list[float]]:
    """Pre-open the approvals here (not timed), then race the deciders, each over its share."""
    warm = WORKERS * WARM_DECISIONS
    async with open_ledger(server.ledger_url) as ledger:
        label = f"opening approvals for throughput {server.backend}"
        ids = await open_many(ledger, warm + count, "tp", label)
    status(f"throughput {server.backend}: {WORKERS} workers x {CONCURRENCY} coroutines deciding {count:,}")
    specs = [
        {"url": server.ledger_url, "warm": w, "ids": i}
        for w, i in zip(split(ids[:warm], WORKERS), split(ids[warm:], WORKERS), strict=True)
    ]
    result = await race("_decider", specs, REPLY_TIMEOUT + count / 100)
    mine = set(ids)  # the latency figure's approvals are in the same ledger
    async with open_ledger(server.ledger_url) as ledger:
        pending = sum(a.id in mine for a in await ledger.approvals.query(state="pending"))
        approved = sum(a.id in mine for a in await ledger.approvals.query(state="approved"))
    if result[0] != count or pending or approved != len(ids):
        raise RuntimeError(
            f"throughput {server.backend}: sanity check failed: {result[0]} decided of {count},"
            f" {pending} left pending, {approved} of {len(ids)} approved"
        )
    return result


async def floor_per_second(server: Server, kind: Floor, count: int) -> tuple[int, float, list[float]]:
    """The floor's call from two processes of 32 coroutines, over as many connections as the ledger pools."""
    size = pool_size(server)
    status(
        f"floor {server.backend}: {WORKERS} workers x {CONCURRENCY} coroutines,"
        f" {count:,} {FLOOR_NAME[kind]} over {size} connections each"
    )
    shares = [count // WORKERS + (k < count % WORKERS) for k in range(WORKERS)]
    spec = {"kind": kind, "url": server.url, "schema": server.name, "pool": size, "warm": FLOOR_WARM_CALLS}
    return await race("_pinger", [{**spec, "calls": share} for share in shares], REPLY_TIMEOUT + count / 500)


def rate_figures(done: int, wall: float, rates: list[float]) -> str:
    each = ", ".join(fmt_rate(r) for r in rates)
    return f"n={done:<6,} {fmt_rate(done / wall):>9}  ({fmt_time(wall)} wall; each worker {each})"


async def bench_throughput(report: Report, servers: Sequence[Server], scale: float) -> None:
    report.line(
        f"throughput: decisions per second, {WORKERS} worker processes x {CONCURRENCY} coroutines each,"
        " on pre-opened approvals"
    )
    for server in servers:
        backend, limit = server.backend, THROUGHPUT_TARGET[server.backend]
        floors = {
            kind: await floor_per_second(server, kind, scaled(FLOOR_THROUGHPUT_CALLS[kind], scale))
            for kind in FLOORS[backend]
        }
        done, wall, rates = await decisions_per_second(server, scaled(THROUGHPUT_DECISIONS, scale))
        name = f"throughput {backend} {WORKERS} workers"
        rate = done / wall
        report.judge(
            name,
            f"{named(name)}{rate_figures(done, wall, rates)}",
            f">= {fmt_rate(limit)}",
            rate >= limit,
            key=fmt_rate(rate),
            miss=short(rate, limit),
        )
        for kind, (calls, seconds, each) in floors.items():
            report.line(
                f"{'  floor: ' + FLOOR_NAME[kind]:<{NAME_WIDTH}}{rate_figures(calls, seconds, each)}"
                f"  (context: the ledger does {rate / (calls / seconds):.0%} of this)"
            )


# -- driver -------------------------------------------------------------------------------------------------


def scaled(count: int, scale: float) -> int:
    return max(10, round(count * scale))


async def reachable(report: Report, servers: Sequence[Server]) -> list[Server]:
    """Print each server's version; a server that cannot be reached is reported and skipped."""
    found = []
    for server in servers:
        try:
            what = await server.version()
        except (psycopg.Error, redis.RedisError, OSError) as exc:
            reason = " ".join(str(exc).split())  # libpq's messages span lines
            report.line(f"{server.backend}: cannot reach {safe(server.url)} ({reason}); skipped")
            continue
        corner = "schema" if server.backend == "postgres" else "key prefix"
        report.line(
            f"{server.backend}: {what} at {safe(server.url)}, {corner} {server.name} (removed at exit)"
        )
        found.append(server)
    return found


async def run_async(command: str, servers: list[Server], scale: float, report: Report) -> None:
    """Measure on the servers that can be reached; the others leave `servers`, so nothing is removed there."""
    servers[:] = await reachable(report, servers)
    for server in servers:
        await server.prepare()
    report.line(f"machine yardstick at start: {fmt_time(yardstick())} per unit (lower is faster)")
    if command in ("latency", "all") and servers:
        report.line()
        await bench_latency(report, servers, scale)
    if command in ("throughput", "all") and servers:
        report.line()
        await bench_throughput(report, servers, scale)


def stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends the run like Ctrl-C does, so helpers, schemas and keys are cleaned up."""
    print("terminated; cleaning up", file=sys.stderr)
    raise SystemExit(128 + signum)


def clean_up(servers: Sequence[Server]) -> None:
    """Kill leftover helpers, then remove each server's schema or keys; a second Ctrl-C or SIGTERM is
    ignored meanwhile, so it cannot leave them behind half removed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kill_children()
    for server in servers:
        try:
            server.remove()
        except (psycopg.Error, redis.RedisError, OSError) as exc:
            print(f"could not remove {server.backend} {server.name}: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark the shared ledgers (PostgreSQL, Redis) across processes against the issue's"
        " targets.",
        epilog="Figures go to stdout, progress to stderr. See bench/README.md.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="all",
        choices=["latency", "throughput", "all", *ROLES],
        metavar="{latency,throughput,all}",
        help="what to measure (default: all)",
    )
    parser.add_argument(
        "--backend", choices=[*BACKENDS, "both"], default="both", help="ledger(s) to measure (default: both)"
    )
    parser.add_argument(
        "--n",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="multiply every count by FACTOR (default 1; 0.1 for a quick run)",
    )
    for backend in BACKENDS:
        parser.add_argument(
            f"--{backend}",
            metavar="URL",
            default=DEFAULT_URL[backend],
            help=f"the {backend} server (default: {DEFAULT_URL[backend]}); the run works in a "
            + ("schema" if backend == "postgres" else "key prefix")
            + " of its own there",
        )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, stop)

    if args.command in ROLES:
        try:
            asyncio.run(run_role(args.command))
        except KeyboardInterrupt:  # Ctrl-C reaches the whole process group; the parent reports it
            return 130
        return 0
    if not 0 < args.n <= 100:
        parser.error("--n must be more than 0 and at most 100")

    chosen = BACKENDS if args.backend == "both" else (args.backend,)
    servers = [Server.of(backend, getattr(args, backend)) for backend in chosen]
    report = Report()
    report.line(
        f"signoff scaling benchmarks: Python {platform.python_version()}, {os.cpu_count()} CPUs,"
        f" psycopg {version('psycopg')}, redis-py {version('redis')}, scale {args.n:g}"
    )
    try:
        asyncio.run(run_async(args.command, servers, args.n, report))
    except KeyboardInterrupt:
        print("interrupted; cleaning up", file=sys.stderr)
        return 130
    finally:
        clean_up(servers)
    report.summary()
    report.line(
        f"machine yardstick at end: {fmt_time(yardstick())} per unit (compare runs only at similar values)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
