"""A real `signoff demo` process for end-to-end tests, and read access to its SQLite ledger.

The server runs as a subprocess (not in-process) so the tests see exactly what a user of the CLI gets: the
ready line, the HTTP stack, the keep-alive timer and the ledger file. Its output goes to files, never to
pipes, so a chatty server can never block on a full pipe while a test waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from signoff import Approval, Ledger, SqliteLedger
from signoff.core.audit import AuditEntry
from tests.conftest import SIGNOFF

READY = re.compile(r"signoff (?:demo|serve|mcp-gateway): (http://127\.0\.0\.1:\d+)")


@dataclass(frozen=True)
class LedgerView:
    """One consistent read of the ledger: the approvals of the chats asked about, and the whole audit."""

    approvals: list[Approval]
    audit: list[AuditEntry]

    def actions(self, subject: str, action: str) -> list[AuditEntry]:
        """The audit entries with `action` about `subject` (an approval id)."""
        return [e for e in self.audit if e.subject == subject and e.action == action]


@dataclass(frozen=True)
class DemoServer:
    base: str
    token: str
    db: Path
    stderr: Path

    @property
    def api(self) -> str:
        return f"{self.base}/api/chat"

    def scenario(
        self, client: str, chat_id: str, steps: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        """A tests/js/chat.mjs scenario against this server (see that file's header for the fields)."""
        return {
            "client": client,
            "api": self.api,
            "base": self.base,
            "token": self.token,
            "chatId": chat_id,
            "steps": steps,
            **extra,
        }

    def ledger(self, *chat_ids: str) -> LedgerView:
        """Reads the ledger file the server writes (SQLite in WAL mode is safe to read from a second
        process), so tests check what was recorded, not only what the server said."""

        async def read() -> LedgerView:
            async with SqliteLedger(self.db) as ledger:
                approvals = [a for chat_id in chat_ids for a in await ledger.approvals.query(chat_id=chat_id)]
                return LedgerView(approvals=approvals, audit=await ledger.audit.entries(0, 10_000))

        return asyncio.run(read())


@contextlib.asynccontextmanager
async def in_loop(app: Starlette) -> AsyncIterator[str]:
    """Serves `app` with a real uvicorn in the test's own event loop, on a free port; yields
    `127.0.0.1:<port>` once it listens, and stops it (lifespan shutdown included) afterwards."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    running = asyncio.ensure_future(server.serve())
    while not server.started:
        assert not running.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await running


@contextlib.contextmanager
def demo_server(
    directory: Path,
    *,
    keepalive: float = 0.5,
    timeout: float = 15,
    browser_timeout: float = 120,
    runtime: str = "pydantic-ai",
) -> Iterator[DemoServer]:
    """Runs `signoff demo --port 0` with its ledger in `directory`; fails loudly (with the server's stderr)
    if it does not say it is listening within `timeout` seconds, and always stops it afterwards."""
    token = "conformance-" + os.urandom(8).hex()
    db = directory / "signoff.db"
    options = ["--ledger", f"sqlite:///{db}", "--keepalive", str(keepalive)]
    options += ["--browser-timeout", str(browser_timeout), "--runtime", runtime]
    with signoff_server(directory, ["demo", *options], token, timeout=timeout) as (base, _process):
        yield DemoServer(base=base, token=token, db=db, stderr=directory / "demo.stderr")


@contextlib.contextmanager
def signoff_server(
    directory: Path,
    args: list[str],
    token: str,
    *,
    timeout: float = 15,
    env: dict[str, str] | None = None,
    name: str | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Runs `signoff <args> --port 0`, its output in `directory/<name>.stdout|stderr`; yields its base URL
    and process once it says it is listening, and always stops it afterwards."""
    name = name or args[0]
    out_path, err_path = directory / f"{name}.stdout", directory / f"{name}.stderr"
    split = args.index("--") if "--" in args else len(args)  # what follows `--` is another command's
    command = [SIGNOFF, *args[:split], "--port", "0", *args[split:]]
    env = {**os.environ, **(env or {}), "SIGNOFF_API_TOKEN": token, "COLUMNS": "200"}
    with listening(command, out_path, err_path, env=env, timeout=timeout) as served:
        yield served


@contextlib.contextmanager
def listening(
    command: list[str],
    out_path: Path,
    err_path: Path,
    *,
    env: dict[str, str],
    timeout: float,
    cwd: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Runs a server's `command`, its output in `out_path` and `err_path`; yields its base URL and process
    once it says it is listening, and always stops it afterwards."""
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env
        )
    try:
        yield _wait_ready(process, out_path, err_path, timeout), process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _wait_ready(process: subprocess.Popen[bytes], out_path: Path, err_path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        if match := READY.search(out_path.read_text(errors="replace")):
            return match.group(1)
        problem = None
        if process.poll() is not None:
            problem = f"exited with {process.returncode} before listening"
        elif time.monotonic() > deadline:
            problem = f"did not say it was listening within {timeout} s"
        if problem:
            raise AssertionError(
                f"signoff {problem}\n--- stdout ---\n{out_path.read_text(errors='replace')}"
                f"\n--- stderr ---\n{err_path.read_text(errors='replace')}"
            )
        time.sleep(0.05)


async def audited(ledger: Ledger, wanted: Callable[[list[AuditEntry]], bool]) -> list[AuditEntry]:
    """The audit once `wanted` holds for it, within 5 s: refusals of unauthenticated requests are written
    when their second ends, counted (see `server.refusals`)."""
    deadline = time.monotonic() + 5.0
    while not wanted(entries := await ledger.audit.entries(0, 100_000)):
        assert time.monotonic() < deadline, f"the audit never showed what was wanted: {entries[-5:]}"
        await asyncio.sleep(0.05)
    return entries
