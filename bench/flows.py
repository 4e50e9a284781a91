"""Benchmarks for whole approval flows over real HTTP, signoff beside pydantic-ai's own `VercelAIAdapter`.

A flow is what a `useChat` page does for one approved payment: POST the user's message, read the stream up
to the tool approval request, POST the approval, read the tool's output and the model's reply. Both servers
run as real uvicorn processes, serve the same scripted model and the same tools, and are driven by the same
load generator (this process), so the figures compare the two stacks on identical work. The goal from the
issue is judged in the output: at concurrency 16, at least 2x the peer's flows per second with a lower p99.

The floor prices the same flow without HTTP, in one process: pydantic-ai's agent runs alone, the peer's
adapter, and signoff's chat. Both servers pay the agent runs, which bounds the ratio any server on top of
them can reach. The encoding micro-benchmark prices one SSE chunk through signoff's encoder against a plain
`json.dumps` of the same dict (and, for context, pydantic-ai's own chunk encoder).

    .venv/bin/python bench/flows.py                         # = all: encode, floor, http (~1.7 min, 2 cores)
    .venv/bin/python bench/flows.py http --concurrency 16 --seconds 20 --ledger memory
    .venv/bin/python bench/flows.py floor
    .venv/bin/python bench/flows.py encode

See bench/README.md for what each figure means and how it is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import os
import platform
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self
from unittest import mock

import uvicorn
from figures import Report, fmt_time, machine_busy_seconds, percentile, status, yardstick
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.run import AgentRunResult, AgentRunResultEvent
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai import response_types as vercel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff import protocol
from signoff.core.principal import Principal
from signoff.demo.agent import BROWSER_TOOLS, INSTRUCTIONS, demo_agent
from signoff.demo.model import scripted_model
from signoff.demo.tools import Wallets, get_weather
from signoff.demo.walkthrough import demo_policy
from signoff.gate import Gate
from signoff.integrations.pydantic_ai import chat as pydantic_chat
from signoff.integrations.pydantic_ai.chat import AgentChat
from signoff.integrations.pydantic_ai.toolset import (
    Signoff,
    SignoffToolset,
)
from signoff.ledger import open_ledger
from signoff.ledger.chats import Chats
from signoff.ledger.memory import MemoryBackend
from signoff.ledger.sqlite.backend import SqliteBackend
from signoff.protocol import encode, frame, parse_chat_request
from signoff.server.app import Settings, create_app

PROMPT = "pay 50 USD to Hanako"
EXPECTED_TEXT = "Paid 50 USD to Hanako"  # what the scripted model says once the payment really ran
CHAT_PATH = "/api/chat"
SERVERS = ("signoff", "peer")

# The goals from issue 21.
GOAL_CONCURRENCY = 16
GOAL_RATIO = {"sqlite": 1.05, "memory": 1.15}
"""flows/s against the peer's at `GOAL_CONCURRENCY`, by signoff's ledger (any other: the SQLite goal)."""
GOAL_FLOOR = {"memory": 1.5e-3, "SQLite": 3e-3}
"""CPU per flow above the agent alone, by ledger."""

DEFAULT_CONCURRENCY = (1, 16, 64)
DEFAULT_SECONDS = 10.0
DEFAULT_WARMUP = 2.0
FLOOR_FLOWS = 200
FLOOR_WARMUP = 20
FLOOR_ROUNDS = 10
ENCODE_ITERATIONS = 20_000  # per chunk and per encoder, in each of ENCODE_REPEATS rounds; the best counts
ENCODE_REPEATS = 5
READY_TIMEOUT = 60.0  # seconds a server may take to start listening (imports on a busy 2-core VM are slow)
SSE_SEPARATOR = (",", ":")  # what JSON.stringify and msgspec write: no spaces


# -- the peer: pydantic-ai's own VercelAIAdapter, the documented way ----------------------------------------


PeerAgent = Agent[None, str | DeferredToolRequests]


def peer_agent() -> PeerAgent:
    """The demo agent without signoff: same scripted model, instructions and tools as `signoff demo`.

    `process_payment` needs approval the pydantic-ai way (`requires_approval=True`, and the run ends with
    `DeferredToolRequests`). It keeps a wallet per chat, like the demo, so both servers reply "Paid 50 USD".
    """
    wallets = Wallets()
    agent: PeerAgent = Agent(
        scripted_model(),
        instructions=INSTRUCTIONS,
        toolsets=[BROWSER_TOOLS],
        output_type=[str, DeferredToolRequests],
        name="peer-demo",
    )

    @agent.tool(requires_approval=True)
    def process_payment(
        ctx: RunContext[None], amount: float, currency: str, recipient: str
    ) -> dict[str, Any]:
        """Pay `amount` of `currency` to `recipient` from the user's wallet."""
        return wallets.pay(ctx.conversation_id or "default", amount, currency, recipient)

    agent.tool_plain(get_weather)
    return agent


def peer_app() -> Starlette:
    """`peer_agent` served with `VercelAIAdapter.dispatch_request(request, agent=agent, sdk_version=6)`.

    That is the documented setup for tool approval: the adapter streams `tool-approval-request` for the
    deferred call and reads the person's answer from the `approval-responded` tool part of the next
    request. The history lives in the client (the adapter's default), so this server keeps no state.
    """
    agent = peer_agent()

    async def chat(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(request, agent=agent, sdk_version=6)

    return Starlette(routes=[Route(CHAT_PATH, chat, methods=["POST"])])


async def serve_peer(host: str, port: int) -> None:
    """uvicorn configured as `signoff demo` configures it, announcing its URL once it really listens."""
    server = uvicorn.Server(
        uvicorn.Config(peer_app(), host=host, port=port, log_level="warning", lifespan="on")
    )
    running = asyncio.ensure_future(server.serve())
    while not server.started and not running.done():  # noqa: ASYNC110 - uvicorn has a flag, not an event
        await asyncio.sleep(0.02)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()[1]
        print(f"peer: http://{host}:{bound}", flush=True)
    await running


# -- server processes ---------------------------------------------------------------------------------------


def ledger_url(choice: str, where: Path) -> str:
    """`sqlite` is a fresh file in the run's temporary directory; `memory` the in-process ledger."""
    if choice == "sqlite":
        return f"sqlite:///{where / 'bench.db'}"
    if choice == "memory":
        return "memory://"
    return choice


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a whole process (all its threads) so far, from /proc; NaN where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """One server in its own process: started, waited on until it listens, and always stopped.

    Output goes to a log file rather than a pipe, so a chatty server can never block on a full pipe, and a
    server that fails to start is reported with what it said.
    """

    def __init__(self, name: str, command: list[str], log: Path) -> None:
        self.name = name
        self.command = command
        self.log = log
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self) -> str:
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            found = re.search(r"http://[\d.]+:\d+", self.log.read_text(errors="replace"))
            if found:
                self.url = found.group(0)
                return self.url
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        said = self.log.read_text(errors="replace").strip()
        raise RuntimeError(f"the {self.name} server did not start: {said or 'no output'}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Servers:
    """Both servers and their temporary directory, all removed at exit (Ctrl-C and SIGTERM included)."""

    def __init__(self, ledger: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="signoff-flows-"))
        self.ledger = ledger_url(ledger, self.dir)
        beside = Path(sys.executable).with_name("signoff")  # the venv's console script
        signoff_cli = str(beside) if beside.exists() else shutil.which("signoff") or "signoff"
        self.signoff = Server(
            "signoff",
            [signoff_cli, "demo", "--port", "0", "--ledger", self.ledger],
            self.dir / "signoff.log",
        )
        self.peer = Server(
            "peer",
            [sys.executable, str(Path(__file__).resolve()), "peer-server", "--port", "0"],
            self.dir / "peer.log",
        )

    def __enter__(self) -> Self:
        try:
            for server in (self.signoff, self.peer):  # both import at once: two cores
                server.start()
            for server in (self.signoff, self.peer):
                server.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for server in (self.signoff, self.peer):
            server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def get(self, name: str) -> Server:
        return self.signoff if name == "signoff" else self.peer


