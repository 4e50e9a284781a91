"""Long-running tasks at scale: 10,000 tasks running at once on one worker, every one reporting progress,
on the SQLite and PostgreSQL ledgers. Figures to stdout, progress to stderr.

    .venv/bin/python bench/tasks.py                          # both ledgers, 10,000 tasks x 20 reports
    .venv/bin/python bench/tasks.py --backend sqlite
    .venv/bin/python bench/tasks.py --backend postgres --postgres postgresql://me@db:5432/bench
    .venv/bin/python bench/tasks.py --tasks 1000 --reports 5 --seconds 1    # a quick look

Why these figures: a long-running tool may call `progress()` as often as it likes, so a report must never
slow the tool down nor swamp the ledger every worker shares, and a page following the task feed should
still see each task move. `Tasks` coalesces reports per task and one flusher writes them in batches, as
fast as the ledger takes them; the figures say what that buys and what it costs:

1. `create`: N `Tasks.start` calls, in chunks of 500 gathered at once; each body first waits on one
   event, so none reports before all exist. Tasks per second until every `start` returned, and until
   every body is running (the ledger recorded each task `running`).
2. `progress()` and the ledger: the event is set; each body then sleeps a random 0.4-1.6 x seconds/R,
   calls `progress(k * 100 // R, f"step {k}")`, and does so R times, so all N bodies run and report at
   once. The calls' rate, from the release to the last call, is the offered load; beside it the CPU this
   process and the rest of the machine (the PostgreSQL server included) used meanwhile. The ledger's rate
   is the reports `Tasks` handed to `ledger.tasks.report` (a wrapper counts `len(batch)` and times each
   call), from the release to the end of the last batch. "busy" is the share of that span the flusher spent
   inside `report`: near 100 %, the ledger is the limit and coalescing absorbs the rest. `ends`: when the
   last task's end was recorded.
3. feeds: two `TaskFeed`s (interval 0.2 s) follow every task from before the first is created. Just
   before each `progress()` call the body notes `perf_counter()` under (task id, percent); when a feed
   yields a task whose (id, progress) was noted, the first sighting counts `now - noted`. Coalescing
   means a value replaced before a feed read it is never seen, so the share seen is printed too.
   - `same worker`: the feed on the ledger the tasks write to; it wakes when this process writes.
   - `other worker`: a second ledger object on the same store (its own SQLite connection and thread,
     or its own PostgreSQL pool), which hears nothing and polls every 0.2 s, as a server in another
     process would. It shares this process's CPU, so it is "cross-process-like", not another process.
4. `check`: every task must be recorded `completed` at 100 %, every body must have made its R calls,
   every report batch must have succeeded, and both feeds must have shown every task's end; anything
   else fails the run. Then the wall time of the
   whole run and this process's peak RSS.

`--backend all` (the default) runs each ledger in a child process of its own, so each peak RSS is that
ledger's alone. PostgreSQL runs in a fresh schema `bench_tasks_<pid>_<random>`, SQLite in a temporary
directory; both are removed at exit, on failure, Ctrl-C and SIGTERM too. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import resource
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import version
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import psycopg
from figures import fmt_time, machine_busy_seconds, percentile, status, yardstick
from psycopg import sql

from signoff.core.call import ToolCall
from signoff.core.task import Task, TaskState
from signoff.ledger import Ledger, SqliteLedger
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.records import Progress
from signoff.server.feed import TaskFeed
from signoff.tasks import Tasks, progress

Backend = Literal["sqlite", "postgres"]
BACKENDS: tuple[Backend, ...] = ("sqlite", "postgres")
POSTGRES = os.environ.get("SIGNOFF_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

CREATE_CHUNK = 500  # Tasks.start calls gathered at once
FEED_INTERVAL = 0.2  # seconds: the server's default feed poll
JITTER = (0.4, 1.6)  # a body's sleeps are drawn from these multiples of seconds / reports
PHASE_TIMEOUT = 300.0  # seconds a phase may take before the run fails rather than hangs
NAME_WIDTH = 20


class Metered(Ledger):
    """Counts and times every batch of reports `Tasks` hands the ledger, and any that failed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[tuple[int, float, float]] = []  # (reports, seconds, end) per `report` call
        self.failures = 0
        report = self.tasks.report

        async def metered(reports: Sequence[Progress]) -> list[str]:
            start = time.perf_counter()
            try:
                return await report(reports)
            except Exception:
                self.failures += 1
                raise
            finally:
                end = time.perf_counter()
                self.batches.append((len(reports), end - start, end))

        self.tasks.report = metered


