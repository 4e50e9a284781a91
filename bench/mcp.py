"""Benchmarks for the MCP gateway: what it adds to an allowed call, and its calls/s against FastMCP's proxy.

Each server runs in its own process; this one is the load generator, driving the official `mcp` SDK's
client, and prints its own CPU beside each server's so a figure is never the generator's limit in disguise.
The upstream is `tests/mcp_upstream.py`, and every call is its `lookup` tool, which the policy allows: the
gateway rules on each call (policy, identity, the durable SQLite ledger opened) and forwards it.

    .venv/bin/python bench/mcp.py                 # all (~1 min)
    .venv/bin/python bench/mcp.py --n 500 --seconds 5 --concurrency 8

- own work: the gateway's handler against a bare SDK server's, both in process with no transport: what
  signoff itself does per allowed call.
- latency over stdio: `--n` sequential calls, the upstream spawned by the client vs by a gateway the client
  spawns (`signoff mcp-gateway --stdio`); p50 and p99 of each, and what the gateway adds. Goal: ≤ 1 ms
  added at p50.
- latency over HTTP: the same against the upstream served over streamable HTTP, directly vs through a
  gateway on HTTP that reaches it by `--upstream-url`. Goal: ≤ 1 ms added at p50.
- throughput: `--concurrency` clients calling for `--seconds`, through the gateway and through FastMCP's
  `create_proxy` in front of the same upstream over HTTP (FastMCP in a virtualenv of its own, made on the
  first run in ~/.cache/signoff-bench).
  Goal: the gateway ≥ 1.0x the proxy's calls/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

# This script is named for what it measures, and Python puts its folder first on the path, where it would
# stand in for the `mcp` SDK: the SDK is imported with the folder off the path, and the folder put back.
HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != HERE]
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp_types import CallToolResult, ListToolsResult, TextContent, Tool  # noqa: E402

sys.path.insert(0, HERE)
from figures import Report, fmt_time, percentile, status  # noqa: E402
from flows import cpu_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
UPSTREAM = [sys.executable, str(ROOT / "tests" / "mcp_upstream.py")]
POLICY = '[[tools.lookup]]\naction = "allow"\n'
TOKEN = "bench-" + os.urandom(8).hex()
FASTMCP = "4.2.3"
PROXY = """
import sys
from fastmcp.server import create_proxy

create_proxy(sys.argv[1]).run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def process(command: list[str], ready: str, log: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    """A server process, waited on until `ready` shows in its output; yields its pid, and stops it."""
    with log.open("wb") as out:
        started = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=log.parent,  # never this folder, whose mcp.py would stand in for the SDK
        )
    try:
        deadline = time.monotonic() + 30
        while ready not in log.read_text(errors="replace"):
            if started.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{command[0]} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield started.pid
    finally:
        started.send_signal(signal.SIGINT)
        try:
            started.wait(10)
        except subprocess.TimeoutExpired:
            started.kill()


def http_client(url: str, token: str | None = None) -> Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60))
    return Client(streamable_http_client(url, http_client=http), mode="auto")


async def timed_calls(client: Client, n: int) -> list[float]:
    """Seconds per call of `n` sequential calls, after 50 to warm up."""
    for i in range(50):
        await client.call_tool("lookup", {"query": f"warm {i}"})
    times = []
    for i in range(n):
        started = time.perf_counter()
        await client.call_tool("lookup", {"query": f"q {i}"})
        times.append(time.perf_counter() - started)
    return sorted(times)


def compare(report: Report, name: str, direct: list[float], gated: list[float]) -> None:
    p50, p99 = percentile(direct, 0.5), percentile(direct, 0.99)
    g50, g99 = percentile(gated, 0.5), percentile(gated, 0.99)
    report.line(f"{name + ' direct':<27}p50 {fmt_time(p50)}  p99 {fmt_time(p99)}")
    report.line(f"{name + ' gateway':<27}p50 {fmt_time(g50)}  p99 {fmt_time(g99)}")
    added = g50 - p50
    figures = f"p50 +{fmt_time(added)}  p99 +{fmt_time(g99 - p99)}"
    report.judge(f"{name} added", figures, "≤ 1 ms at p50", added <= 1e-3, key=f"p50 +{fmt_time(added)}")