# -- one flow, as the AI SDK's DefaultChatTransport does it ------------------------------------------------


class FlowFailed(Exception):
    """A flow that did not end with the tool run and its reply streamed: always counted, never hidden."""


class Connection:
    """One keep-alive HTTP/1.1 connection over a raw asyncio stream: the load generator's client.

    An HTTP client library's own work per request shares the machine's two cores with the servers measured,
    and hides part of the gap between them, so the requests are written as bytes built in one step, and
    the responses are read with the least parsing HTTP/1.1 allows: the status
    line, `content-length` or `transfer-encoding: chunked`, nothing else. Both servers answer an SSE
    stream chunked, and an error with a length.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer = reader, writer
        head = f"POST {CHAT_PATH} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        self.head = head.encode()

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, f"{host}:{port}")

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """POST `body` to the chat route; the status and the whole body, de-chunked."""
        self.writer.write(b"%scontent-length: %d\r\n\r\n%s" % (self.head, len(body), body))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        if b"transfer-encoding: chunked" in lower:
            parts = []
            while size := int((await self.reader.readuntil(b"\r\n"))[:-2], 16):
                parts.append((await self.reader.readexactly(size + 2))[:-2])
            await self.reader.readuntil(b"\r\n")
            return status, b"".join(parts)
        length = int(lower.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def new_id() -> str:
    """An id like the AI SDK's `generateId()`: 16 URL-safe characters."""
    return secrets.token_urlsafe(12)


def submit_body(chat_id: str, user_message: dict[str, Any]) -> bytes:
    """Request 1: the transport's body for a new message (`messageId` is only set when editing one)."""
    body = {"id": chat_id, "messages": [user_message], "trigger": "submit-message"}
    return json.dumps(body, separators=SSE_SEPARATOR).encode()


def approval_body(
    chat_id: str, user_message: dict[str, Any], assistant_id: str, call: dict[str, Any], approval_id: str
) -> bytes:
    """Request 2, after `addToolApprovalResponse({id, approved: true})`: all messages, the last one the
    assistant message with its tool part in `approval-responded`, and `messageId` naming that message."""
    assistant = {
        "id": assistant_id,
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-process_payment",
                "toolCallId": call["toolCallId"],
                "state": "approval-responded",
                "input": call["input"],
                "approval": {"id": approval_id, "approved": True},
            },
        ],
    }
    body = {
        "id": chat_id,
        "messages": [user_message, assistant],
        "trigger": "submit-message",
        "messageId": assistant_id,
    }
    return json.dumps(body, separators=SSE_SEPARATOR).encode()


def parse_stream(response: tuple[int, bytes], request: str) -> list[dict[str, Any]]:
    """The chunks of one SSE response; a non-200, a stream without `[DONE]` or an `error` chunk fails."""
    status_code, content = response
    if status_code != 200:
        raise FlowFailed(f"{request}: HTTP {status_code}: {content[:200]!r}")
    chunks: list[dict[str, Any]] = []
    done = False
    for event in content.split(b"\n\n"):
        for line in event.split(b"\n"):
            if not line.startswith(b"data: "):
                continue  # keep-alive comments and blank lines
            data = line[6:]
            if data == b"[DONE]":
                done = True
            else:
                chunks.append(json.loads(data))
    errors = [c.get("errorText") for c in chunks if c.get("type") == "error"]
    if errors:
        raise FlowFailed(f"{request}: error chunk: {errors[0]}")
    if not done:
        raise FlowFailed(f"{request}: the stream ended without [DONE]")
    return chunks


def first(chunks: list[dict[str, Any]], kind: str, request: str) -> dict[str, Any]:
    for chunk in chunks:
        if chunk.get("type") == kind:
            return chunk
    raise FlowFailed(f"{request}: no {kind} chunk")


async def one_flow(connection: Connection, chat_id: str) -> None:
    """Both requests of one approved payment, checked: the tool must have run and the reply be streamed."""
    user_message = {"id": new_id(), "role": "user", "parts": [{"type": "text", "text": PROMPT}]}
    asked = parse_stream(await connection.post(submit_body(chat_id, user_message)), "request 1")
    # A `start` without messageId (the peer's) leaves the id to the client, as `useChat` does.
    assistant_id = first(asked, "start", "request 1").get("messageId") or new_id()
    call = first(asked, "tool-input-available", "request 1")
    request = first(asked, "tool-approval-request", "request 1")
    if call.get("toolName") != "process_payment" or request.get("toolCallId") != call.get("toolCallId"):
        raise FlowFailed(f"request 1: unexpected tool call {call} / approval request {request}")
    body = approval_body(chat_id, user_message, assistant_id, call, request["approvalId"])
    answered = parse_stream(await connection.post(body), "request 2")
    output = first(answered, "tool-output-available", "request 2")
    if output.get("toolCallId") != call["toolCallId"] or not (output.get("output") or {}).get("success"):
        raise FlowFailed(f"request 2: the payment did not run: {output}")
    text = "".join(c.get("delta", "") for c in answered if c.get("type") == "text-delta")
    if not text.startswith(EXPECTED_TEXT):
        raise FlowFailed(f"request 2: unexpected reply text {text!r}")


# -- load ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    server: str
    concurrency: int
    seconds: float
    latencies: list[float]  # successful flows completed inside the window, sorted
    failures: int  # flows that failed inside the window
    failures_outside: int  # ... during warm-up or while draining: reported, not in the rates
    first_error: str | None
    server_cpu: float  # CPU seconds the server process used inside the window
    client_cpu: float  # CPU seconds this load generator used inside the window
    other_cpu: float  # CPU seconds everything else on the machine used (the idle server included)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds


async def run_load(server: Server, concurrency: int, warmup: float, seconds: float) -> Row:
    """`concurrency` workers doing flows back to back: warm-up, then the measured window, then drain.

    A flow counts when it completes inside the window; its latency is from sending request 1 to the last
    byte of response 2. Each flow has its own chat id. Workers stop starting flows at the window's end.
    """
    prefix = f"bench-{server.name}-{concurrency}-{secrets.token_hex(4)}"
    results: list[tuple[float, float, str | None]] = []
    connections = [await Connection.open(server.url) for _ in range(concurrency)]
    loop_start = time.perf_counter()
    window_start = loop_start + warmup
    window_end = window_start + seconds

    async def worker(index: int, connection: Connection) -> None:
        n = 0
        while (start := time.perf_counter()) < window_end:
            n += 1
            error = None
            try:
                await one_flow(connection, f"{prefix}-{index}-{n}")
            except Exception as exc:  # any failure is a failed flow, counted and shown, never a crash
                error = f"{type(exc).__name__}: {exc}"
                connection.close()  # its stream may be anywhere in a response: start afresh
                connection = await Connection.open(server.url)
            results.append((start, time.perf_counter(), error))

    async def meter() -> tuple[float, float, float]:
        await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
        cpu0, own0, all0 = cpu_seconds(server.pid), time.process_time(), machine_busy_seconds()
        await asyncio.sleep(max(0.0, window_end - time.perf_counter()))
        cpu, own = cpu_seconds(server.pid) - cpu0, time.process_time() - own0
        return cpu, own, machine_busy_seconds() - all0 - cpu - own

    try:
        metering = asyncio.ensure_future(meter())
        await asyncio.gather(*(worker(i, c) for i, c in enumerate(connections)))
        server_cpu, client_cpu, other_cpu = await metering
    finally:
        for connection in connections:
            connection.close()

    inside = [r for r in results if window_start <= r[1] <= window_end]
    errors = [r[2] for r in results if r[2] is not None]
    failures = sum(r[2] is not None for r in inside)
    return Row(
        server=server.name,
        concurrency=concurrency,
        seconds=seconds,
        latencies=sorted(end - start for start, end, error in inside if error is None),
        failures=failures,
        failures_outside=len(errors) - failures,
        first_error=errors[0] if errors else None,
        server_cpu=server_cpu,
        client_cpu=client_cpu,
        other_cpu=max(0.0, other_cpu),
    )


def row_line(row: Row) -> str:
    if row.latencies:
        p50, p99, worst = (percentile(row.latencies, q) for q in (0.5, 0.99, 1.0))
        timing = f"{fmt_time(p50):>9} {fmt_time(p99):>9} {fmt_time(worst):>9}"
        per_flow = fmt_time(row.server_cpu / len(row.latencies))
    else:
        timing, per_flow = f"{'-':>9} {'-':>9} {'-':>9}", "-"
    failed = f"{row.failures}" + (f" (+{row.failures_outside})" if row.failures_outside else "")
    server, client, other = (x / row.seconds for x in (row.server_cpu, row.client_cpu, row.other_cpu))
    return (
        f"{row.server:<8}{row.concurrency:>5} {len(row.latencies):>7,} {row.rate:>9,.1f} {timing}"
        f" {failed:>9} {per_flow:>10} {server:>6.0%} {client:>6.0%} {other:>6.0%}"
    )


async def bench_http(
    report: Report,
    concurrencies: Sequence[int],
    seconds: float,
    warmup: float,
    ledger: str,
    floor: float | None = None,
) -> None:
    status("http: starting both servers (uvicorn subprocesses)")
    with Servers(ledger) as servers:
        report.line(
            f"http: full approval flows (POST message -> approval request; POST approval -> tool output,"
            f" text, [DONE]), {warmup:g} s warm-up then {seconds:g} s measured per row"
        )
        report.line(
            f"  signoff: `signoff demo` at {servers.signoff.url}, ledger {servers.ledger}"
            f" (SQLite: durable approvals, audit chain and chat state; memory: the same in process)"
        )
        report.line(
            f"  peer:    pydantic-ai {version('pydantic-ai-slim')} VercelAIAdapter.dispatch_request"
            f"(sdk_version=6) at {servers.peer.url} (stateless: the client carries the history)"
        )
        report.line(
            "  both: one uvicorn worker (asyncio, h11), the scripted model, the demo's tools; load from this"
            " process over raw keep-alive sockets (one per worker, requests built as bytes), a chat per flow"
        )
        report.line(
            f"  {os.cpu_count()} CPUs shared by both servers and the load generator, nothing pinned; the idle"
            " server keeps running while the other is measured; rows alternate servers"
        )
        report.line()
        report.line(
            f"{'server':<8}{'conc':>5} {'flows':>7} {'flows/s':>9} {'p50':>9} {'p99':>9} {'max':>9}"
            f" {'failures':>9} {'CPU/flow':>10} {'server':>6} {'client':>6} {'other':>6}"
        )
        rows: dict[tuple[str, int], Row] = {}
        for concurrency in concurrencies:
            for name in SERVERS:
                status(f"http: {name} at concurrency {concurrency}, {warmup:g} s + {seconds:g} s")
                row = await run_load(servers.get(name), concurrency, warmup, seconds)
                rows[name, concurrency] = row
                report.line(row_line(row))
        report.line(
            "  flows/s and latency count flows completed inside the window; failures in brackets happened"
            " during warm-up or drain."
        )
        report.line(
            "  CPU/flow = server process CPU (all threads) in the window / flows. server, client, other = CPU"
            " over the window (100% = one core) of the server, the load generator, and everything else"
            " on the machine (the idle server included): a large `other` means the row is disturbed."
        )
        errors = [(r.server, r.concurrency, r.first_error) for r in rows.values() if r.first_error]
        for name, concurrency, error in errors:
            report.line(f"  first failure, {name} at {concurrency}: {error}")
        judge(report, rows, floor, GOAL_RATIO.get(ledger, GOAL_RATIO["sqlite"]))


