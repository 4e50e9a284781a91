"""Runs scenarios through the real Vercel AI SDK client (tests/js/chat.mjs) and returns its transcript.

The scenario and transcript schemas are documented at the top of tests/js/chat.mjs.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
JS_DIR = ROOT / "tests" / "js"
CHAT_MJS = JS_DIR / "chat.mjs"

# npm aliases in tests/js/package.json: the first 6.x release, the newest 6.x, the newest 7.x.
CLIENTS = ("ai-6.0.0", "ai-6", "ai-7")

IN_CI = os.environ.get("CI") == "true"

# Skip when node is missing on a developer machine; in CI a missing node must fail the run instead.
needs_node = pytest.mark.skipif(
    shutil.which("node") is None and not IN_CI,
    reason="node is not installed (the JS client tests need Node 20+; with CI=true this is a failure)",
)


class JsClientError(AssertionError):
    """The harness itself failed: install error, bad scenario, timeout, runaway re-POST loop."""


@functools.cache
def ensure_installed() -> None:
    """Installs the pinned clients once per test session (tests/js/install.sh is a no-op when up to date)."""
    if shutil.which("node") is None:
        raise JsClientError("node is not on PATH; the JS client tests need Node 20+")
    done = subprocess.run(
        ["bash", str(JS_DIR / "install.sh")], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise JsClientError(f"tests/js/install.sh failed:\n{done.stderr}{done.stdout}")


NODE = ["node", "--experimental-websocket", str(CHAT_MJS)]
"""Node 20 has the WebSocket global the live transport needs only behind this flag (Node 22 by default)."""


def run_scenario(scenario: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """Runs one scenario in a fresh node process and returns the parsed transcript."""
    ensure_installed()
    try:
        done = subprocess.run(
            NODE, input=json.dumps(scenario), capture_output=True, text=True, timeout=timeout, cwd=ROOT,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise JsClientError(
            f"chat.mjs did not finish within {timeout} s\n--- node stderr ---\n{stderr}"
        ) from exc
    return _transcript(scenario, done.returncode, done.stdout, done.stderr)


async def run_scenario_async(scenario: dict[str, Any], *, limit: float = 60) -> dict[str, Any]:
    """`run_scenario` for a test whose server runs in its own event loop, which must keep serving;
    fails after `limit` seconds."""
    ensure_installed()
    process = await asyncio.create_subprocess_exec(
        *NODE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )  # fmt: skip
    try:
        async with asyncio.timeout(limit):
            out, err = await process.communicate(json.dumps(scenario).encode())
    except TimeoutError:
        process.kill()
        raise JsClientError(f"chat.mjs did not finish within {limit} s") from None
    assert process.returncode is not None
    return _transcript(scenario, process.returncode, out.decode(), err.decode())


def _transcript(scenario: dict[str, Any], returncode: int, stdout: str, stderr: str) -> dict[str, Any]:
    if returncode != 0:
        raise JsClientError(
            f"chat.mjs exited {returncode} for client {scenario.get('client')}\n--- node stderr ---\n{stderr}"
        )
    transcript: dict[str, Any] = json.loads(stdout)
    return transcript


def assistant_messages(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistant UIMessages of the final message list, in order."""
    return [m for m in transcript["messages"] if m["role"] == "assistant"]


def tool_parts(message: dict[str, Any], tool: str | None = None) -> list[dict[str, Any]]:
    """The tool parts of a UIMessage (static `tool-<name>` and `dynamic-tool`), optionally of one tool."""
    parts: list[dict[str, Any]] = []
    for part in message["parts"]:
        kind = part["type"]
        if kind == "dynamic-tool":
            name = part.get("toolName")
        elif kind.startswith("tool-"):
            name = kind.removeprefix("tool-")
        else:
            continue
        if tool is None or name == tool:
            parts.append(part)
    return parts


def chunk_types(request: dict[str, Any]) -> list[str]:
    """The `type` of every parsed SSE chunk of one recorded request (or raw post)."""
    return [c["type"] if isinstance(c, dict) else repr(c) for c in request["chunks"]]
