"""The chat page and the approvals inbox in a real browser: tests/js/page.mjs drives the system Chromium
through playwright-core against one real `signoff demo` process, one scenario per test.

Each scenario fails on any expectation not met and on any console error or warning, uncaught page error or
failed request that it did not expect. Screenshots of each key state go to artifacts/screenshots/
(SIGNOFF_ARTIFACTS chooses another folder), named <scenario>-<nn>-<state>.png.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff.demo.runtime import RUNTIMES
from tests.jsclient import JS_DIR, ROOT, ensure_installed, needs_node
from tests.servers import DemoServer, demo_server

PAGE_MJS = JS_DIR / "page.mjs"
CHROMIUM = Path("/usr/bin/chromium")
BROWSER_TIMEOUT = 3.0
SCENARIOS = (
    "pay-approve",
    "pay-deny",
    "two-payments",
    "location-granted",
    "location-denied",
    "location-silent",
    "play",
    "inbox-blocking",
    "inbox-race",
    "reload-pending",
    "inbox-edit-grants",
)
TASK_SCENARIOS = ("export-report", "export-cancel")
"""Long-running tools (seed 004): the demo's `export report` runs about ten seconds, with progress."""

pytestmark = needs_node


@pytest.fixture(scope="module", params=RUNTIMES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """One server per agent framework for every scenario; each scenario uses chats of its own. Browser
    calls answer within milliseconds here, so a short browser timeout lets `location-silent` watch one
    run out."""
    folder = tmp_path_factory.mktemp("page")
    with demo_server(folder, browser_timeout=BROWSER_TIMEOUT, runtime=request.param) as running:
        yield running


def artifacts() -> Path:
    return Path(os.environ.get("SIGNOFF_ARTIFACTS") or ROOT / "artifacts" / "screenshots")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_page(server: DemoServer, scenario: str) -> None:
    run_page(server, scenario)


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
def test_page_tasks(server: DemoServer, scenario: str) -> None:
    run_page(server, scenario)


def run_page(server: DemoServer, scenario: str) -> dict[str, Any]:
    """Runs one page.mjs scenario against `server`, failing the test with its output if it fails; returns
    what the scenario reported on stdout (e.g. its chat id)."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: the page tests drive Debian's chromium package"
    ensure_installed()
    env = {
        **os.environ,
        "SIGNOFF_BASE": server.base,
        "SIGNOFF_TOKEN": server.token,
        "SIGNOFF_ARTIFACTS": str(artifacts()),
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