def judge(report: Report, rows: dict[tuple[str, int], Row], floor: float | None, goal: float) -> None:
    """The issue's goal at concurrency 16: at least `goal` times the peer's flows/s, and a lower p99.

    Two context lines follow, because flows/s on a shared 2-core machine move with whatever else runs:
    the ratio of CPU per flow (what the flows/s ratio would be if each server had a core to itself), and,
    when the floor was measured, the most signoff could reach if its own work cost nothing at all.
    """
    ours, theirs = rows.get(("signoff", GOAL_CONCURRENCY)), rows.get(("peer", GOAL_CONCURRENCY))
    report.line()
    if ours is None or theirs is None:
        report.line(f"goal: judged at concurrency {GOAL_CONCURRENCY}, which this run did not measure")
        return
    if not ours.latencies or not theirs.latencies:
        report.line(f"goal: no successful flows at concurrency {GOAL_CONCURRENCY}; nothing to compare")
        return
    ratio = ours.rate / theirs.rate
    report.judge(
        f"flows/s at {GOAL_CONCURRENCY}",
        f"signoff {ours.rate:,.1f}/s, peer {theirs.rate:,.1f}/s: {ratio:.2f}x",
        f">= {goal:g}x the peer",
        ratio >= goal and ours.failures == 0,
    )
    p99_ours, p99_theirs = percentile(ours.latencies, 0.99), percentile(theirs.latencies, 0.99)
    report.judge(
        f"p99 at {GOAL_CONCURRENCY}",
        f"signoff {fmt_time(p99_ours)}, peer {fmt_time(p99_theirs)}",
        "lower than the peer",
        p99_ours < p99_theirs and ours.failures == 0,
    )
    cpu_ours, cpu_theirs = ours.server_cpu / len(ours.latencies), theirs.server_cpu / len(theirs.latencies)
    report.line(
        f"  context: server CPU per flow at {GOAL_CONCURRENCY}: signoff {fmt_time(cpu_ours)}, peer"
        f" {fmt_time(cpu_theirs)}; peer/signoff = {cpu_theirs / cpu_ours:.2f}x (the flows/s ratio with a"
        " core each)"
    )
    if floor is not None:
        report.line(
            f"  context: pydantic-ai's own agent runs cost {fmt_time(floor)} per flow (floor above), so even"
            f" if signoff's own work cost nothing it could reach about {cpu_theirs / floor:.2f}x the peer"
        )


# -- floor: the same flow in one process, without HTTP ------------------------------------------------------


async def final_result(events: AsyncIterator[Any]) -> AgentRunResult[Any]:
    result = None
    async for event in events:
        if isinstance(event, AgentRunResultEvent):
            result = event.result
    if result is None:
        raise FlowFailed("the agent run ended without a result")
    return result


async def bare_flow(agent: PeerAgent) -> None:
    """A flow's two agent runs and nothing else: the pydantic-ai work both servers pay per flow."""
    async with agent.run_stream_events(PROMPT) as events:
        asked = await final_result(events)
    if not isinstance(asked.output, DeferredToolRequests) or not asked.output.approvals:
        raise FlowFailed(f"run 1 did not end waiting for approval: {asked.output!r}")
    approved = DeferredToolResults(
        approvals=dict.fromkeys((c.tool_call_id for c in asked.output.approvals), True)
    )
    history = asked.all_messages()
    async with agent.run_stream_events(message_history=history, deferred_tool_results=approved) as events:
        answered = await final_result(events)
    if not str(answered.output).startswith(EXPECTED_TEXT):
        raise FlowFailed(f"run 2 replied {answered.output!r}")


BENCH_USER = Principal(id="browser:bench", via="session")
"""Who sends the floor's requests: one browser, as the server's default auth would name it."""


async def signoff_reply(chat: AgentChat, body: bytes) -> list[protocol.Chunk]:
    """One request as the server handles it (parse, prepare, run, encode each chunk), minus HTTP and SSE."""
    reply = await chat.prepare(parse_chat_request(body), "deferred", BENCH_USER)
    chunks: list[protocol.Chunk] = []

    def push(chunk: protocol.Chunk) -> None:
        frame(encode(chunk))
        chunks.append(chunk)

    await reply.run(push)
    return chunks


async def signoff_flow(chat: AgentChat, chat_id: str) -> None:
    """The same two requests as `one_flow`, handed straight to signoff's chat, checked the same way."""
    user_message = {"id": new_id(), "role": "user", "parts": [{"type": "text", "text": PROMPT}]}
    asked = await signoff_reply(chat, submit_body(chat_id, user_message))
    start = next(c for c in asked if isinstance(c, protocol.Start))
    call = next(c for c in asked if isinstance(c, protocol.ToolInputAvailable))
    request = next(c for c in asked if isinstance(c, protocol.ToolApprovalRequest))
    wire_call = {"toolCallId": call.tool_call_id, "input": call.input}
    body = approval_body(chat_id, user_message, start.message_id or "", wire_call, request.approval_id)
    answered = await signoff_reply(chat, body)
    outputs = [c for c in answered if isinstance(c, protocol.ToolOutputAvailable)]
    if not outputs or not outputs[0].output.get("success"):
        raise FlowFailed(f"request 2: the payment did not run: {answered}")


async def peer_reply(agent: PeerAgent, body: bytes) -> list[vercel.BaseChunk]:
    """One request as `dispatch_request` handles it (validate, load messages, run, encode), minus HTTP."""
    run_input = VercelAIAdapter.build_run_input(body)
    adapter = VercelAIAdapter(agent=agent, run_input=run_input, sdk_version=6)
    chunks = []
    async for chunk in adapter.run_stream():
        vercel_event(chunk)
        chunks.append(chunk)
    return chunks


async def peer_flow(agent: PeerAgent, chat_id: str) -> None:
    """The same two requests handed straight to pydantic-ai's adapter, checked the same way."""
    user_message = {"id": new_id(), "role": "user", "parts": [{"type": "text", "text": PROMPT}]}
    asked = await peer_reply(agent, submit_body(chat_id, user_message))
    call = next(c for c in asked if isinstance(c, vercel.ToolInputAvailableChunk))
    request = next(c for c in asked if isinstance(c, vercel.ToolApprovalRequestChunk))
    wire_call = {"toolCallId": call.tool_call_id, "input": call.input}
    body = approval_body(chat_id, user_message, new_id(), wire_call, request.approval_id)
    answered = await peer_reply(agent, body)
    outputs = [c for c in answered if isinstance(c, vercel.ToolOutputAvailableChunk)]
    if not outputs or not outputs[0].output.get("success"):
        raise FlowFailed(f"request 2: the payment did not run: {answered}")


def numbered_flow(chat: AgentChat, prefix: str, n: int) -> Awaitable[None]:
    return signoff_flow(chat, f"floor-{prefix}-{n}")