class _Answered:
    """An upstream that answers at once, with no I/O: what is left is the gateway's own work."""

    where = "in process"
    tool = Tool(name="lookup", input_schema={"type": "object", "properties": {"query": {"type": "string"}}})
    result = CallToolResult(content=[TextContent(text="found")])

    async def call_tool(self, name: str, args: dict[str, object], *_: object, **__: object) -> CallToolResult:
        return self.result

    async def schema(self, name: str) -> dict[str, object]:
        return dict(self.tool.input_schema)

    def listed(self, name: str) -> dict[str, object]:
        return dict(self.tool.input_schema)

    async def list_tools(self, *_: object) -> ListToolsResult:
        return ListToolsResult(tools=[self.tool])


async def own_work(report: Report, work: Path, n: int) -> None:
    """The gateway's handler against a bare SDK server's, both in process (the SDK's direct dispatch, no
    transport): the difference is what signoff does per allowed call."""
    from signoff.core.policy import Policy
    from signoff.core.principal import Principal
    from signoff.gate import Gate
    from signoff.ledger import open_ledger
    from signoff.mcp import Gateway

    status("in process: the gateway's own work per call")
    answered = _Answered()

    async def call(ctx: object, params: object) -> CallToolResult:
        return answered.result

    async def listed(ctx: object, params: object) -> ListToolsResult:
        return ListToolsResult(tools=[answered.tool])

    bare = Server("bare", on_call_tool=call, on_list_tools=listed)
    async with open_ledger(f"sqlite:///{work / 'own.db'}") as ledger:
        gate = Gate(ledger, Policy.from_toml(POLICY))
        requester = Principal(id="mcp:bench", via="mcp")
        gateway = Gateway(gate, answered, lambda ctx: requester, state_keys=[os.urandom(32)])  # type: ignore[arg-type]
        async with Client(bare, mode="2026-07-28") as plain:
            bare_times = await timed_calls(plain, n)
        async with Client(gateway.server, mode="2026-07-28") as gated:
            gated_times = await timed_calls(gated, n)
    plain, gated = percentile(bare_times, 0.5), percentile(gated_times, 0.5)
    report.line(
        f"{'own work':<27}p50 +{fmt_time(gated - plain)} per call  (a bare SDK server in process:"
        f" p50 {fmt_time(plain)}; the gateway: {fmt_time(gated)})"
    )


async def latency_stdio(report: Report, work: Path, n: int) -> None:
    status("latency over stdio: the upstream directly")
    env = {**os.environ, "UPSTREAM_RUNS": os.devnull}
    async with Client(StdioServerParameters(command=UPSTREAM[0], args=UPSTREAM[1:], env=env)) as direct:
        plain = await timed_calls(direct, n)
    status("latency over stdio: through signoff mcp-gateway --stdio")
    args = [
        "mcp-gateway", "--stdio", "--ledger", f"sqlite:///{work / 'stdio.db'}",
        "--policy", str(work / "policy.toml"), "--state-key-file", str(work / "state.keys"),
        "--upstream-env", "UPSTREAM_RUNS", "--", *UPSTREAM,
    ]  # fmt: skip
    async with Client(StdioServerParameters(command=SIGNOFF, args=args, env=env)) as gateway:
        gated = await timed_calls(gateway, n)
    compare(report, "stdio", plain, gated)


@asynccontextmanager
async def upstream_http(work: Path) -> AsyncIterator[str]:
    port = free_port()
    env = {"UPSTREAM_RUNS": os.devnull}
    with process([*UPSTREAM, "--http", str(port)], "Uvicorn running", work / "upstream.log", env):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def gateway_http(work: Path, upstream: str) -> Iterator[tuple[str, int]]:
    command = [
        SIGNOFF, "mcp-gateway", "--port", "0", "--ledger", f"sqlite:///{work / 'http.db'}",
        "--policy", str(work / "policy.toml"), "--state-key-file", str(work / "state.keys"),
        "--upstream-url", upstream,
    ]  # fmt: skip
    log = work / "gateway.log"
    with process(command, "signoff mcp-gateway: http", log, {"SIGNOFF_API_TOKEN": TOKEN}) as pid:
        line = next(x for x in log.read_text().splitlines() if x.startswith("signoff mcp-gateway: http"))
        yield line.split(": ", 1)[1] + "/mcp", pid


