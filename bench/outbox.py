"""Benchmarks for the outbox: webhooks delivered by a real `signoff serve` worker, from approvals this
process opens on the ledger they share.

Three processes, so each figure is priced where it is paid: this one is the load generator (it opens the
approvals, and prints its own CPU, to show it is not the bottleneck), a `signoff serve` worker is the
system under test (its outbox worker claims, signs and posts every notice), and the receivers are one
more process of plain uvicorn endpoints that verify nothing and record when each `webhook-id` arrived.
A notice's latency is that arrival minus its event's time in the ledger (the same clock: one machine).

    .venv/bin/python bench/outbox.py                       # = all, on SQLite and PostgreSQL (~2 min)
    .venv/bin/python bench/outbox.py --ledger sqlite --n 2000

- backlog: `--n` approvals (10,000) opened before the worker starts, then delivered: deliveries/s from the
  first arrival to the last, the worker's capacity with nothing else on the machine's two cores. Goal:
  ≥ 500 deliveries/s.
- burst: `--n` more opened as fast as the ledger takes them while the worker delivers (the load
  generator and the database share the cores with it): deliveries/s from the first opening to the last
  delivery, and open → delivered at p50 and p99.
- paced: 100 approvals/s for `--seconds` (20); open → delivered at p50 and p99. Goal: p99 ≤ 1 s.
- one receiver down: the same pace, each approval told to two webhooks, one of which refuses every
  connection; the live one's p99 against its own when both are up. Goal: within 2x.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from figures import Report, fmt_time, percentile, status

from signoff.core.call import ToolCall
from signoff.ledger import open_ledger

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
SECRET = "whsec_" + base64.b64encode(b"bench secret, thirty-two bytes!!").decode()
POSTGRES = os.environ.get("SIGNOFF_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

RECEIVER = """
import json, sys, time
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

seen = {}

async def hook(request):
    seen.setdefault(request.path_params["name"], {}).setdefault(request.headers["webhook-id"], time.time())
    await request.body()
    return Response(status_code=200)

async def dump(request):
    return Response(json.dumps(seen), media_type="application/json")

async def count(request):
    return Response(str(len(seen.get(request.path_params["name"], {}))))

async def reset(request):
    seen.clear()
    return Response()

