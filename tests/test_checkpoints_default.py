"""Issue 43, item 4: `audit verify` knows what it should find, by default. `serve`, `demo` and `mcp-gateway`
append signed checkpoints to their ledger's own file beside the audit key unless told otherwise, and `audit
verify` with no options reads it: a ledger emptied or replaced after a server wrote its checkpoint fails,
where it used to verify as "audit ok: 0 entries". One key may serve several ledgers, so each ledger has its
own file, and none is judged by another's.

Real processes throughout, each test with a throwaway audit key of its own."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from signoff.core.audit import Checkpoint
from signoff.ledger.evidence import Evidence, default_checkpoints, ledger_identity, read_checkpoints
from tests.conftest import SIGNOFF
from tests.servers import signoff_server

T = TypeVar("T")
PAY = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 50 USD to Hanako"}]}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An audit key of this test's own, not made yet, and no ledger named by the environment."""
    key = tmp_path / "keys" / "audit.key"
    given = {name: value for name, value in os.environ.items() if name != "SIGNOFF_LEDGER"}
    return {**given, "SIGNOFF_AUDIT_KEY_FILE": str(key), "COLUMNS": "200"}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIGNOFF, *args], env=env, capture_output=True, text=True, timeout=60)


def serve_a_while(folder: Path, env: dict[str, str], url: str, *options: str, pay: bool = True) -> str:
    """`signoff demo` on `url` with checkpoints every second, asked to pay once (one audit entry), kept up
    until its checkpoints file shows that entry (or, with no file, a moment after the payment); returns
    what the ready lines say of its checkpoints."""
    folder.mkdir()
    args = ["demo", "--ledger", url, "--audit-checkpoint-every", "1", *options]
    with signoff_server(folder, args, "token", env=env) as (base, _):
        said = wait_for(
            lambda: re.search(r"^audit checkpoints: (.+)$", (folder / "demo.stdout").read_text(), re.M)
        )
        marks = said.group(1)
        if pay:
            httpx.post(f"{base}/api/chat", json={"id": "c1", "messages": [PAY]}, timeout=30)
        if marks != "off":
            wait_for(
                lambda: Path(marks).exists() and any(m.count >= pay for m in read_checkpoints(Path(marks)))
            )
    return marks


def wait_for(found: Callable[[], T | None]) -> T:
    """What `found` finds, once it finds something: what a process writes comes a line at a time."""
    for _ in range(300):
        if value := found():
            return value
        time.sleep(0.05)
    raise AssertionError("never came")


def emptied(db: Path, env: dict[str, str]) -> None:
    """The ledger's file replaced by a fresh, empty ledger: what a wiped Redis or a restored blank
    database looks like to `audit verify`."""
    for made in db.parent.glob(f"{db.name}*"):
        made.unlink()
    assert run(env, "db", "upgrade", "--ledger", f"sqlite:///{db}").returncode == 0


def test_verify_with_no_options_fails_on_a_ledger_emptied_after_serve_checkpointed(
    tmp_path: Path, env: dict[str, str]
) -> None:
    db = tmp_path / "ledger.db"
    env["SIGNOFF_LEDGER"] = f"sqlite:///{db}"
    marks = Path(serve_a_while(tmp_path / "a", env, f"sqlite:///{db}"))
    assert marks.parent == tmp_path / "keys" / "checkpoints" and marks.suffix == ".jsonl"
    written = read_checkpoints(marks)
    last = max(written, key=lambda mark: mark.count)
    assert last.count == 1 and all(mark.mac for mark in written)

    held = run(env, "audit", "verify")
    assert held.returncode == 0, held.stderr
    assert f"audit ok: 1 entries, {len(written)} checkpoints in {marks} hold" in held.stdout

    emptied(db, env)
    cut = run(env, "audit", "verify")
    assert cut.returncode == 1, cut.stdout
    at = datetime.fromtimestamp(last.at, UTC).strftime("%H:%M")
    assert re.search(
        rf"^audit broken: the ledger holds 0 entries; the checkpoint of (\d{{4}}-\d\d-\d\d )?{at} saw 1$",
        cut.stderr,
        re.M,
    ), cut.stderr
    assert f"checkpoints read from {marks}" in cut.stderr
    assert cut.stdout == ""


def test_without_checkpoints_an_emptied_ledger_passes_as_before(tmp_path: Path, env: dict[str, str]) -> None:
    """`--no-audit-checkpoints` writes nothing, and then the emptied ledger verifies: what the issue
    found, now only where checkpoints were turned off, and said so."""
    db = tmp_path / "ledger.db"
    assert serve_a_while(tmp_path / "a", env, f"sqlite:///{db}", "--no-audit-checkpoints") == "off"
    assert not (tmp_path / "keys" / "checkpoints").exists()
    emptied(db, env)
    verified = run(env, "audit", "verify", "--ledger", f"sqlite:///{db}")
    assert verified.returncode == 0, verified.stderr
    assert "audit ok: 0 entries (no checkpoints at " in verified.stdout
    assert "a ledger cut short would pass" in verified.stdout


