"""Benchmarks for signoff's core: how fast a decision reaches a parked waiter, how many decisions a ledger
records per second, and what one pending blocked waiter costs in memory.

Every figure is printed next to its target from the issue and whether it was met, so a run reads as a
verdict rather than a table to interpret. Progress for anything slow goes to stderr, figures to stdout.

    .venv/bin/python bench/core.py all                      # everything (the default)
    .venv/bin/python bench/core.py latency --backend sqlite
    .venv/bin/python bench/core.py throughput --n 0.1       # a tenth of the counts, for a quick look

See bench/README.md for what each figure means and how it is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import linecache
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal, Self

from figures import Report, fmt_time, percentile, status, yardstick

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.policy import describe_call
from signoff.gate import Allowed, Gate, Outcome
from signoff.ledger import Ledger, MemoryLedger, SqliteLedger
from signoff.ledger.sqlite import Synchronous

Backend = Literal["memory", "sqlite"]
Meter = Literal["tracemalloc", "rss"]
Waiters = Literal["gate", "bare"]

# Targets from the issue.
LATENCY_TARGET: dict[Backend, float] = {"memory": 20e-6, "sqlite": 1e-3}
THROUGHPUT_TARGET: dict[Backend, float] = {"memory": 20_000.0, "sqlite": 2_000.0}
MEMORY_TARGET = 2048.0  # bytes per pending blocked waiter, memory ledger, at 100,000 pending

# Counts at --n 1.
LATENCY_SAMPLES: dict[Backend, int] = {"memory": 2000, "sqlite": 500}
GATE_LATENCY_SAMPLES = 2000
THROUGHPUT_DECISIONS: dict[Backend, int] = {"memory": 50_000, "sqlite": 5_000}
FULL_SYNC_DECISIONS = 1_000  # synchronous="full" is context only, and every commit is an fsync
CONCURRENCY = 32
MEMORY_WAITERS = 100_000

# A parked SQLite waiter gets this long before the decision, so the ledger's cross-process watcher has
# made its first pass (as it would have long before a person answers) and only its steady polling remains.
SQLITE_SETTLE = 0.002
PROGRESS_EVERY = 2.0  # seconds between progress lines on stderr
DECIDER = "bench"


# -- output -------------------------------------------------------------------------------------------------


def fmt_rate(per_second: float) -> str:
    return f"{per_second:,.0f}/s"


def fmt_bytes(size: float) -> str:
    return f"{size:,.0f} B" if abs(size) < 1024 else f"{size:,.0f} B ({size / 1024:.2f} KiB)"


def over(value: float, limit: float) -> str:
    """How far a figure that must stay under `limit` went over it, in words a reader can act on."""
    return f"missed by {value / limit - 1:.0%}"


def short(value: float, limit: float) -> str:
    """How far a figure that must reach `limit` fell short of it."""
    return f"missed by {1 - value / limit:.0%}"


class Progress:
    """Reports a long loop's progress on stderr every couple of seconds; silent for quick loops."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.start = self.last = time.monotonic()

    def tick(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY:
            self.last = now
            print(f"  … {self.label}: {done:,}/{self.total:,}", file=sys.stderr, flush=True)


def spread(values: Iterable[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return percentile(ordered, 0.50), percentile(ordered, 0.99), ordered[-1]


# -- fixtures -----------------------------------------------------------------------------------------------


def payment(call_id: str, i: int) -> ToolCall:
    """The call every benchmark asks about: the README's payment, a few small arguments."""
    return ToolCall(call_id, "process_payment", {"amount": i, "currency": "USD", "recipient": "Hanako"})


def chat_of(i: int) -> str:
    return f"chat{i % 1000}"


class Parking(Ledger):
    """Counts waiters that have parked, so a benchmark decides only once a waiter is really waiting.

    `Approvals.wait` calls the `_watch` hook after it has subscribed and read the approval as pending, right
    before it awaits its future, with no suspension in between. Counting those calls is exact for every
    backend (the SQLite read is a thread round trip, so a fixed number of `sleep(0)` would not be) and adds
    one integer increment to the path being measured.
    """

    parked = 0
    _want = 0
    _reached: asyncio.Event | None = None
    on_park: Callable[[int], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        watch = self.approvals._watch

        def parking() -> None:
            watch()
            self.parked += 1
            if self.on_park is not None:
                self.on_park(self.parked)
            if self._reached is not None and self.parked >= self._want:
                self._reached.set()

        self.approvals._watch = parking

    async def until_parked(self, count: int) -> None:
        """Return once `count` waiters in all have parked (then yield twice more, to be sure).

        Callers bound it with `asyncio.timeout`, so a waiter that never parks fails the run instead of
        hanging it.
        """
        if self.parked < count:
            self._want, self._reached = count, asyncio.Event()
            try:
                await self._reached.wait()
            finally:
                self._reached = None
        for _ in range(2):
            await asyncio.sleep(0)


class ParkingMemoryLedger(Parking, MemoryLedger):
    pass


class ParkingSqliteLedger(Parking, SqliteLedger):
    pass


class Scratch:
    """SQLite files for one run: in a fresh temporary directory unless --db names one; all removed at exit.

    Files get the process id in their name, so a directory given with --db never has its own files
    overwritten or deleted.
    """

    def __init__(self, where: str | None) -> None:
        self._temp = where is None
        self._made = False
        if where is None:
            self.dir = Path(tempfile.mkdtemp(prefix="signoff-bench-"))
        else:
            self.dir = Path(where)
            self._made = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
        self._files: list[Path] = []

    def path(self, name: str) -> Path:
        path = self.dir / f"signoff-bench-{os.getpid()}-{name}.db"
        self._files.append(path)
        return path

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._temp:
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        for path in self._files:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        if self._made and not any(self.dir.iterdir()):
            self.dir.rmdir()


async def open_many(ledger: Ledger, count: int, prefix: str, label: str) -> list[str]:
    """Open `count` pending approvals as the gate would, and return their ids."""
    progress = Progress(f"opening approvals for {label}", count)
    ids = []
    for i in range(count):
        call = payment(f"{prefix}{i}", i)
        approval = await ledger.approvals.open(
            call, chat_id=chat_of(i), description=describe_call(call), rule="default"
        )
        ids.append(approval.id)
        progress.tick(i + 1)
    return ids


# -- 1. latency: a decision to the waiter resuming ----------------------------------------------------------


async def resumed_at(ledger: Ledger, approval_id: str) -> float:
    """A waiter that notes the time as the very first thing after `wait` returns."""
    await ledger.approvals.wait(approval_id)
    return time.perf_counter()


async def authorized_at(gate: Gate, call: ToolCall, chat_id: str) -> tuple[Outcome, float]:
    """A tool call blocked in the gate, noting the time as the very first thing after `authorize` returns."""
    outcome = await gate.authorize(call, chat_id=chat_id, wait="blocking")
    return outcome, time.perf_counter()


def warmup(count: int) -> int:
    """Samples to run first and discard: cold caches and first-use allocations are not the steady state."""
    return min(50, max(1, count // 10))


async def ledger_latency(
    ledger: Parking, count: int, settle: float, label: str
) -> tuple[list[float], list[float]]:
    """One waiter at a time: park it, decide, and time decision-start and decide-return to its resumption."""
    skip = warmup(count)
    ids = await open_many(ledger, skip + count, "lat", label)
    decision = Decision.approve(DECIDER)
    total, wake = [], []
    progress = Progress(label, count)
    for n, approval_id in enumerate(ids):
        waiter = asyncio.create_task(resumed_at(ledger, approval_id))
        async with asyncio.timeout(10):
            await ledger.until_parked(n + 1)
        if settle:
            await asyncio.sleep(settle)
        t0 = time.perf_counter()
        await ledger.approvals.decide(approval_id, decision)
        decided = time.perf_counter()
        async with asyncio.timeout(10):
            t1 = await waiter
        if n >= skip:
            total.append(t1 - t0)
            wake.append(t1 - decided)
            progress.tick(n + 1 - skip)
    return total, wake


async def gate_latency(count: int) -> list[float]:
    """The same through `Gate.authorize` (default policy: ask), until the blocked call is allowed."""
    ledger = ParkingMemoryLedger()
    gate = Gate(ledger)
    decision = Decision.approve(DECIDER)
    skip = warmup(count)
    total = []
    progress = Progress("gate latency memory", count)
    for n in range(skip + count):
        call, chat_id = payment(f"gate{n}", n), chat_of(n)
        blocked = asyncio.create_task(authorized_at(gate, call, chat_id))
        async with asyncio.timeout(10):
            await ledger.until_parked(n + 1)
        approval = await ledger.approvals.find(chat_id, call.call_id)
        assert approval is not None
        t0 = time.perf_counter()
        await ledger.approvals.decide(approval.id, decision)
        async with asyncio.timeout(10):
            outcome, t1 = await blocked
        if not isinstance(outcome, Allowed):
            raise RuntimeError(f"the gate returned {outcome!r}, not Allowed")
        if n >= skip:
            total.append(t1 - t0)
            progress.tick(n + 1 - skip)
    return total


def latency_line(report: Report, name: str, samples: list[float], limit: float) -> None:
    p50, p99, worst = spread(samples)
    figures = f"n={len(samples):<6,} p50 {fmt_time(p50):>9}  p99 {fmt_time(p99):>9}  max {fmt_time(worst):>9}"
    target = f"p50/p99 <= {fmt_time(limit)}"
    key = f"p50 {fmt_time(p50)}, p99 {fmt_time(p99)}"
    report.judge(
        name, figures, target, p50 <= limit and p99 <= limit, key=key, miss=over(max(p50, p99), limit)
    )


def wake_line(report: Report, samples: list[float]) -> None:
    p50, p99, worst = spread(samples)
    report.line(
        f"{'  of which wake-up':<27}p50 {fmt_time(p50):>9}  p99 {fmt_time(p99):>9}  max {fmt_time(worst):>9}"
        "  (decide() returned -> waiter resumed; context)"
    )


async def bench_latency(report: Report, backends: Sequence[Backend], scale: float, scratch: Scratch) -> None:
    report.line("latency: a decision being made -> the waiting task resuming (one waiter at a time)")
    for backend in backends:
        count = scaled(LATENCY_SAMPLES[backend], scale)
        status(f"latency {backend}: {count:,} sequential decisions, each to one parked waiter")
        gc.collect()
        if backend == "memory":
            total, wake = await ledger_latency(ParkingMemoryLedger(), count, 0.0, "latency memory")
        else:
            async with ParkingSqliteLedger(scratch.path("latency")) as ledger:
                total, wake = await ledger_latency(ledger, count, SQLITE_SETTLE, "latency sqlite")
        latency_line(report, f"latency {backend} ledger", total, LATENCY_TARGET[backend])
        wake_line(report, wake)
        if backend == "memory":
            count = scaled(GATE_LATENCY_SAMPLES, scale)
            status(f"latency memory via the gate: {count:,} blocked authorize() calls")
            gc.collect()
            latency_line(report, "latency memory gate", await gate_latency(count), LATENCY_TARGET["memory"])


# -- 2. throughput: decisions per second --------------------------------------------------------------------


async def decide_all(ledger: Ledger, ids: list[str], tasks: int, label: str) -> float:
    """Decide every id, from one task or from `tasks` tasks sharing one queue, and return decisions/s."""
    decision = Decision.approve(DECIDER)
    queue: Iterator[str] = iter(ids)
    progress = Progress(label, len(ids))
    done = 0

    async def decider() -> None:
        nonlocal done
        for approval_id in queue:
            await ledger.approvals.decide(approval_id, decision)
            done += 1
            progress.tick(done)

    gc.collect()
    start = time.perf_counter()
    if tasks == 1:
        await decider()
    else:
        async with asyncio.TaskGroup() as group:
            for _ in range(tasks):
                group.create_task(decider())
    elapsed = time.perf_counter() - start
    if done != len(ids):
        raise RuntimeError(f"{label}: decided {done} of {len(ids)}")
    return len(ids) / elapsed


async def both_ways(ledger: Ledger, count: int, label: str) -> tuple[float, float]:
    """Sequential, then 32 concurrent deciders, each on its own freshly opened approvals."""
    ids = await open_many(ledger, 2 * count, label.replace(" ", "-"), label)
    sequential = await decide_all(ledger, ids[:count], 1, f"{label}, sequential")
    concurrent = await decide_all(ledger, ids[count:], CONCURRENCY, f"{label}, {CONCURRENCY} tasks")
    return sequential, concurrent


def throughput_figures(count: int, sequential: float, concurrent: float) -> str:
    per = 1 / max(sequential, concurrent)
    return (
        f"n={count:<6,} sequential {fmt_rate(sequential):>9}  {CONCURRENCY} tasks {fmt_rate(concurrent):>9}"
        f"  ({fmt_time(per)}/decision)"
    )


async def sqlite_pair(scratch: Scratch, count: int, synchronous: Synchronous) -> tuple[float, float]:
    """Opens with synchronous="normal" (fast set-up), then reopens with the setting under test to decide."""
    path = scratch.path(f"throughput-{synchronous}")
    label = f"throughput sqlite {synchronous}"
    async with SqliteLedger(path) as ledger:
        ids = await open_many(ledger, 2 * count, synchronous, label)
    async with SqliteLedger(path, synchronous=synchronous) as ledger:
        sequential = await decide_all(ledger, ids[:count], 1, f"{label}, sequential")
        concurrent = await decide_all(ledger, ids[count:], CONCURRENCY, f"{label}, {CONCURRENCY} tasks")
    return sequential, concurrent


async def bench_throughput(
    report: Report, backends: Sequence[Backend], scale: float, scratch: Scratch
) -> None:
    report.line("throughput: decisions recorded per second on pre-opened approvals")
    for backend in backends:
        count = scaled(THROUGHPUT_DECISIONS[backend], scale)
        limit = THROUGHPUT_TARGET[backend]
        status(
            f"throughput {backend}: 2 x {count:,} approvals, decided sequentially then by {CONCURRENCY} tasks"
        )
        if backend == "memory":
            sequential, concurrent = await both_ways(MemoryLedger(), count, "throughput memory")
            name = "throughput memory"
        else:
            sequential, concurrent = await sqlite_pair(scratch, count, "normal")
            name = "throughput sqlite normal"
        best = max(sequential, concurrent)
        figures = throughput_figures(count, sequential, concurrent)
        target = f">= {fmt_rate(limit)}, better of the two"
        report.judge(
            name, figures, target, best >= limit, key=f"best {fmt_rate(best)}", miss=short(best, limit)
        )
        if backend == "sqlite":
            count = scaled(FULL_SYNC_DECISIONS, scale)
            status(f"throughput sqlite synchronous=full: 2 x {count:,} approvals (an fsync per commit)")
            sequential, concurrent = await sqlite_pair(scratch, count, "full")
            figures = throughput_figures(count, sequential, concurrent)
            report.line(f"{'throughput sqlite full':<27}{figures}  (context, no target)")


# -- 3. memory per pending blocked waiter -------------------------------------------------------------------


def rss() -> int:
    """Resident set size in bytes, from /proc/self/status (kB granularity, plenty at 100,000 waiters)."""
    with open("/proc/self/status") as status_file:
        for line in status_file:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def where(filename: str, lineno: int) -> tuple[str, str]:
    """A short location (signoff/gate.py:146, asyncio/tasks.py:10) and its source line, for the site table."""
    path = Path(filename)
    parts = path.parts
    for anchor in ("signoff", "asyncio", "bench"):
        if anchor in parts:
            short_path = "/".join(parts[len(parts) - 1 - parts[::-1].index(anchor) :])
            break
    else:
        short_path = path.name
    return f"{short_path}:{lineno}", linecache.getline(filename, lineno).strip()


async def probe(waiters: Waiters, meter: Meter, count: int) -> dict[str, Any]:
    """Park `count` blocked waiters in a fresh process and measure the memory they hold.

    `gate`: each waiter is a task in `Gate.authorize` (default policy, so it opens an approval and blocks).
    `bare`: approvals are opened first (measured on their own), then each waiter is a task in
    `ledger.approvals.wait`.
    Run in a fresh process because memory freed by an earlier benchmark would be reused and hide growth,
    and tracemalloc's own bookkeeping would inflate RSS: each meter gets its own process.
    """
    label = f"memory {waiters} waiters ({meter})"
    ledger = ParkingMemoryLedger()
    gate = Gate(ledger)
    parking = Progress(f"{label}, parked", count)
    ledger.on_park = parking.tick
    decision = Decision.approve(DECIDER)

    def measure() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0] if meter == "tracemalloc" else rss()

    if meter == "tracemalloc":
        tracemalloc.start()
    baseline = tracemalloc.take_snapshot() if meter == "tracemalloc" else None
    before = measure()
    records = before
    creating = Progress(f"{label}, started", count)
    tasks: list[asyncio.Task[Any]] = []
    if waiters == "gate":
        for i in range(count):
            call = payment(f"c{i}", i)
            tasks.append(asyncio.create_task(gate.authorize(call, chat_id=chat_of(i), wait="blocking")))
            creating.tick(i + 1)
    else:
        ids = await open_many(ledger, count, "c", label)
        records = measure()
        for i, approval_id in enumerate(ids):
            tasks.append(asyncio.create_task(ledger.approvals.wait(approval_id)))
            creating.tick(i + 1)
    async with asyncio.timeout(900):
        await ledger.until_parked(count)
    after = measure()
    sites = []
    if baseline is not None:
        status(f"{label}: grouping the traced allocations by source line")
        stats = tracemalloc.take_snapshot().compare_to(baseline, "lineno")
        for stat in stats[:14]:
            frame = stat.traceback[0]
            location, code = where(frame.filename, frame.lineno)
            sites.append([stat.size_diff / count, stat.count_diff / count, location, code])
        tracemalloc.stop()  # the sanity pass below need not be traced, and runs three times faster
    pending = await ledger.approvals.query(state="pending")
    deciding = Progress(f"{label}, decided", count)
    for n, approval in enumerate(pending):
        await ledger.approvals.decide(approval.id, decision)
        deciding.tick(n + 1)
    async with asyncio.timeout(900):
        results = await asyncio.gather(*tasks)
    finished = sum(t.done() for t in tasks)
    if waiters == "gate":
        good = sum(isinstance(r, Allowed) for r in results)
    else:
        good = sum(isinstance(r, Approval) and r.state is State.APPROVED for r in results)
    return {
        "count": count,
        "pending": len(pending),
        "records": (records - before) / count,
        "waiters": (after - records) / count,
        "total": (after - before) / count,
        "sites": sites,
        "finished": finished,
        "good": good,
    }


class Probes:
    """Runs memory probes in child processes (this script with --probe), two at a time on two cores.

    Each child is tracked so that an interrupted run kills it rather than leaving it to finish alone.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self._children: list[subprocess.Popen[str]] = []
        self._stopping = False

    def run(self, spec: str) -> dict[str, Any]:
        if self._stopping:
            raise RuntimeError("stopping")
        command = [sys.executable, __file__, "--probe", spec, "--probe-count", str(self.count)]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self._children.append(child)
        out, _ = child.communicate(timeout=1800)
        if child.returncode != 0:
            raise RuntimeError(f"memory probe {spec} failed with exit status {child.returncode}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def all(self, specs: Sequence[str]) -> dict[str, dict[str, Any]]:
        pool = ThreadPoolExecutor(max_workers=2)
        try:
            return dict(zip(specs, pool.map(self.run, specs), strict=True))
        finally:
            self._stopping = True
            pool.shutdown(wait=False, cancel_futures=True)
            for child in self._children:
                if child.poll() is None:
                    child.kill()
            pool.shutdown(wait=True)


def bench_memory(report: Report, scale: float) -> None:
    count = scaled(MEMORY_WAITERS, scale)
    report.line(f"memory: bytes held per pending blocked waiter, memory ledger, {count:,} pending at once")
    status(
        f"memory: four child processes (gate/bare x tracemalloc/RSS), two at a time, {count:,} waiters each"
    )
    specs = ["gate:tracemalloc", "gate:rss", "bare:tracemalloc", "bare:rss"]
    found = Probes(count).all(specs)
    gate_tm, gate_rss, bare_tm, bare_rss = (found[s] for s in specs)
    worst = max(gate_tm["total"], gate_rss["total"])
    figures = (
        f"n={count:<6,} tracemalloc {fmt_bytes(gate_tm['total'])}  RSS {fmt_bytes(gate_rss['total'])}"
        "  per waiter"
    )
    key = f"worst meter {fmt_bytes(worst)} per waiter"
    met = worst <= MEMORY_TARGET
    report.judge(
        "memory gate waiter", figures, "<= 2 KiB, both meters", met, key=key, miss=over(worst, MEMORY_TARGET)
    )
    report.line(
        "  a waiter is everything a blocked tool call keeps alive: its approval record (Approval, ToolCall,"
    )
    report.line(
        "  normalized args, id/digest/description strings), the 'open' audit entry, the ledger's two index"
    )
    report.line(
        "  entries, the notifier's future and list, the asyncio Task, the coroutine frames authorize ->"
    )
    report.line(
        "  ledger.approvals.wait (no approvers, no deadline), the Ruling, and the caller's ToolCall and ids."
    )
    report.line("  breakdown (tracemalloc / RSS per waiter):")
    rows = [
        ("approval record + audit entry + indexes", bare_tm["records"], bare_rss["records"]),
        ("bare ledger.approvals.wait waiter on top", bare_tm["waiters"], bare_rss["waiters"]),
        (
            "Gate.authorize on top of that",
            gate_tm["total"] - bare_tm["total"],
            gate_rss["total"] - bare_rss["total"],
        ),
    ]
    for what, traced, resident in rows:
        report.line(f"    {what:<42}{fmt_bytes(traced):>20} / {fmt_bytes(resident)}")
    report.line("  where a gate waiter's bytes are allocated (tracemalloc, per waiter, largest first):")
    for size, allocations, location, code in gate_tm["sites"]:
        report.line(f"    {size:7,.0f} B {allocations:5.2f} allocs  {location:<30} {code[:58]}")
    for spec, result in found.items():
        ok = result["pending"] == count and result["finished"] == count and result["good"] == count
        if not ok:
            raise RuntimeError(f"memory probe {spec}: sanity check failed: {result}")
    report.line(
        f"  sanity: in each probe all {count:,} approvals were pending, then were decided, and every"
        " waiter finished approved"
    )


# -- driver -------------------------------------------------------------------------------------------------


def scaled(count: int, scale: float) -> int:
    return max(10, round(count * scale))


def header(report: Report, scale: float) -> None:
    report.line(
        f"signoff core benchmarks: Python {platform.python_version()}, {os.cpu_count()} CPUs,"
        f" SQLite {sqlite3.sqlite_version}, msgspec {version('msgspec')},"
        f" scale {scale:g}"
    )
    report.line(f"machine yardstick at start: {fmt_time(yardstick())} per unit (lower is faster)")


async def run_async(
    command: str, backends: Sequence[Backend], scale: float, scratch: Scratch, report: Report
) -> None:
    if command in ("latency", "all"):
        report.line()
        await bench_latency(report, backends, scale, scratch)
    if command in ("throughput", "all"):
        report.line()
        await bench_throughput(report, backends, scale, scratch)


def stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends the run like Ctrl-C does, so temporary files and child processes are cleaned up."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark signoff's ledger and gate against the targets in the issue.",
        epilog="Figures go to stdout, progress to stderr. See bench/README.md.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="all",
        choices=["latency", "throughput", "memory", "all"],
        help="what to measure (default: all)",
    )
    parser.add_argument(
        "--backend",
        choices=["memory", "sqlite", "both"],
        default="both",
        help="ledger(s) for latency and throughput (default: both); memory always uses the memory ledger",
    )
    parser.add_argument(
        "--n",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="multiply every count by FACTOR (default 1; 0.1 for a quick run)",
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=None,
        help="directory for the SQLite files (default: a new temporary directory); removed at exit",
    )
    parser.add_argument("--probe", help=argparse.SUPPRESS)  # internal: one memory probe in a child
    parser.add_argument("--probe-count", type=int, default=MEMORY_WAITERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, stop)

    if args.probe:
        waiters, meter = args.probe.split(":")
        print(json.dumps(asyncio.run(probe(waiters, meter, args.probe_count))))
        return 0
    if not 0 < args.n <= 100:
        parser.error("--n must be more than 0 and at most 100")

    backends: list[Backend] = ["memory", "sqlite"] if args.backend == "both" else [args.backend]
    report = Report()
    header(report, args.n)
    with Scratch(args.db) as scratch:
        asyncio.run(run_async(args.command, backends, args.n, scratch, report))
    if args.command in ("memory", "all"):
        report.line()
        if "memory" in backends:
            bench_memory(report, args.n)
        else:
            report.line("memory: measured on the memory ledger only; skipped with --backend sqlite")
    report.summary()
    report.line(
        f"machine yardstick at end: {fmt_time(yardstick())} per unit (compare runs only at similar values)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