app = Starlette(routes=[Route("/hook/{name}", hook, methods=["POST"]), Route("/seen", dump),
                        Route("/count/{name}", count),
                        Route("/reset", reset, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
AGENT = "from pydantic_ai import Agent\nagent = Agent('test')\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def process(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, env={**os.environ, **(env or {})}, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def ledger_url(kind: str, directory: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{directory / 'outbox.db'}"
    return f"{POSTGRES}?schema=bench_{uuid.uuid4().hex[:10]}"


async def seen(port: int) -> dict[str, dict[str, float]]:
    import httpx

    async with httpx.AsyncClient() as client:
        return dict((await client.get(f"http://127.0.0.1:{port}/seen")).json())


async def open_approvals(
    url: str, run: str, n: int, rate: float | None, channels: tuple[str, ...]
) -> dict[str, float]:
    """Open `n` approvals of the run named `run` (at `rate` per second, or as fast as the ledger takes
    them, 32 at a time), told to `channels`; the event time of each of their notices to webhook:live."""
    events: dict[str, float] = {}
    async with open_ledger(url) as ledger:
        start = time.monotonic()

        async def one(index: int) -> None:
            call = ToolCall(f"{run}-{index}", "pay", {"amount": index, "to": "Bob"})
            approval = await ledger.approvals.open(
                call, chat_id=f"bench-{index % 50}", description="pay", rule="pay[0]", notify=channels
            )
            for notice in await ledger.outbox.query(approval_id=approval.id):
                if notice.channel == "webhook:live":
                    events[notice.id] = notice.created_at

        if rate is None:
            for first in range(0, n, 32):
                await asyncio.gather(*(one(i) for i in range(first, min(n, first + 32))))
        else:
            for index in range(n):
                await asyncio.sleep(max(0.0, start + index / rate - time.monotonic()))
                await one(index)
    return events


async def delivered(port: int, events: dict[str, float], name: str, within: float) -> list[float]:
    """Latencies of the notices delivered to `name`, once all of them are, or `within` seconds passed.
    Waits on the receiver's count, which costs it nothing, and reads the arrival times once at the end."""
    import httpx

    deadline = time.monotonic() + within
    async with httpx.AsyncClient() as client:
        arrived = (await seen(port)).get(name, {})
        wanted = len(arrived) + sum(i not in arrived for i in events)
        while int((await client.get(f"http://127.0.0.1:{port}/count/{name}")).text) < wanted:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    arrived = (await seen(port)).get(name, {})
    return sorted(arrived[i] - events[i] for i in events if i in arrived)


def run(kind: str, n: int, seconds: float, report: Report) -> None:
    directory = Path(tempfile.mkdtemp(prefix="signoff-bench-outbox-"))
    (directory / "benchagent.py").write_text(AGENT)
    receiver_port, dead_port, serve_port = free_port(), free_port(), free_port()
    hook = f"http://127.0.0.1:{receiver_port}/hook"
    (directory / "channels.toml").write_text(
        f'[webhook.live]\nurl = "{hook}/live"\nsecret_env = "HOOK"\nallow_private = true\n'
        f'[webhook.dead]\nurl = "http://127.0.0.1:{dead_port}/hook"\nsecret_env = "HOOK"\n'
        'allow_private = true\nretry_schedule = ["5s"]\n'
    )
    url = ledger_url(kind, directory)
    serve = [SIGNOFF, "serve", "--agent", "benchagent:agent", "--ledger", url, "--channels", "channels.toml",
             "--port", str(serve_port)]  # fmt: skip
    with process([sys.executable, "-c", RECEIVER, str(receiver_port)]) as receiver:
        wait_listening(receiver_port)
        status(f"{kind}: a backlog of {n}, opened before the worker starts")
        backlog = asyncio.run(open_approvals(url, "backlog", n, None, ("webhook:live",)))
        with process(serve, {"HOOK": SECRET, "PYTHONPATH": str(directory)}, directory) as server:
            wait_listening(serve_port)
            before = {p.pid: cpu_seconds(p.pid) for p in (receiver, server)}
            mine, started = os.times(), time.time()
            asyncio.run(delivered(receiver_port, backlog, "live", 600))
            arrived = list(asyncio.run(seen(receiver_port)).get("live", {}).values())
            rate = (len(arrived) - 1) / (max(arrived) - min(arrived)) if len(arrived) > 1 else 0.0
            report.judge(
                f"{kind} backlog",
                f"{rate:,.0f}/s ({len(arrived)} of {n})",
                "≥ 500/s",
                rate >= 500,
            )

            status(f"{kind}: a burst of {n}, opened while the worker delivers")
            burst = asyncio.run(open_approvals(url, "burst", n, None, ("webhook:live",)))
            latencies = asyncio.run(delivered(receiver_port, burst, "live", 600))
            arrivals = asyncio.run(seen(receiver_port)).get("live", {})
            span = max(arrivals[i] for i in burst if i in arrivals) - min(burst.values())
            report.line(
                f"{kind + ' burst':<27}{len(latencies) / span:,.0f}/s from the first opening to the last"
                f" delivery; open → delivered p50 {fmt_time(percentile(latencies, 0.5))},"
                f" p99 {fmt_time(percentile(latencies, 0.99))}"
            )

            status(f"{kind}: 100/s for {seconds:g} s, both receivers up")
            paced = asyncio.run(open_approvals(url, "paced", int(100 * seconds), 100.0, ("webhook:live",)))
            both = asyncio.run(delivered(receiver_port, paced, "live", 60))
            p99 = percentile(both, 0.99)
            report.judge(
                f"{kind} paced p99", f"p50 {fmt_time(percentile(both, 0.5))}, p99 {fmt_time(p99)}", "≤ 1 s",
                p99 <= 1.0,
            )  # fmt: skip

            status(f"{kind}: 100/s for {seconds:g} s, one receiver down")
            both_told = ("webhook:live", "webhook:dead")
            down = asyncio.run(open_approvals(url, "down", int(100 * seconds), 100.0, both_told))
            live = asyncio.run(delivered(receiver_port, down, "live", 60))
            p99_down = percentile(live, 0.99)
            report.judge(
                f"{kind} one receiver down", f"{fmt_time(p99_down)} against {fmt_time(p99)} both up",
                "≤ 2x both up", p99_down <= 2 * max(p99, 0.05),
            )  # fmt: skip
            used = {pid: cpu_seconds(pid) - cpu for pid, cpu in before.items()}
            gen = (os.times().user - mine.user) + (os.times().system - mine.system)
            wall = time.time() - started
            report.line(
                f"{'':<27}CPU over {wall:.0f} s: signoff serve {used[server.pid]:.1f} s, receivers "
                f"{used[receiver.pid]:.1f} s, load generator {gen:.1f} s ({100 * gen / wall:.0f} % of a core)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ledger", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=int, default=10_000, help="approvals in the burst")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of each paced run")
    args = parser.parse_args()
    report = Report(noun="goal")
    for kind in ("sqlite", "postgres") if args.ledger == "both" else (args.ledger,):
        run(kind, args.n, args.seconds, report)
    report.summary()


if __name__ == "__main__":
    main()