class MeteredSqliteLedger(Metered, SqliteLedger):
    """The SQLite ledger, metered."""


class MeteredPostgresLedger(Metered, PostgresLedger):
    """The PostgreSQL ledger, metered."""


@dataclass(slots=True)
class Sightings:
    """What one feed showed: the delay to the first sighting of each noted report, and how many tasks it
    showed ended."""

    latencies: list[float] = field(default_factory=list)
    ended: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    tasks: int
    reports: int
    seconds: float

    @property
    def sleeps(self) -> tuple[float, float]:
        step = self.seconds / self.reports
        return JITTER[0] * step, JITTER[1] * step


# -- the stores ---------------------------------------------------------------------------------------------


def server_version(dsn: str) -> str:
    """The server's version, which also checks it can be reached before anything is created on it."""
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def drop_schema(dsn: str, schema: str) -> None:
    """Synchronous and bounded, so it also runs after an interrupted event loop and cannot hang the exit."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute("SET lock_timeout = '10s'")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.asynccontextmanager
async def stores(backend: Backend, dsn: str) -> AsyncIterator[tuple[Metered, Ledger, str]]:
    """The ledger the tasks write to, a second ledger on the same store (another worker's view), and a
    description of the store; the store is removed afterwards, whatever happened."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="signoff-bench-tasks-") as folder:
            path = Path(folder) / "tasks.db"
            async with MeteredSqliteLedger(path) as writer, SqliteLedger(path) as reader:
                yield writer, reader, f"SQLite {sqlite3.sqlite_version}, {path} (removed at exit)"
        return
    server = server_version(dsn)
    schema = f"bench_tasks_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        async with (
            MeteredPostgresLedger(dsn, schema=schema) as writer,
            PostgresLedger(dsn, schema=schema) as reader,
        ):
            yield writer, reader, f"{server}, schema {schema} (removed at exit)"
    finally:
        drop_schema(dsn, schema)


# -- the measurement ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Moment:
    """When something happened: wall clock, this process's CPU, and the whole machine's CPU."""

    wall: float = 0.0
    cpu: float = 0.0
    machine: float = 0.0

    @classmethod
    def now(cls) -> Moment:
        return cls(time.perf_counter(), time.process_time(), machine_busy_seconds())


async def follow(feed: TaskFeed, noted: dict[tuple[str, int], float], count: int, seen: Sightings) -> None:
    """Read `feed` until it has shown `count` tasks ended, timing the first sighting of each noted report."""
    sighted: set[tuple[str, int]] = set()
    async for task in feed.follow():
        now = time.perf_counter()
        key = (task.id, task.progress)
        if key not in sighted and (at := noted.get(key)) is not None:
            sighted.add(key)
            seen.latencies.append(now - at)
        if task.state.finished:
            seen.ended += 1
            if seen.ended == count:
                return
    raise RuntimeError(f"the feed ended after {seen.ended:,} ended tasks")


async def within(event: asyncio.Event, what: str) -> None:
    try:
        async with asyncio.timeout(PHASE_TIMEOUT):
            await event.wait()
    except TimeoutError:
        raise RuntimeError(f"{what} did not happen within {PHASE_TIMEOUT:g} s") from None