async def cpu_per_flow(flows: dict[str, Callable[[int], Awaitable[None]]], count: int) -> dict[str, float]:
    """CPU seconds per flow of this process for each of `flows`, after FLOOR_WARMUP flows each that are not
    counted: the median of FLOOR_ROUNDS rounds, each running every flow in turn, so that the machine's
    drift over a run (clock speed, neighbours) falls on every line alike instead of on the last one."""
    for flow in flows.values():
        for n in range(FLOOR_WARMUP):
            await flow(-1 - n)
    per_round = max(1, count // FLOOR_ROUNDS)
    rounds: dict[str, list[float]] = {name: [] for name in flows}
    for r in range(FLOOR_ROUNDS):
        for name, flow in flows.items():
            start = time.process_time()
            for n in range(per_round):
                await flow(r * per_round + n)
            rounds[name].append((time.process_time() - start) / per_round)
    return {name: statistics.median(costs) for name, costs in rounds.items()}


async def bench_floor(report: Report, count: int) -> float:
    """What a flow costs without HTTP, so the HTTP figures can be read against what cannot be avoided.

    Returns the pydantic-ai floor (CPU seconds per flow), which bounds the ratio signoff can reach.
    """
    status(f"floor: {count:,} flows per line in this process, no HTTP")
    agent = peer_agent()
    flows: dict[str, Callable[[int], Awaitable[None]]] = {
        "bare": lambda n: bare_flow(agent),
        "adapter": lambda n: peer_flow(agent, f"floor-{new_id()}"),
    }
    with tempfile.TemporaryDirectory(prefix="signoff-flows-") as where:
        async with contextlib.AsyncExitStack() as stack:
            for name, url in (("memory", "memory://"), ("SQLite", f"sqlite:///{Path(where) / 'floor.db'}")):
                ledger = await stack.enter_async_context(open_ledger(url))
                chat = AgentChat(demo_agent(), Gate(ledger, demo_policy(), actor="signoff:server"))
                flows[name] = partial(numbered_flow, chat, secrets.token_hex(4))
            costs = await cpu_per_flow(flows, count)
    bare, adapter = costs.pop("bare"), costs.pop("adapter")
    report.line(
        f"floor: CPU per flow in one process, no HTTP, one flow at a time ({count:,} flows per line after"
        f" {FLOOR_WARMUP} warm-up; the median of {FLOOR_ROUNDS} interleaved rounds)"
    )
    report.line(
        f"  {'pydantic-ai agent alone':<34}{fmt_time(bare):>10}  the peer's agent, run_stream_events twice:"
        " both servers pay this"
    )
    report.line(
        f"  {'pydantic-ai VercelAIAdapter':<34}{fmt_time(adapter):>10}  +{fmt_time(adapter - bare)}: the peer"
        " without HTTP: validating and loading the client's messages, event stream, encoding"
    )
    memory, sqlite = costs["memory"], costs["SQLite"]
    report.line(
        f"  {'signoff AgentChat, memory ledger':<34}{fmt_time(memory):>10}  +{fmt_time(memory - bare)}:"
        " request parsing and checks, gate, per-run capability, translator, chat state, encoding"
    )
    report.line(
        f"  {'signoff AgentChat, SQLite ledger':<34}{fmt_time(sqlite):>10}  +{fmt_time(sqlite - memory)}:"
        " the ledger's transactions and reads"
    )
    for name, cost in costs.items():
        above = cost - bare
        report.judge(
            f"floor, {name} ledger",
            f"{fmt_time(above)} per flow above the agent alone (peer's adapter: {fmt_time(adapter - bare)})",
            f"<= {fmt_time(GOAL_FLOOR[name])}",
            above <= GOAL_FLOOR[name],
        )
    return bare


# -- counts: what one flow makes signoff do ----------------------------------------------------------------


def _counted(counts: Counter[str], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return await fn(*args, **kwargs)

        return counted_async

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[name] += 1
        return fn(*args, **kwargs)

    return counted


class _CountedAdapter:
    """`ModelMessagesTypeAdapter` as the pydantic-ai chat sees it, counting whole-history parses and dumps."""

    def __init__(self, counts: Counter[str]) -> None:
        self.validate_json = _counted(
            counts, "history parses (pydantic)", ModelMessagesTypeAdapter.validate_json
        )
        self.dump_json = _counted(counts, "messages dumped (pydantic)", ModelMessagesTypeAdapter.dump_json)


OPERATIONS = "SQLite ledger operations"
THREAD_HOPS = "SQLite operations on its thread"
GOAL_HOPS = 0.1
"""Round trips to the SQLite ledger's thread per flow: only a checkpoint or another process's write lock
may send an operation there."""

COUNTED: list[tuple[object, str, str]] = [
    (SqliteBackend, "run", OPERATIONS),
    (SqliteBackend, "_submit", THREAD_HOPS),
    (SqliteBackend, "transact", "ledger write transactions"),
    (MemoryBackend, "transact", "ledger write transactions"),
    (Chats, "save", "chat-state saves"),
    (Chats, "log_replies", "reply-log writes"),
    (pydantic_chat, "open_calls", "open-call scans (msgspec)"),
    (SignoffToolset, "__init__", "toolset wrappers built"),
    (Signoff, "__init__", "capabilities built"),
]
"""What the counts line counts, and where: bench-only wrappers around the product's own functions."""


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Counts calls to `COUNTED`, whole-history parses and the asyncio tasks created, while it is open."""
    counts: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()

    def task(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        counts["asyncio tasks created"] += 1
        return factory(loop, coro, **kwargs) if factory else asyncio.Task(coro, loop=loop, **kwargs)

    with contextlib.ExitStack() as stack:
        for owner, attribute, name in COUNTED:
            wrapped = _counted(counts, name, getattr(owner, attribute))
            stack.enter_context(mock.patch.object(owner, attribute, wrapped))
        stack.enter_context(
            mock.patch.object(pydantic_chat, "ModelMessagesTypeAdapter", _CountedAdapter(counts))
        )
        loop.set_task_factory(task)
        stack.callback(loop.set_task_factory, factory)
        yield counts


async def bench_counts(report: Report, flows: int) -> None:
    """The real server in this process (uvicorn, the demo's app, SSE), one flow at a time, with `COUNTED`
    counted: what each approval flow makes signoff do, per ledger."""
    status(f"counts: {flows} flows per ledger through the real server, in this process")
    report.line(
        f"counts: per approval flow (2 requests), the demo's server in this process over HTTP, one flow at a"
        f" time, {flows} flows after {FLOOR_WARMUP} warm-up"
    )
    per_ledger: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="signoff-flows-") as where:
        for name, url in (("memory", "memory://"), ("SQLite", f"sqlite:///{Path(where) / 'counts.db'}")):
            async with open_ledger(url) as ledger:
                app = create_app(
                    demo_agent(), ledger, Settings(token="bench", anonymous=True), policy=demo_policy()
                )
                server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
                serving = asyncio.ensure_future(server.serve())
                while not server.started:  # noqa: ASYNC110 - uvicorn has a flag, not an event
                    await asyncio.sleep(0.01)
                port = server.servers[0].sockets[0].getsockname()[1]
                connection = await Connection.open(f"http://127.0.0.1:{port}")
                prefix = secrets.token_hex(4)
                for n in range(FLOOR_WARMUP):
                    await one_flow(connection, f"warm-{prefix}-{n}")
                with counting() as counts:
                    for n in range(flows):
                        await one_flow(connection, f"count-{prefix}-{n}")
                per_ledger[name] = counts
                connection.close()
                server.should_exit = True
                await serving
    counted = {name for _, _, name in COUNTED}
    names = sorted(counted | {key for counts in per_ledger.values() for key in counts})
    report.line(f"  {'per flow':<34}{'memory':>10}{'SQLite':>10}")
    for key in names:
        memory, sqlite = (per_ledger[ledger][key] / flows for ledger in ("memory", "SQLite"))
        report.line(f"  {key:<34}{memory:>10.2f}{sqlite:>10.2f}")
    hops = per_ledger["SQLite"][THREAD_HOPS] / flows
    report.judge(
        "ledger round trips",
        f"{hops:.2f} to the SQLite ledger's thread; {per_ledger['SQLite'][OPERATIONS] / flows:.1f} operations"
        " run inline on the loop",
        f"<= {GOAL_HOPS}",
        hops <= GOAL_HOPS,
    )


# -- growth: the K-th flow in one chat ----------------------------------------------------------------------


GROWTH_FLOWS = 50
GROWTH_PROMPT = "pay 5 USD to Hanako"  # the wallet holds 1,000 USD: 50 payments of 5 fit
COUNT_FLOWS = 100
GROWTH_EDGE = 5
GROWTH_SERIES = 7
"""Flows averaged at each end: the first `GROWTH_EDGE` against the last."""


def done_turn(
    user_message: dict[str, Any],
    assistant_id: str,
    call: dict[str, Any],
    approval_id: str,
    output: Any,
    text: str,
) -> list[dict[str, Any]]:
    """A finished flow as the AI SDK client keeps it: the user's message and the assistant's, its
    payment part answered and run, then the reply's text."""
    assistant = {
        "id": assistant_id,
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-process_payment", "toolCallId": call["toolCallId"], "state": "output-available",
                "input": call["input"], "output": output, "approval": {"id": approval_id, "approved": True},
            },
            {"type": "step-start"},
            {"type": "text", "text": text, "state": "done"},
        ],
    }  # fmt: skip
    return [user_message, assistant]


def body_of(chat_id: str, messages: list[dict[str, Any]], message_id: str | None = None) -> bytes:
    body: dict[str, Any] = {"id": chat_id, "messages": messages, "trigger": "submit-message"}
    if message_id:
        body["messageId"] = message_id
    return json.dumps(body, separators=SSE_SEPARATOR).encode()


Reply = Callable[[bytes], Awaitable[list[dict[str, Any]]]]


class Served:
    """A server's reply function, timed: only the server's own CPU counts, not the client's work of
    encoding the growing conversation into each body and parsing the chunks back."""

    def __init__(self, serve: Callable[[bytes], Awaitable[Sequence[Any]]]) -> None:
        self.serve = serve
        self.cpu = 0.0

    async def __call__(self, body: bytes) -> list[dict[str, Any]]:
        start = time.process_time()
        chunks = await self.serve(body)
        self.cpu += time.process_time() - start
        return plain(chunks)


async def growing_flow(reply: Reply, chat_id: str, history: list[dict[str, Any]]) -> None:
    """One more approved payment in a chat whose client holds `history`, which grows by the flow."""
    user_message = {"id": new_id(), "role": "user", "parts": [{"type": "text", "text": GROWTH_PROMPT}]}
    asked = await reply(body_of(chat_id, [*history, user_message]))
    assistant_id = first(asked, "start", "request 1").get("messageId") or new_id()
    call = first(asked, "tool-input-available", "request 1")
    approval_id = first(asked, "tool-approval-request", "request 1")["approvalId"]
    pending = done_turn(user_message, assistant_id, call, approval_id, None, "")
    pending[1]["parts"][1] = {**pending[1]["parts"][1], "state": "approval-responded", "output": None}
    del pending[1]["parts"][2:], pending[1]["parts"][1]["output"]
    answered = await reply(body_of(chat_id, [*history, *pending], assistant_id))
    output = first(answered, "tool-output-available", "request 2")["output"]
    if not (output or {}).get("success"):
        raise FlowFailed(f"request 2: the payment did not run: {output}")
    text = "".join(c.get("delta", "") for c in answered if c.get("type") == "text-delta")
    history += done_turn(user_message, assistant_id, call, approval_id, output, text)


def plain(chunks: Sequence[Any]) -> list[dict[str, Any]]:
    """Either server's chunks as the client reads them (the peer's `[DONE]` is a chunk of its own)."""
    wire = [encode(c) if isinstance(c, protocol.Chunk) else c.encode(6) for c in chunks]
    return [json.loads(text) for text in wire if text != "[DONE]"]


Step = Callable[[], Awaitable[float]]
"""The next flow of one growing conversation: its server's CPU seconds."""


def chat_steps(reply: Served) -> Step:
    """Flows in one new chat, the client holding its whole conversation."""
    chat_id, history = f"growth-{new_id()}", []

    async def step() -> float:
        before = reply.cpu
        await growing_flow(reply, chat_id, history)
        return reply.cpu - before

    return step


def agent_steps(agent: PeerAgent) -> Step:
    """Two agent runs per flow in one conversation: what the model and pydantic-ai's loop cost as the
    history grows, for every server."""
    history: list[Any] = []

    async def step() -> float:
        nonlocal history
        start = time.process_time()
        async with agent.run_stream_events(GROWTH_PROMPT, message_history=history) as events:
            asked = await final_result(events)
        assert isinstance(asked.output, DeferredToolRequests)
        approved = DeferredToolResults(
            approvals=dict.fromkeys((c.tool_call_id for c in asked.output.approvals), True)
        )
        async with agent.run_stream_events(
            message_history=asked.all_messages(), deferred_tool_results=approved
        ) as events:
            history = (await final_result(events)).all_messages()
        return time.process_time() - start

    return step


async def bench_growth(report: Report, count: int) -> None:
    """The K-th approval flow in one chat against the first: the client sends the whole conversation every
    time; the peer re-validates it all, signoff holds it. The agent alone grows too (the model reads the
    whole history), so each server's own work is its cost above the agent alone's, flow by flow.

    The lines run in lockstep (flow K of every line, then flow K+1), in GROWTH_SERIES new conversations
    each, and each flow's figure is the least over the series: a figure that is a small difference of
    two large ones must carry neither the machine's drift between one line's run and the next nor a
    stray interruption (which only ever adds CPU time, so the least is the flow's own cost)."""
    status(f"growth: {count} flows in one chat, per server, {GROWTH_SERIES} series in lockstep")
    agent = peer_agent()
    peer = Served(partial(peer_reply, agent))
    lines: dict[str, Callable[[], Step]] = {
        "pydantic-ai agent alone": partial(agent_steps, agent),
        "pydantic-ai VercelAIAdapter": partial(chat_steps, peer),
    }
    with tempfile.TemporaryDirectory(prefix="signoff-flows-") as where:
        async with contextlib.AsyncExitStack() as stack:
            for name, url in (("memory", "memory://"), ("SQLite", f"sqlite:///{Path(where) / 'growth.db'}")):
                ledger = await stack.enter_async_context(open_ledger(url))
                chat = AgentChat(demo_agent(), Gate(ledger, demo_policy(), actor="signoff:server"))
                served = Served(partial(signoff_reply, chat))
                lines[f"signoff AgentChat, {name} ledger"] = partial(chat_steps, served)
            for new in lines.values():  # warm caches before any line is measured
                warm = new()
                for _ in range(FLOOR_WARMUP):
                    await warm()
            flows: dict[str, list[list[float]]] = {name: [[] for _ in range(count)] for name in lines}
            for _ in range(GROWTH_SERIES):
                steps = {name: new() for name, new in lines.items()}
                for k in range(count):
                    for name, step in steps.items():
                        flows[name][k].append(await step())
    costs = {name: [min(series) for series in per_flow] for name, per_flow in flows.items()}
    edge = min(GROWTH_EDGE, count // 2)
    report.line(
        f"growth: CPU per flow in one chat, in this process, no HTTP: flows 1-{edge} against flows"
        f" {count - edge + 1}-{count} (the client sends the whole conversation each time; only the server's"
        f" CPU counts, not the client's encoding of it), each flow the least of {GROWTH_SERIES} chats,"
        f" the lines in lockstep, after {FLOOR_WARMUP} warm-up flows; `own` = above the agent alone"
    )
    report.line(f"  {'':<34}{'first':>10}{'last':>10}{'last/first':>12}{'own first':>11}{'own last':>10}")
    bare = costs["pydantic-ai agent alone"]
    base_early, base_late = sum(bare[:edge]) / edge, sum(bare[-edge:]) / edge
    for name, line in costs.items():
        early, late = sum(line[:edge]) / edge, sum(line[-edge:]) / edge
        own = "" if line is bare else f"{fmt_time(early - base_early):>11}{fmt_time(late - base_late):>10}"
        report.line(f"  {name:<34}{fmt_time(early):>10}{fmt_time(late):>10}{late / early:>11.2f}x{own}")
    ours = costs["signoff AgentChat, SQLite ledger"]
    own_early, own_late = sum(ours[:edge]) / edge - base_early, sum(ours[-edge:]) / edge - base_late
    report.judge(
        f"the {count}th flow in one chat",
        f"signoff's own work {fmt_time(own_late)} against {fmt_time(own_early)} (SQLite ledger)",
        "within 20 % of the first",
        own_late <= 1.2 * own_early,
    )


# -- chunk encoding -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One chunk three ways: signoff's typed chunk, the same chunk as a plain dict, pydantic-ai's model."""

    name: str
    chunk: Any
    plain: dict[str, Any]
    peer: Any


def samples() -> list[Sample]:
    """The chunks of a real flow, with the demo's ids and a payment's input and output."""
    message_id, call_id = "msg_W1Ng46EGYQY-7Nho", "call_cfb57ae7efa12980"
    approval_id = "apr_f3VF057TEt2zS-3BT0sI1YuRifg"
    args = {"amount": 50, "currency": "USD", "recipient": "Hanako"}
    result = {"success": True, "transaction_id": "txn_66369de1e736", **args, "balance": 950}
    pairs: list[tuple[str, Any, Any]] = [
        ("start", protocol.Start(message_id=message_id), vercel.StartChunk(message_id=message_id)),
        ("start-step", protocol.StartStep(), vercel.StartStepChunk()),
        (
            "text-delta",
            protocol.TextDelta(id=f"{message_id}-1", delta=" Hanako;"),
            vercel.TextDeltaChunk(id=f"{message_id}-1", delta=" Hanako;"),
        ),
        (
            "tool-input-available",
            protocol.ToolInputAvailable(tool_call_id=call_id, tool_name="process_payment", input=args),
            vercel.ToolInputAvailableChunk(tool_call_id=call_id, tool_name="process_payment", input=args),
        ),
        (
            "tool-approval-request",
            protocol.ToolApprovalRequest(approval_id=approval_id, tool_call_id=call_id),
            vercel.ToolApprovalRequestChunk(approval_id=approval_id, tool_call_id=call_id),
        ),
        (
            "tool-output-available",
            protocol.ToolOutputAvailable(tool_call_id=call_id, output=result),
            vercel.ToolOutputAvailableChunk(tool_call_id=call_id, output=result),
        ),
        ("finish-step", protocol.FinishStep(), vercel.FinishStepChunk()),
        ("finish", protocol.Finish(finish_reason="stop"), vercel.FinishChunk(finish_reason="stop")),
    ]
    # The plain dict is what signoff puts on the wire, decoded: the same keys in the same order.
    return [Sample(name, chunk, json.loads(protocol.encode(chunk)), other) for name, chunk, other in pairs]


def signoff_event(chunk: protocol.Chunk) -> bytes:
    return frame(encode(chunk))


def dumps_event(plain: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(plain, separators=SSE_SEPARATOR).encode() + b"\n\n"


def vercel_event(chunk: vercel.BaseChunk) -> bytes:
    """What the peer puts on the wire: `VercelAIEventStream.encode_event`, then Starlette's UTF-8 encoding."""
    return f"data: {chunk.encode(6)}\n\n".encode()


def per_call(fn: Callable[[], bytes], iterations: int) -> float:
    """Seconds per call, best of ENCODE_REPEATS rounds: the least disturbed round is the encoder's cost."""
    return min(timeit.repeat(fn, number=iterations, repeat=ENCODE_REPEATS)) / iterations


def bench_encode(report: Report, iterations: int) -> None:
    status(f"encode: 8 chunks x 3 encoders x {ENCODE_REPEATS} rounds of {iterations:,}")
    report.line(
        "encode: one SSE event per chunk, `frame(encode(chunk))` vs"
        ' `b"data: " + json.dumps(d, separators=(",", ":")).encode() + b"\\n\\n"` on the same dict'
    )
    report.line(
        f"  best of {ENCODE_REPEATS} rounds of {iterations:,} calls per chunk; pydantic-ai's"
        ' `f"data: {chunk.encode(6)}\\n\\n".encode()` (what the peer sends) for context'
    )
    report.line(
        f"{'chunk':<23}{'bytes':>6} {'signoff':>10} {'json.dumps':>11} {'ratio':>6}"
        f" {'pydantic-ai':>12} {'bytes':>6}"
    )
    totals = [0.0, 0.0, 0.0]
    sizes = [0, 0]
    for s in samples():
        ours, dumped, theirs = signoff_event(s.chunk), dumps_event(s.plain), vercel_event(s.peer)
        if ours != dumped:
            raise RuntimeError(f"{s.name}: signoff wrote {ours!r}, json.dumps {dumped!r}")
        times = (
            per_call(partial(signoff_event, s.chunk), iterations),
            per_call(partial(dumps_event, s.plain), iterations),
            per_call(partial(vercel_event, s.peer), iterations),
        )
        totals = [t + x for t, x in zip(totals, times, strict=True)]
        sizes = [sizes[0] + len(ours), sizes[1] + len(theirs)]
        report.line(
            f"{s.name:<23}{len(ours):>6} {fmt_time(times[0]):>10} {fmt_time(times[1]):>11}"
            f" {times[1] / times[0]:>5.1f}x {fmt_time(times[2]):>12} {len(theirs):>6}"
        )
    n = len(samples())
    report.line(
        f"{'mean per chunk':<23}{sizes[0] / n:>6.0f} {fmt_time(totals[0] / n):>10}"
        f" {fmt_time(totals[1] / n):>11} {totals[1] / totals[0]:>5.1f}x {fmt_time(totals[2] / n):>12}"
        f" {sizes[1] / n:>6.0f}"
    )
    report.line(
        "  signoff's bytes equal json.dumps's byte for byte (checked); ratio = json.dumps time / signoff time"
    )


# -- driver -------------------------------------------------------------------------------------------------


def header(report: Report) -> None:
    report.line(
        f"signoff flow benchmarks: Python {platform.python_version()}, {os.cpu_count()} CPUs,"
        f" pydantic-ai {version('pydantic-ai-slim')}, uvicorn {version('uvicorn')},"
        f" starlette {version('starlette')}, msgspec {version('msgspec')}"
    )
    report.line(f"machine yardstick at start: {fmt_time(yardstick())} per unit (lower is faster)")


def concurrency_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be whole numbers separated by commas, not {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("must be one or more whole numbers of at least 1")
    return values


def ledger_choice(text: str) -> str:
    if text in ("sqlite", "memory") or text.startswith(("sqlite://", "memory://")):
        return text
    raise argparse.ArgumentTypeError("must be sqlite, memory, or a ledger URL (sqlite:///path, memory://)")


def stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends the run like Ctrl-C does, so the servers and the temporary directory are cleaned up."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark full approval flows over HTTP: signoff beside pydantic-ai's VercelAIAdapter.",
        epilog="Figures go to stdout, progress to stderr. See bench/README.md.",
    )
    commands = parser.add_subparsers(dest="command")
    every = commands.add_parser("all", help="encode, floor, then http (the default command)")
    http = commands.add_parser("http", help="flows per second and latency over real HTTP")
    for sub in (every, http):
        sub.add_argument(
            "--concurrency",
            type=concurrency_list,
            default=list(DEFAULT_CONCURRENCY),
            metavar="N,N,...",
            help="concurrent clients per row (default: 1,16,64)",
        )
        sub.add_argument(
            "--seconds", type=float, default=DEFAULT_SECONDS, help="measured seconds per row (default 10)"
        )
        sub.add_argument(
            "--warmup", type=float, default=DEFAULT_WARMUP, help="warm-up seconds per row (default 2)"
        )
        sub.add_argument(
            "--ledger",
            type=ledger_choice,
            default="sqlite",
            help="signoff's ledger: sqlite (a new file in a temporary directory; default), memory, or a URL",
        )
    for sub in (every, commands.add_parser("floor", help="CPU per flow in one process, without HTTP")):
        sub.add_argument(
            "--flows",
            type=int,
            default=FLOOR_FLOWS,
            help=f"flows per floor line, after {FLOOR_WARMUP} warm-up flows (default {FLOOR_FLOWS})",
        )
    counts = commands.add_parser("counts", help="what one flow makes signoff do: transactions, saves, parses")
    for sub in (every, counts):
        sub.add_argument("--count-flows", type=int, default=COUNT_FLOWS, help="flows counted per ledger")
    growth = commands.add_parser("growth", help="the K-th flow in one chat against the first")
    for sub in (every, growth):
        sub.add_argument("--growth-flows", type=int, default=GROWTH_FLOWS, help="flows in the one chat")
    for sub in (every, commands.add_parser("encode", help="bytes and time per encoded SSE chunk")):
        sub.add_argument(
            "--iterations",
            type=int,
            default=ENCODE_ITERATIONS,
            help=f"calls per chunk and encoder in each round (default {ENCODE_ITERATIONS:,})",
        )
    graph = commands.add_parser("langgraph", help="LangChain v1: signoff's middleware against its own HITL")
    graph.add_argument("--flows", type=int, default=300, help="payments timed per stack (default 300)")
    sdk = commands.add_parser("openai-agents", help="OpenAI Agents SDK: signoff's gate against its own HITL")
    sdk.add_argument("--flows", type=int, default=300, help="payments timed per stack (default 300)")
    peer = commands.add_parser("peer-server", help="internal: serve the peer (pydantic-ai's adapter)")
    peer.add_argument("--host", default="127.0.0.1")
    peer.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["all", *(argv if argv is not None else sys.argv[1:])])
    signal.signal(signal.SIGTERM, stop)

    if args.command == "langgraph":  # its own module: the langchain extra is optional
        from langgraph_flows import main as langgraph_main

        return langgraph_main(args.flows)
    if args.command == "openai-agents":  # its own module: the openai-agents extra is optional
        from openai_agents_flows import main as openai_agents_main

        return openai_agents_main(args.flows)
    if args.command == "peer-server":
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_peer(args.host, args.port))
        return 0
    if getattr(args, "seconds", 1.0) <= 0 or getattr(args, "warmup", 0.0) < 0:
        parser.error("--seconds must be more than 0 and --warmup at least 0")
    if min(getattr(args, name, 2) for name in ("iterations", "flows", "count_flows", "growth_flows")) < 1:
        parser.error("--iterations, --flows, --count-flows and --growth-flows must be at least 1")

    report = Report(noun="goal")
    header(report)
    if args.command in ("encode", "all"):
        report.line()
        bench_encode(report, args.iterations)
    floor = None
    if args.command in ("floor", "all"):
        report.line()
        floor = asyncio.run(bench_floor(report, args.flows))
    if args.command in ("counts", "all"):
        report.line()
        asyncio.run(bench_counts(report, args.count_flows))
    if args.command in ("growth", "all"):
        report.line()
        asyncio.run(bench_growth(report, args.growth_flows))
    if args.command in ("http", "all"):
        report.line()
        asyncio.run(bench_http(report, args.concurrency, args.seconds, args.warmup, args.ledger, floor))
    report.summary()
    report.line(
        f"machine yardstick at end: {fmt_time(yardstick())} per unit (compare runs only at similar values)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
