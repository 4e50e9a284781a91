"""The inbox at a phone's width shows a coding agent's calls as blocks, in a real Chromium
(tests/js/code_view.mjs) against `signoff demo`: an `Edit` as a unified diff in a code block whose long
line wraps inside it, and a `Bash` call as its command with where it runs. The approvals are opened in the
demo's ledger file, as the Claude Code hook opens them, with the call's `cwd` in its context."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from signoff import SqliteLedger
from signoff.core.call import ToolCall
from tests.jsclient import JS_DIR, ROOT, ensure_installed, needs_node
from tests.pages import CHROMIUM, artifacts
from tests.servers import demo_server

pytestmark = needs_node
CWD = "/home/dev/shop"
EDIT = {
    "file_path": "/home/dev/shop/src/cart.py",
    "old_string": "def total(cart):\n    tax = 0.2\n    return sum(cart)",
    "new_string": "def total(cart):\n    tax = 0.0  # \u202e" + "x" * 300 + "\n    return sum(cart)",
}
BASH = {"command": "cd build &&\n  rm -rf ./out\necho done", "description": "Clean the build"}


async def open_approvals(db: Path) -> dict[str, str]:
    async with SqliteLedger(db) as ledger:
        opened = {}
        for kind, tool, args in (("edit", "Edit", EDIT), ("bash", "Bash", BASH)):
            call = ToolCall(f"toolu_{kind}", tool, args, {"cwd": CWD})
            approval = await ledger.approvals.open(
                call,
                chat_id="claude-code:s1",
                description=f"Claude Code: {tool}",
                rule=f"{tool}[0]",
            )
            opened[kind] = approval.id
        return opened


def test_the_inbox_shows_a_diff_as_a_code_block_at_390_pixels(tmp_path: Path) -> None:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: the page tests drive Debian's chromium package"
    ensure_installed()
    with demo_server(tmp_path) as server:
        opened = asyncio.run(open_approvals(server.db))
        env = {
            **os.environ,
            "SIGNOFF_BASE": server.base,
            "SIGNOFF_TOKEN": server.token,
            "SIGNOFF_APPROVALS": json.dumps(opened),
            "SIGNOFF_ARTIFACTS": str(artifacts()),
        }
        done = subprocess.run(
            ["node", str(JS_DIR / "code_view.mjs")],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        pytest.fail(f"code_view.mjs exited {done.returncode}\n{done.stderr}{done.stdout}")
