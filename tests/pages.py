"""Driving the page in a real Chromium: what the page tests share (tests/js/page.mjs holds the scenarios)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.jsclient import JS_DIR, ROOT, ensure_installed
from tests.servers import DemoServer

PAGE_MJS = JS_DIR / "page.mjs"
CHROMIUM = Path("/usr/bin/chromium")


def artifacts() -> Path:
    return Path(os.environ.get("SIGNOFF_ARTIFACTS") or ROOT / "artifacts" / "screenshots")


def run_page(server: DemoServer, scenario: str, principals: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs one page.mjs scenario against `server`, failing the test with its output if it fails; returns
    what the scenario reported on stdout (e.g. its chat id). `principals` are personal tokens by name."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: the page tests drive Debian's chromium package"
    ensure_installed()
    env = {
        **os.environ,
        "SIGNOFF_BASE": server.base,
        "SIGNOFF_TOKEN": server.token,
        "SIGNOFF_ARTIFACTS": str(artifacts()),
        "SIGNOFF_PRINCIPALS": json.dumps(principals or {}),
    }
    try:
        done = subprocess.run(
            ["node", str(PAGE_MJS), scenario],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"page.mjs {scenario} did not finish within 120 s\n{output}\n{server_log(server)}")
    if done.returncode != 0:
        output = f"{done.stderr}{done.stdout}"
        pytest.fail(f"page.mjs {scenario} exited {done.returncode}\n{output}\n{server_log(server)}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def server_log(server: DemoServer) -> str:
    """The end of the server's stderr, which names the cause when the server misbehaved."""
    return "--- signoff demo stderr (last 40 lines) ---\n" + "\n".join(
        server.stderr.read_text(errors="replace").splitlines()[-40:]
    )
