"""The wheel as a user installs it (issue 42, item 9): `python -m build --wheel` from this checkout holds the
built page; installed into a fresh virtualenv, with its dependencies from the package index and nothing of
this checkout on the path, its `signoff` runs `demo --help`, walks through one approval in the terminal, and
serves a plain pydantic-ai `Agent(TestModel())` whose one tool a person approves once and denies once through
the real `ai` client over HTTP.

One module, its fixtures module-scoped: the build and the install take a minute or two, once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.jsclient import assistant_messages, ensure_installed, run_scenario, tool_parts
from tests.servers import listening

pytestmark = pytest.mark.timeout(900)

STATIC = ROOT / "src" / "signoff" / "server" / "static"
TOKEN = "wheel-" + os.urandom(8).hex()

AGENT = '''
import os

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

agent = Agent(TestModel())


@agent.tool_plain
def pay(amount: int, to: str) -> str:
    """Pay someone."""
    with open(os.environ["PAYMENTS_FILE"], "a") as payments:
        payments.write(f"{amount} {to}\\n")
    return f"paid {amount} to {to}"
'''


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="signoff-wheel-") as directory:
        yield Path(directory)


@pytest.fixture(scope="module")
def wheel(workdir: Path) -> Path:
    """`python -m build --wheel` of this checkout, as the README says to build it."""
    out = workdir / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [path] = out.glob("signoff-*.whl")
    return path


@pytest.fixture(scope="module")
def env(workdir: Path) -> dict[str, str]:
    """The environment of a shell outside this checkout's venv: no PYTHONPATH, no VIRTUAL_ENV, the fresh
    venv's `bin` first on PATH; an audit key and a ledger of the module's own."""
    base = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    paths = [p for p in base.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT))]
    return {
        **base,
        "PATH": os.pathsep.join([str(workdir / "venv" / "bin"), *paths]),
        "SIGNOFF_AUDIT_KEY_FILE": str(workdir / "audit.key"),
        "COLUMNS": "200",
    }


@pytest.fixture(scope="module")
def signoff(workdir: Path, wheel: Path, env: dict[str, str]) -> Path:
    """The `signoff` of a fresh venv that has the wheel installed, and nothing else of this checkout."""
    venv = workdir / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300, check=False
    )
    assert made.returncode == 0, made.stderr
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=900, env=env, cwd=workdir, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import signoff; print(signoff.__file__)"],
        capture_output=True, text=True, env=env, cwd=workdir, check=False,
    )  # fmt: skip
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr  # the wheel's, not the checkout's
    return venv / "bin" / "signoff"


def test_the_wheel_holds_the_built_page(wheel: Path) -> None:
    committed = {str(p.relative_to(STATIC)) for p in STATIC.rglob("*") if p.is_file()}
    assert {"index.html", "approvals.html"} <= committed
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix("signoff/server/static/") for n in archive.namelist()}
    assert committed <= shipped, sorted(committed - shipped)


def test_demo_help_runs_from_the_fresh_venv(signoff: Path, env: dict[str, str], workdir: Path) -> None:
    done = subprocess.run(
        [str(signoff), "demo", "--help"], capture_output=True, text=True, env=env, cwd=workdir, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Usage:") == 1, done.stdout
    assert "signoff demo" in done.stdout


def test_the_walkthrough_runs_one_approval(signoff: Path, env: dict[str, str], workdir: Path) -> None:
    """`signoff walkthrough` waits for a decision; a second process (the second terminal) approves it."""
    here = {**env, "SIGNOFF_LEDGER": f"sqlite:///{workdir / 'walkthrough.db'}"}
    walk = subprocess.Popen(
        [str(signoff), "walkthrough"], env=here, cwd=workdir, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert walk.stdout is not None
        seen = []
        for line in walk.stdout:
            seen.append(line)
            if match := re.search(r"signoff approvals approve (apr_[\w-]+)", line):
                break
        else:
            raise AssertionError("".join(seen))
        second = subprocess.run(
            [str(signoff), "approvals", "approve", match.group(1)], env=here, cwd=workdir,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert second.returncode == 0, second.stderr
        rest, _ = walk.communicate(timeout=60)
    finally:
        if walk.poll() is None:
            walk.kill()
            walk.wait(10)
    assert walk.returncode == 0, "".join(seen) + rest
    assert "process_payment ran 1 time(s)" in rest, "".join(seen) + rest


@pytest.fixture(scope="module")
def served(signoff: Path, env: dict[str, str], workdir: Path) -> Iterator[tuple[str, Path, Path]]:
    """`signoff serve --agent agent_mod:agent` from the fresh venv, the module in its working directory;
    yields the base URL, the file the tool writes each payment to, and the ledger's URL path."""
    ensure_installed()  # the real `ai` clients; fails (never skips) without node, as CI needs
    (workdir / "agent_mod.py").write_text(AGENT)
    payments, db = workdir / "payments.txt", workdir / "served.db"
    command = [
        str(signoff), "serve", "--agent", "agent_mod:agent", "--anonymous-chats", "--port", "0",
        "--ledger", f"sqlite:///{db}",
    ]  # fmt: skip
    here = {**env, "SIGNOFF_API_TOKEN": TOKEN, "PAYMENTS_FILE": str(payments)}
    outputs = workdir / "serve.stdout", workdir / "serve.stderr"
    with listening(command, *outputs, env=here, timeout=60, cwd=workdir) as (base, _):
        yield base, payments, db