class Workload:
    """The bodies and what they note: N bodies that wait for `release`, then report R times."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.ids = [""] * run.tasks
        self.noted: dict[tuple[str, int], float] = {}
        self.release, self.all_running, self.all_ended = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.running = self.reported = self.ended = self.calls = 0
        self.last_call = Moment()
        self.random = random.Random(1)

    async def body(self, i: int) -> None:
        self.running += 1
        if self.running == self.run.tasks:
            self.all_running.set()
        await self.release.wait()
        task_id, reports = self.ids[i], self.run.reports
        low, high = self.run.sleeps
        for k in range(1, reports + 1):
            await asyncio.sleep(self.random.uniform(low, high))
            percent = k * 100 // reports
            self.noted[(task_id, percent)] = time.perf_counter()
            progress(percent, f"step {k}")
            self.calls += 1
        self.reported += 1
        if self.reported == self.run.tasks:
            self.last_call = Moment.now()

    def on_change(self, task: Task) -> None:
        """`Tasks.watch` listener: counts the tasks whose end this process recorded."""
        if task.state.finished:
            self.ended += 1
            if self.ended == self.run.tasks:
                self.all_ended.set()

    async def create(self, tasks: Tasks) -> None:
        """Start every task, `CREATE_CHUNK` `Tasks.start` calls at a time."""
        n = self.run.tasks
        for first in range(0, n, CREATE_CHUNK):
            chunk = range(first, min(n, first + CREATE_CHUNK))
            created = await asyncio.gather(
                *(
                    tasks.start(
                        ToolCall(f"call{i}", "export_report", {"rows": i}),
                        partial(self.body, i),
                        chat_id=f"chat{i % 100}",
                    )
                    for i in chunk
                )
            )
            for i, task in zip(chunk, created, strict=True):
                self.ids[i] = task.id
                tasks.watch(task.id, self.on_change)


def line(name: str, text: str) -> None:
    print(f"  {name:<{NAME_WIDTH}}{text}", flush=True)


def pct(share: float) -> str:
    return f"{share * 100:.0f} %"


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    p50, p99 = percentile(ordered, 0.5), percentile(ordered, 0.99)
    return f"p50 {fmt_time(p50)}  p99 {fmt_time(p99)}  max {fmt_time(ordered[-1])}"


async def measure(backend: Backend, dsn: str, run: Run) -> None:
    n, load = run.tasks, Workload(run)
    low, high = run.sleeps
    began = time.perf_counter()
    async with stores(backend, dsn) as (writer, reader, where):
        print(f"{backend}: {where}", flush=True)
        print(
            f"  {n:,} tasks x {run.reports} reports, {low:.2f}-{high:.2f} s apart;"
            f" feed interval {FEED_INTERVAL:g} s, heartbeat every 2 s",
            flush=True,
        )
        tasks = Tasks(writer)
        feeds = [TaskFeed(writer, interval=FEED_INTERVAL), TaskFeed(reader, interval=FEED_INTERVAL)]
        sightings = [Sightings(), Sightings()]
        followers: list[asyncio.Task[None]] = []
        try:
            for feed, seen in zip(feeds, sightings, strict=True):
                await feed.start()
                followers.append(asyncio.create_task(follow(feed, load.noted, n, seen)))
            await asyncio.sleep(0.05)  # both readers are following before the first task exists

            status(f"{backend}: creating {n:,} tasks")
            t0 = time.perf_counter()
            await load.create(tasks)
            created = time.perf_counter() - t0
            await within(load.all_running, "every body running")
            running = time.perf_counter() - t0

            status(f"{backend}: {n:,} tasks reporting")
            released = Moment.now()
            load.release.set()
            await within(load.all_ended, "every task ending")
            ended = time.perf_counter()

            status(f"{backend}: waiting for the feeds to show every end")
            async with asyncio.timeout(PHASE_TIMEOUT):
                await asyncio.gather(*followers)
            caught_up = time.perf_counter() - ended
            final = await writer.tasks.query()
        finally:
            await tasks.close()
            for follower in followers:
                follower.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
            for feed in feeds:
                await feed.close()
    wall = time.perf_counter() - began

    states: dict[str, int] = {}
    for task in final:
        key = str(task.state) if task.progress == 100 else f"{task.state} below 100 %"
        states[key] = states.get(key, 0) + 1
    if len(final) != n or states.get(str(TaskState.COMPLETED), 0) != n:
        raise RuntimeError(f"{backend}: expected {n:,} tasks completed at 100 %, found {states}")
    if writer.failures:
        raise RuntimeError(f"{backend}: {writer.failures} of {len(writer.batches)} report batches failed")
    if load.calls != n * run.reports:
        raise RuntimeError(f"{backend}: {load.calls:,} progress() calls, expected {n * run.reports:,}")

    last = load.last_call
    reporting = last.wall - released.wall
    written = sum(size for size, _, _ in writer.batches)
    writing = sum(seconds for _, seconds, _ in writer.batches)
    flushing = max(end for _, _, end in writer.batches) - released.wall
    process = (last.cpu - released.cpu) / reporting
    rest = max(0.0, (last.machine - released.machine) / reporting - process)  # /proc/stat counts in ticks
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    line(
        "create",
        f"{n:,} started in {fmt_time(created)} ({n / created:,.0f} tasks/s);"
        f" all running after {fmt_time(running)} ({n / running:,.0f} tasks/s)",
    )
    line(
        "progress()",
        f"{load.calls:,} calls in {fmt_time(reporting)}: {load.calls / reporting:,.0f} calls/s;"
        f" CPU: this process {pct(process)}, rest of the machine {pct(rest)} (100 % = one core)",
    )
    line(
        "ledger writes",
        f"{written:,} reports ({pct(written / load.calls)} of calls) in"
        f" {len(writer.batches):,} batches over {fmt_time(flushing)}: {written / flushing:,.0f} rows/s,"
        f" mean batch {written / len(writer.batches):,.0f}",
    )
    line(
        "write per batch",
        f"{spread([seconds for _, seconds, _ in writer.batches])};"
        f" busy {pct(writing / flushing)}, {written / writing:,.0f} rows/s while writing",
    )
    line(
        "ends",
        f"every task ended {fmt_time(ended - released.wall)} after the release,"
        f" {fmt_time(ended - last.wall)} after the last progress() call",
    )
    for name, seen in zip(("feed, same worker", "feed, other worker"), sightings, strict=True):
        share = len(seen.latencies) / load.calls
        line(
            name,
            f"saw {len(seen.latencies):,} of {load.calls:,} reports ({pct(share)}): {spread(seen.latencies)}",
        )
    line(
        "check",
        f"{n:,} of {n:,} completed at 100 %; both feeds showed every end {fmt_time(caught_up)}"
        f" after the last; wall {fmt_time(wall)}, peak RSS {peak:,.0f} MiB",
    )


# -- driver -------------------------------------------------------------------------------------------------


def stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends the run like Ctrl-C does, so the schema and temporary files are removed."""
    raise SystemExit(128 + signum)


