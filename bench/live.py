"""The live transport and the ADK converter: how fast they go. Figures to stdout, progress to stderr.

    .venv/bin/python bench/live.py                 # both figures (about 30 s on 2 cores)
    .venv/bin/python bench/live.py converter --n 0.1
    .venv/bin/python bench/live.py roundtrip --runtime adk

- `converter`: ADK events through `signoff.integrations.adk.stream.AdkTranslator` and the chunk encoder, the
  way a reply streams them: a streamed text answer (one partial event per word, then the aggregate), a
  step of two calls with their results. Chunks out per second of CPU, one core.
- `roundtrip`: a real `signoff demo --runtime <r>` process (SQLite ledger) and a WebSocket client here.
  For each sample a new chat asks to pay; once the approval request arrives, the client takes `t0`, sends
  the approval on the socket, and takes `t1` when `tool-output-available` arrives. The figure is `t1 - t0`:
  the server's trust checks, the ledger's decision (a SQLite commit), the gate's wake-up, the single-use
  claim (another commit), the tool, and both socket hops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import websockets
from figures import Report, fmt_time, percentile, status, yardstick
from google.adk.events.event import Event
from google.genai import types

from signoff.integrations.adk.stream import AdkTranslator, End
from signoff.integrations.chat.turn import Discard, Turn
from signoff.protocol import encode

READY = re.compile(r"signoff demo: (http://127\.0\.0\.1:\d+)")


def reply_events(words: int) -> list[Any]:
    """One reply as ADK yields it: two calls and their results, then a streamed answer."""
    calls = [
        types.Part(
            function_call=types.FunctionCall(id=f"call_{i}", name="get_weather", args={"city": "Tokyo"})
        )
        for i in range(2)
    ]
    results = [
        types.Part(
            function_response=types.FunctionResponse(
                id=f"call_{i}", name="get_weather", response={"city": "Tokyo", "temperature_c": 20}
            )
        )
        for i in range(2)
    ]
    text = " ".join(["word"] * words)
    partials = [
        Event(
            author="agent",
            partial=True,
            content=types.Content(role="model", parts=[types.Part(text=" word")]),
        )
        for _ in range(words)
    ]
    final = Event(
        author="agent", partial=False, content=types.Content(role="model", parts=[types.Part(text=text)])
    )
    return [
        Event(author="agent", content=types.Content(role="model", parts=calls)),
        Event(author="agent", content=types.Content(role="user", parts=results)),
        *partials,
        final,
        End(),
    ]


def bench_converter(report: Report, scale: float) -> None:
    replies = max(10, int(2000 * scale))
    events = reply_events(50)
    status(f"converter: {replies} replies of {len(events)} events")
    chunks = 0
    start = time.process_time()
    for i in range(replies):
        translator = AdkTranslator(Turn(chat_id="bench", wait="deferred", sink=Discard()), f"msg_{i}")
        for event in events:
            for chunk in translator.feed(event):
                encode(chunk)
                chunks += 1
    spent = time.process_time() - start
    report.line(
        f"{'adk converter':<31}{chunks / spent:,.0f} chunks/s  ({chunks:,} chunks in {fmt_time(spent)} CPU)"
    )


async def one_round_trip(base: str, chat: str) -> float:
    async with websockets.connect(base.replace("http", "ws") + "/api/live") as socket:
        message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 1 USD to Hanako"}]}
        await socket.send(json.dumps({"type": "message", "id": chat, "messages": [message]}))
        chunks: list[dict[str, Any]] = []
        t0 = elapsed = math.nan
        async for raw in socket:
            if raw == "[DONE]":
                break
            chunk = json.loads(raw)
            chunks.append(chunk)
            if chunk["type"] == "tool-approval-request":
                call = next(c for c in chunks if c["type"] == "tool-input-available")
                part = {
                    "type": "tool-process_payment",
                    "toolCallId": call["toolCallId"],
                    "state": "approval-responded",
                    "input": call["input"],
                    "approval": {"id": chunk["approvalId"], "approved": True},
                }
                answer = {
                    "type": "message",
                    "id": chat,
                    "messages": [{"id": chunks[0]["messageId"], "role": "assistant", "parts": [part]}],
                }
                text = json.dumps(answer)
                t0 = time.perf_counter()
                await socket.send(text)
            elif chunk["type"] == "tool-output-available":
                elapsed = time.perf_counter() - t0
        return elapsed


async def bench_roundtrip(report: Report, runtime: str, scale: float) -> None:
    samples = max(10, int(300 * scale))
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        command = [
            str(Path(sys.executable).with_name("signoff")),
            "demo",
            "--port",
            "0",
            "--runtime",
            runtime,
        ]
        command += ["--ledger", f"sqlite:///{folder}/bench.db"]
        with out.open("wb") as sink:
            server = await asyncio.create_subprocess_exec(
                *command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"}
            )
        try:
            while not (ready := READY.search(out.read_text())):
                if server.returncode is not None:
                    raise SystemExit(f"signoff demo exited: {out.read_text()}")
                await asyncio.sleep(0.05)
            base = ready.group(1)
            status(f"roundtrip {runtime}: {samples} approvals over the live socket")
            for i in range(10):  # warm-up
                await one_round_trip(base, f"warm-{i}")
            times = sorted([await one_round_trip(base, f"chat-{i}") for i in range(samples)])
        finally:
            server.terminate()
            await server.wait()
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    name = f"live round trip {runtime}"
    spread = f"p50 {fmt_time(p50)}  p99 {fmt_time(p99)}  max {fmt_time(times[-1])}"
    report.line(f"{name:<31}{spread}  ({samples} approvals)")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", nargs="?", choices=["all", "converter", "roundtrip"], default="all")
    parser.add_argument("--runtime", choices=["pydantic-ai", "adk", "both"], default="both")
    parser.add_argument("--n", type=float, default=1.0, help="multiply every count (default 1)")
    args = parser.parse_args()
    report = Report()
    report.line(f"yardstick {fmt_time(yardstick())}")
    if args.what in ("all", "converter"):
        bench_converter(report, args.n)
    if args.what in ("all", "roundtrip"):
        for runtime in ("pydantic-ai", "adk") if args.runtime == "both" else (args.runtime,):
            await bench_roundtrip(report, runtime, args.n)
    report.line(f"yardstick {fmt_time(yardstick())}")


if __name__ == "__main__":
    asyncio.run(main())