def ran(payments: Path) -> list[str]:
    return payments.read_text().splitlines() if payments.exists() else []


def answered(base: str, chat_id: str, approved: bool) -> dict[str, Any]:
    """The deferred flow with the newest 6.x `ai` client, as `useChat` runs it: send, get the tool's
    approval request, answer it in the chat; `sendAutomaticallyWhen` sends the answer."""
    transcript = run_scenario(
        {
            "client": "ai-6",
            "api": f"{base}/api/chat",
            "base": base,
            "token": TOKEN,
            "chatId": chat_id,
            "steps": [
                {"send": "pay someone"},
                {"respond": [{"tool": "pay", "index": 0, "approved": approved, "reason": "not today"}]},
            ],
        }
    )
    assert not transcript["errors"] and transcript["status"] == "ready", transcript
    assert [r["status"] for r in transcript["requests"]] == [200, 200], transcript
    return transcript


def approvals(signoff: Path, env: dict[str, str], db: Path, chat_id: str) -> list[dict[str, Any]]:
    listed = subprocess.run(
        [str(signoff), "approvals", "list", "--chat", chat_id, "--json", "--ledger", f"sqlite:///{db}"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    found: list[dict[str, Any]] = json.loads(listed.stdout)["approvals"]
    return found


def test_a_person_approves_the_served_tool_once(
    served: tuple[str, Path, Path], signoff: Path, env: dict[str, str]
) -> None:
    base, payments, db = served
    before = ran(payments)
    transcript = answered(base, "wheel-approve", approved=True)
    [part] = tool_parts(assistant_messages(transcript)[-1], "pay")
    assert part["state"] == "output-available" and "paid" in str(part["output"]), part
    assert len(ran(payments)) == len(before) + 1  # the tool ran, once
    [approval] = approvals(signoff, env, db, "wheel-approve")
    assert approval["state"] == "consumed", approval


def test_a_person_denies_the_served_tool_and_it_never_runs(
    served: tuple[str, Path, Path], signoff: Path, env: dict[str, str]
) -> None:
    base, payments, db = served
    before = ran(payments)
    transcript = answered(base, "wheel-deny", approved=False)
    [part] = tool_parts(assistant_messages(transcript)[-1], "pay")
    assert part["state"] == "output-denied", part
    assert ran(payments) == before  # the tool never ran for this chat
    [approval] = approvals(signoff, env, db, "wheel-deny")
    assert approval["state"] == "denied" and approval["decision"]["reason"] == "not today", approval