def each_in_a_child(argv: Sequence[str]) -> int:
    """Run this script once per ledger, so each ledger's peak RSS is its own; stop at the first failure."""
    for backend in BACKENDS:
        child = subprocess.Popen([sys.executable, __file__, *argv, "--backend", backend])
        try:
            code = child.wait()
        finally:
            if child.poll() is None:  # interrupted here: the child cleans up on SIGTERM
                child.terminate()
                child.wait()
        if code:
            return code
        print(flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark 10,000 concurrent long-running tasks reporting progress through a ledger.",
        epilog="Figures go to stdout, progress to stderr. See bench/README.md.",
    )
    parser.add_argument("--backend", choices=[*BACKENDS, "all"], default="all", help="default: all")
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks running at once (default 10,000)")
    parser.add_argument(
        "--reports", type=int, default=20, help="progress() calls per task, 1-100 (default 20)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=2.5,
        help="how long each body takes at least: its sleeps between reports add up to about this"
        " (default 2.5, i.e. 0.05-0.20 s apart at 20 reports)",
    )
    parser.add_argument(
        "--postgres", default=POSTGRES, metavar="URL", help=f"PostgreSQL server (default {POSTGRES})"
    )
    args = parser.parse_args(argv)
    if args.tasks < 1 or not 1 <= args.reports <= 100 or args.seconds <= 0:
        parser.error("--tasks must be at least 1, --reports from 1 to 100, --seconds above 0")
    signal.signal(signal.SIGTERM, stop)

    if args.backend == "all":
        return each_in_a_child(sys.argv[1:] if argv is None else argv)
    print(
        f"signoff task benchmark: Python {platform.python_version()}, {os.cpu_count()} CPUs,"
        f" msgspec {version('msgspec')}, psycopg {version('psycopg')}",
        flush=True,
    )
    print(f"machine yardstick at start: {fmt_time(yardstick())} per unit (lower is faster)", flush=True)
    asyncio.run(measure(args.backend, args.postgres, Run(args.tasks, args.reports, args.seconds)))
    print(f"machine yardstick at end: {fmt_time(yardstick())} per unit", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