def test_a_second_ledger_on_the_same_key_is_not_judged_by_the_firsts(
    tmp_path: Path, env: dict[str, str]
) -> None:
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    marks = Path(serve_a_while(tmp_path / "a", env, f"sqlite:///{first}"))
    others = Path(serve_a_while(tmp_path / "b", env, f"sqlite:///{second}", pay=False))
    assert marks != others and marks.parent == others.parent
    assert max(m.count for m in read_checkpoints(marks)) == 1
    assert max(m.count for m in read_checkpoints(others)) == 0
    verified = run(env, "audit", "verify", "--ledger", f"sqlite:///{second}")
    assert verified.returncode == 0, verified.stderr
    assert (
        f"audit ok: 0 entries, {len(read_checkpoints(others))} checkpoints in {others} hold"
        in verified.stdout
    )
    third = tmp_path / "third.db"  # never served: it has no checkpoints, and the others' are not its own
    assert run(env, "db", "upgrade", "--ledger", f"sqlite:///{third}").returncode == 0
    fresh = run(env, "audit", "verify", "--ledger", f"sqlite:///{third}")
    assert fresh.returncode == 0 and "audit ok: 0 entries (no checkpoints at " in fresh.stdout


def test_the_stdio_gateway_appends_them_by_default(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}"
    assert run(env, "principals", "add", "bob", "--ledger", url).returncode == 0  # one audit entry
    args = ["mcp-gateway", "--stdio", "--ledger", url, "--upstream-url", "http://127.0.0.1:9/mcp"]
    args += ["--audit-checkpoint-every", "1", "--state-key-file", str(tmp_path / "state.keys")]
    err = tmp_path / "gateway.stderr"
    with err.open("wb") as stderr:
        gateway = subprocess.Popen(
            [SIGNOFF, *args], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, env=env
        )
    try:
        said = wait_for(lambda: re.search(r"^audit checkpoints: (.+)$", err.read_text(), re.M))
        marks = Path(said.group(1))
        assert marks.parent == tmp_path / "keys" / "checkpoints"
        wait_for(lambda: any(m.count == 1 for m in read_checkpoints(marks)))
    finally:
        assert gateway.stdin is not None
        gateway.stdin.close()
        gateway.terminate()
        gateway.wait(10)
    with sqlite3.connect(db) as ledger:
        ledger.execute("DELETE FROM audit")
    cut = run(env, "audit", "verify", "--ledger", url)
    assert cut.returncode == 1
    assert "audit broken: the ledger holds 0 entries; the checkpoint of " in cut.stderr
    assert cut.stderr.split("\n")[0].endswith(" saw 1")


def test_naming_a_file_and_turning_them_off_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    args = ["demo", "--port", "0", "--audit-checkpoints", str(tmp_path / "c.jsonl"), "--no-audit-checkpoints"]
    refused = run(env, *args)
    assert refused.returncode == 2 and "--no-audit-checkpoints" in refused.stderr


def test_a_server_that_cannot_write_its_checkpoints_does_not_start(
    env: dict[str, str], tmp_path: Path
) -> None:
    named = tmp_path / "nowhere" / "c.jsonl"
    refused = run(env, "demo", "--port", "0", "--ledger", "memory://", "--audit-checkpoints", str(named))
    assert refused.returncode == 1
    assert f"cannot write audit checkpoints to {named}" in refused.stderr


def test_a_ledger_is_named_the_same_however_its_url_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert ledger_identity("sqlite:///l.db") == ledger_identity(f"sqlite:///{tmp_path / 'l.db'}")
    postgres = ledger_identity("postgresql://me:s3cret@DB.example/app")
    assert postgres == ledger_identity("postgres://other@db.example:5432/app?schema=signoff&sslmode=require")
    assert postgres is not None and "s3cret" not in postgres and "me" not in postgres.split("//")[1]
    assert postgres != ledger_identity("postgresql://db.example/app?schema=other")
    assert ledger_identity("redis://cache") == ledger_identity("rediss://u:p@cache:6379/0?prefix=signoff")
    assert ledger_identity("redis://cache") != ledger_identity("redis://cache/1")
    assert ledger_identity("memory://") is None and default_checkpoints("memory://") is None


def test_the_shortfall_names_the_checkpoints_time_in_utc() -> None:
    at = datetime(2025, 1, 31, 12, 4, 30, tzinfo=UTC).timestamp()
    cut = Evidence(count=0, cut=Checkpoint(count=73, head="h", at=at))
    assert cut.shortfall(now=at + 3600) == "the ledger holds 0 entries; the checkpoint of 12:04 saw 73"
    assert (
        cut.shortfall(now=at + 86400)
        == "the ledger holds 0 entries; the checkpoint of 2025-01-31 12:04 saw 73"
    )
    one = Evidence(count=1, cut=Checkpoint(count=2, head="h", at=at))
    assert one.shortfall(now=at) == "the ledger holds 1 entry; the checkpoint of 12:04 saw 2"
