"""The latency Claude Code's hooks add to an allowed call, against a real `signoff serve` (no agent), on
SQLite.

- `command hook`: one `signoff hook claude-code` process per call, as Claude Code runs it: start, read the
  event, POST it, print the answer. Goal: p50 ≤ 50 ms.
- `http hook`: the POST alone, a new connection per call, as Claude Code's `http` hook makes it.
- `python start`, `hook imports`: what the command hook's figure is made of, to say what dominates.

    .venv/bin/python bench/hooks.py [--n 200]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
POLICY = '[[tools.Bash]]\naction = "allow"\n'
EVENT = {
    "session_id": "bench", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "permission_mode": "default",
    "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
    "tool_use_id": "toolu_bench",
}  # fmt: skip


def figures(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"{name:<22} p50 {statistics.median(ms):7.1f} ms   p99 {p99:7.1f} ms   (n={len(ms)})")


def timed(command: list[str], n: int, stdin: bytes = b"", env: dict[str, str] | None = None) -> list[float]:
    found = []
    for _ in range(n):
        started = time.perf_counter()
        done = subprocess.run(command, input=stdin, env=env, capture_output=True)
        found.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr.decode()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory(prefix="signoff-bench-hooks-") as folder:
        db, policy = Path(folder) / "bench.db", Path(folder) / "policy.toml"
        policy.write_text(POLICY)
        env = {**os.environ, "SIGNOFF_AUDIT_KEY_FILE": str(Path(folder) / "audit.key")}
        token = asyncio.run(_register(db, env))
        out = Path(folder) / "serve.out"
        command = [SIGNOFF, "serve", "--port", "0", "--ledger", f"sqlite:///{db}", "--policy", str(policy)]
        with out.open("wb") as written:
            server = subprocess.Popen(command, stdout=written, stderr=subprocess.DEVNULL, env=env)
        try:
            base = _ready(out)
            print(f"signoff serve (SQLite) at {base}; {n} allowed Bash calls each", file=sys.stderr)
            hook_env = {**env, "SIGNOFF_URL": base, "SIGNOFF_TOKEN": token}
            event = json.dumps(EVENT).encode()
            timed([SIGNOFF, "hook", "claude-code"], 5, event, hook_env)  # warm the page cache
            figures("command hook", timed([SIGNOFF, "hook", "claude-code"], n, event, hook_env))
            figures("http hook", _posts(base, token, event, n))
            figures("python start", timed([sys.executable, "-c", "pass"], n))
            imports = "import sys; sys.argv = ['signoff']; import json, signoff.cli, signoff.cli.hook"
            figures("hook imports + start", timed([sys.executable, "-c", imports], n))
        finally:
            server.terminate()
            server.wait(10)


async def _register(db: Path, env: dict[str, str]) -> str:
    os.environ["SIGNOFF_AUDIT_KEY_FILE"] = env["SIGNOFF_AUDIT_KEY_FILE"]
    from signoff.ledger import SqliteLedger

    async with SqliteLedger(db) as ledger:
        _, token = await ledger.principals.register("bench", [], actor="bench")
    return token


def _ready(out: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in out.read_text().splitlines():
            if line.startswith("signoff serve: "):
                return line.removeprefix("signoff serve: ").strip()
        time.sleep(0.05)
    raise SystemExit(f"signoff serve did not start: {out.read_text()}")


def _posts(base: str, token: str, event: bytes, n: int) -> list[float]:
    host, port = base.removeprefix("http://").split(":")
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    found = []
    for _ in range(n):
        started = time.perf_counter()
        connection = http.client.HTTPConnection(host, int(port))
        connection.request("POST", "/api/hooks/claude-code?timeout=600", event, headers)
        answer = connection.getresponse()
        answer.read()
        connection.close()
        found.append(time.perf_counter() - started)
        assert answer.status == 200
    return found


if __name__ == "__main__":
    main()