async def latency_http(report: Report, work: Path, n: int) -> None:
    async with upstream_http(work) as upstream:
        status("latency over HTTP: the upstream directly")
        async with http_client(upstream) as direct:
            plain = await timed_calls(direct, n)
        with gateway_http(work, upstream) as (url, _):
            status("latency over HTTP: through signoff mcp-gateway")
            async with http_client(url, TOKEN) as gateway:
                gated = await timed_calls(gateway, n)
    compare(report, "http", plain, gated)


async def calls_per_second(
    url: str, token: str | None, pid: int, clients: int, seconds: float
) -> dict[str, float]:
    """Calls/s of `clients` concurrent clients for `seconds`, and the CPU seconds the server and this
    process spent meanwhile."""
    count = 0
    stop = time.monotonic() + seconds

    async def one(index: int) -> None:
        nonlocal count
        async with http_client(url, token) as client:
            await client.call_tool("lookup", {"query": "warm"})
            await ready.wait()
            while time.monotonic() < stop:
                await client.call_tool("lookup", {"query": f"{index}"})
                count += 1

    ready = asyncio.Event()
    tasks = [asyncio.ensure_future(one(i)) for i in range(clients)]
    await asyncio.sleep(1.0)  # every client connected and warm
    server0, own0 = cpu_seconds(pid), time.process_time()
    stop, started = time.monotonic() + seconds, time.monotonic()
    ready.set()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    return {
        "rate": count / elapsed,
        "server_cpu": (cpu_seconds(pid) - server0) / elapsed,
        "own_cpu": (time.process_time() - own0) / elapsed,
    }


def fastmcp_python() -> str:
    """A Python with FastMCP, in a virtualenv of its own made on first use: FastMCP needs an OpenTelemetry
    newer than google-adk (in signoff's dev environment) accepts."""
    venv = Path.home() / ".cache" / "signoff-bench" / f"fastmcp-{FASTMCP}"
    python = venv / "bin" / "python"
    if not python.exists():
        status(f"making {venv} with FastMCP {FASTMCP} (once)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"fastmcp=={FASTMCP}"], check=True)
    return str(python)


async def throughput(report: Report, work: Path, clients: int, seconds: float) -> None:
    python = fastmcp_python()
    async with upstream_http(work) as upstream:
        with gateway_http(work, upstream) as (url, pid):
            status(f"throughput: {clients} clients through signoff mcp-gateway for {seconds:g} s")
            gated = await calls_per_second(url, TOKEN, pid, clients, seconds)
        port = free_port()
        proxy = [python, "-c", PROXY, upstream, str(port)]
        with process(proxy, "Uvicorn running", work / "proxy.log") as pid:
            status(f"throughput: {clients} clients through FastMCP's create_proxy for {seconds:g} s")
            proxied = await calls_per_second(f"http://127.0.0.1:{port}/mcp", None, pid, clients, seconds)
    for name, got in (("gateway", gated), ("fastmcp proxy", proxied)):
        report.line(
            f"{'throughput ' + name:<27}{got['rate']:.0f} calls/s  (server CPU {got['server_cpu']:.2f} cores,"
            f" load generator {got['own_cpu']:.2f} cores)"
        )
    ratio = gated["rate"] / proxied["rate"]
    report.judge("throughput ratio", f"{ratio:.2f}x the proxy", "≥ 1.0x", ratio >= 1.0)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="sequential calls per latency figure")
    parser.add_argument("--concurrency", type=int, default=16, help="clients calling at once for throughput")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long throughput is measured")
    options = parser.parse_args()
    report = Report(noun="goal")
    with tempfile.TemporaryDirectory(prefix="signoff-mcp-bench-") as where:
        work = Path(where)
        (work / "policy.toml").write_text(POLICY)
        os.environ.setdefault("SIGNOFF_AUDIT_KEY_FILE", str(work / "audit.key"))
        report.line(f"signoff MCP gateway benchmarks: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        await own_work(report, work, options.n)
        await latency_stdio(report, work, options.n)
        await latency_http(report, work, options.n)
        await throughput(report, work, options.concurrency, options.seconds)
    report.summary()


if __name__ == "__main__":
    asyncio.run(main())
