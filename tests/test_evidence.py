"""Evidence against someone who can write the database but lacks the audit key, on SQLite and PostgreSQL:
a chain rebuilt without the key, a chain cut short (caught by a checkpoint), a state flipped in the table
(never runs, fails verify), a grant written by hand (never used); key files and key rotation."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from signoff import Decision, Gate, Ledger, Policy, ToolCall
from signoff.core.approval import Approval
from signoff.core.audit import AuditKey, Checkpoint, Keyring, chain
from signoff.core.errors import LedgerUnavailable, Unproven
from signoff.ledger.evidence import BadCheckpoint, read_checkpoints, verify
from signoff.ledger.keyfile import load_keyring
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.sqlite import SqliteLedger
from tests.conftest import POSTGRES, SIGNOFF, drop, make_ledger

PAY = ToolCall("call_1", "process_payment", {"amount": 77, "currency": "USD", "recipient": "Mallory"})
ASK = Policy.from_dict({"tools": {"process_payment": [{"action": "ask"}]}})


@pytest.fixture(params=["sqlite", "postgres"])
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledger]:
    async with make_ledger(str(request.param), tmp_path) as opened:
        yield opened
    await drop(opened)


async def sql(ledger: Ledger, statement: str, *params: object) -> list[Any]:
    """What someone with the database's credentials can do: any statement, around signoff."""
    if isinstance(ledger, SqliteLedger):
        with sqlite3.connect(ledger.path) as db:
            return db.execute(statement, params).fetchall()
    assert isinstance(ledger, PostgresLedger)
    async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
        await conn.execute(f"SET search_path = {ledger.schema}")
        cursor = await conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
        return await cursor.fetchall() if cursor.description else []


async def history(ledger: Ledger, chat: str = "c1") -> str:
    """Three approvals, one approved and run, one denied, one pending: 6 entries."""
    gate = Gate(ledger, ASK)
    ran = []
    for n, verdict in enumerate(("approve", "deny", None)):
        call = ToolCall(f"call_{n}", PAY.tool, {**PAY.args, "amount": n + 1})
        asked = await gate.authorize(call, chat_id=chat, wait="deferred")
        approval_id = asked.approval.id  # type: ignore[union-attr]
        if verdict == "approve":
            await ledger.approvals.decide(approval_id, Decision.approve("alice"))
            await gate.run(call, lambda **a: ran.append(a), chat_id=chat, wait="deferred")
        elif verdict == "deny":
            await ledger.approvals.decide(approval_id, Decision.deny("bob", "no"))
    assert len(ran) == 1
    return approval_id


async def test_a_clean_ledger_verifies(ledger: Ledger) -> None:
    await history(ledger)
    evidence = await verify(ledger)
    assert evidence.ok and evidence.count == 7, evidence  # the approved call's claim, then its finish


async def test_a_chain_rebuilt_without_the_key_fails(ledger: Ledger) -> None:
    """Edit an entry and re-chain every later one, as someone with the rows but not the key can."""
    await history(ledger)
    entries = await ledger.audit.entries()
    forger = AuditKey.generate()
    head = entries[1].head
    for entry in entries[2:]:
        event = entry.event if entry.seq != 3 else msgspec.structs.replace(entry.event, actor="mallory")
        forged = chain(event, head, forger)
        await sql(
            ledger, "UPDATE audit SET actor = ?, prev = ?, hash = ? WHERE seq = ?",
            forged.actor, forged.prev, forged.hash, forged.seq,
        )  # fmt: skip
        head = forged.head
    count, broken = await ledger.audit.verify()
    assert (count, broken.seq if broken else None) == (2, 3)
    assert broken is not None and "no key this keyring holds" in broken.problem
    assert not (await verify(ledger)).ok


async def test_another_key_fails_verify(ledger: Ledger, tmp_path: Path) -> None:
    await history(ledger)
    url = ledger_url(ledger)
    async with make_other(url, Keyring(AuditKey.generate())) as stranger:
        count, broken = await stranger.audit.verify()
        assert count == 0 and broken is not None and broken.seq == 1


async def test_a_checkpoint_exposes_a_chain_cut_short(ledger: Ledger) -> None:
    await history(ledger)
    mark = await ledger.audit.checkpoint()
    assert mark.count == 7 and mark.authentic(ledger.audit.keyring)
    await sql(ledger, "DELETE FROM audit WHERE seq > 4")
    assert (await ledger.audit.verify()) == (4, None), "a chain cut short holds on its own"
    count, broken = await ledger.audit.verify([mark])
    assert count == 4 and broken is not None and "a checkpoint saw 7" in broken.problem
    await sql(ledger, "DELETE FROM audit")
    assert (await ledger.audit.verify([mark]))[1] is not None, "an emptied audit fails too"
    forged = msgspec.structs.replace(mark, count=2)
    with pytest.raises(BadCheckpoint, match="not signed"):
        await verify(ledger, [forged])


async def test_a_rewrite_up_to_a_checkpoint_is_caught(ledger: Ledger) -> None:
    """Deleting the newest entries and writing new ones under the real key (a process that holds it, say
    a compromised worker) still differs from what the checkpoint saw."""
    await history(ledger)
    mark = await ledger.audit.checkpoint()
    await sql(ledger, "DELETE FROM audit WHERE seq > 6")
    await ledger.audit.record("note", "x", "mallory")
    _, broken = await ledger.audit.verify([mark])
    assert broken is not None and broken.seq == 7 and "differs from the checkpoint" in broken.problem


async def test_a_state_flipped_in_the_table_never_runs_and_fails_verify(ledger: Ledger) -> None:
    gate = Gate(ledger, ASK)
    asked = await gate.authorize(PAY, chat_id="c1", wait="deferred")
    approval = asked.approval  # type: ignore[union-attr]
    flipped = msgspec.structs.replace(
        approval, state="approved", decision=Decision.approve("cfo"), decided_at=approval.created_at + 1
    )
    record = msgspec.json.encode(flipped).decode()
    await sql(ledger, "UPDATE approvals SET state = 'approved', record = ? WHERE id = ?", record, approval.id)
    ran: list[dict[str, Any]] = []
    with pytest.raises(Unproven, match="carries no valid proof"):
        await gate.run(PAY, lambda **args: ran.append(args), chat_id="c1", wait="deferred")
    assert ran == [], "the payment never ran"
    refused = [e for e in await ledger.audit.entries() if e.action == "refuse" and e.subject == approval.id]
    assert refused and "no valid proof" in refused[0].detail["why"]
    problems = (await verify(ledger)).problems
    assert f"approval {approval.id} is approved in the table, and pending in the audit" in problems
    assert any(p.startswith(f"approval {approval.id} is not proven") for p in problems)


async def test_a_quorum_loosened_in_the_table_runs_nothing(ledger: Ledger) -> None:
    """One real approval of two, then the rule's quorum edited down to one: the proof covers the rule."""
    from signoff.core.principal import Authority, Principal

    approval = await ledger.approvals.open(
        PAY, chat_id="c1", description="d", rule="r", requester="carol",
        authority=Authority(approvers=("role:finance",), quorum=2),
    )  # fmt: skip
    voted = await ledger.approvals.decide(
        approval.id, Decision.approve(Principal(id="alice", roles=("finance",)))
    )
    loosened = msgspec.structs.replace(
        voted, state="approved", authority=Authority(approvers=("role:finance",), quorum=1),
        decision=voted.votes[0].decision, decided_at=voted.votes[0].at,
    )  # fmt: skip
    await sql(
        ledger,
        "UPDATE approvals SET record = ? WHERE id = ?",
        msgspec.json.encode(loosened).decode(),
        approval.id,
    )
    with pytest.raises(Unproven):
        await ledger.approvals.consume(approval.id, PAY, "gate")


async def test_a_grant_written_by_hand_is_never_used(ledger: Ledger) -> None:
    gate = Gate(ledger, ASK)
    grant = {"id": "grt_forged", "tool": PAY.tool, "digest": None, "chat_id": None, "scope": "always",
             "created_by": "cfo", "created_at": 1.0, "approval_id": "apr_x"}  # fmt: skip
    insert = "INSERT INTO grants (id, tool, chat_id, active, created_at, record) VALUES (?, ?, ?, ?, ?, ?)"
    await sql(ledger, insert, "grt_forged", PAY.tool, None, True, 1.0, json.dumps(grant))
    outcome = await gate.authorize(PAY, chat_id="c1", wait="deferred")
    assert type(outcome).__name__ == "Pending", "a forged grant lets nothing through"
    refused = [e for e in await ledger.audit.entries() if e.subject == "grt_forged"]
    assert refused and refused[0].detail["why"] == "the grant carries no valid proof"
    assert "grant grt_forged carries no valid proof" in (await verify(ledger)).problems


async def test_old_entries_verify_under_a_rotated_keyring(tmp_path: Path) -> None:
    old, new = AuditKey.generate(), AuditKey.generate()
    async with SqliteLedger(tmp_path / "l.db", keyring=Keyring(old)) as ledger:
        await history(ledger)
    async with SqliteLedger(tmp_path / "l.db", keyring=Keyring(new, (old,))) as ledger:
        await history(ledger, chat="c2")
        assert (await verify(ledger)).ok
        entries = await ledger.audit.entries(0, 100)
        assert {e.hash.split(":")[0] for e in entries} == {old.id, new.id}
    async with SqliteLedger(tmp_path / "l.db", keyring=Keyring(new)) as ledger:
        assert (await ledger.audit.verify())[1] is not None, "without the old key, its entries prove nothing"


def test_the_key_file_is_made_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "data" / "signoff" / "audit.key"
    first = load_keyring(path)
    assert first.created and stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_keyring(path)
    assert not again.created and again.keyring == first.keyring
    rotated = AuditKey.generate()
    path.write_text(f"{rotated.secret.hex()}\n{first.keyring.current.secret.hex()}\n")
    assert load_keyring(path).keyring == Keyring(rotated, (first.keyring.current,))
    (tmp_path / "empty.key").write_text("# nothing\n")
    with pytest.raises(LedgerUnavailable, match="holds no key"):
        load_keyring(tmp_path / "empty.key")
    (tmp_path / "bad.key").write_text("not hex\n")
    with pytest.raises(LedgerUnavailable, match="cannot use the audit key file"):
        load_keyring(tmp_path / "bad.key")


def test_the_cli_signs_checkpoints_and_verify_uses_them(tmp_path: Path) -> None:
    env = {**os.environ, "SIGNOFF_LEDGER": f"sqlite:///{tmp_path / 'l.db'}", "COLUMNS": "200"}

    async def seed() -> None:
        async with SqliteLedger(tmp_path / "l.db") as ledger:
            await history(ledger)

    asyncio.run(seed())
    printed = run(env, "audit", "checkpoint")
    assert printed.returncode == 0 and len(printed.stdout.splitlines()) == 1
    mark = msgspec.json.decode(printed.stdout, type=Checkpoint)
    assert mark.count == 7
    marks = tmp_path / "checkpoints.jsonl"
    marks.write_text(printed.stdout)
    ok = run(env, "audit", "verify", "--checkpoint", str(marks))
    assert ok.returncode == 0 and "audit ok: 7 entries, 1 checkpoints hold" in ok.stdout
    with sqlite3.connect(tmp_path / "l.db") as db:
        db.execute("DELETE FROM audit WHERE seq > 5")
    cut = run(env, "audit", "verify", "--checkpoint", str(marks))
    assert cut.returncode == 1 and "the ledger holds 5 entries; the checkpoint of " in cut.stderr
    assert f"saw 7\ncheckpoints read from {marks}\n" in cut.stderr
    other = run({**env, "SIGNOFF_AUDIT_KEY_FILE": str(tmp_path / "other.key")}, "audit", "verify")
    assert other.returncode == 1 and "audit broken at entry 1" in other.stderr
    assert "made a new audit key in" in other.stderr
    assert read_checkpoints(marks) == [mark]


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIGNOFF, *args], env=env, capture_output=True, text=True, timeout=60)


def ledger_url(ledger: Ledger) -> str:
    if isinstance(ledger, SqliteLedger):
        return f"sqlite:///{ledger.path}"
    assert isinstance(ledger, PostgresLedger)
    return f"{POSTGRES}?schema={ledger.schema}"


def make_other(url: str, keyring: Keyring) -> Ledger:
    from signoff.ledger import open_ledger

    return open_ledger(url, keyring=keyring)


def test_the_server_appends_checkpoints_outside_the_database(tmp_path: Path) -> None:
    import time

    import httpx

    from tests.servers import signoff_server

    db, marks = tmp_path / "demo.db", tmp_path / "marks" / "checkpoints.jsonl"
    marks.parent.mkdir()
    args = [
        "demo",
        "--ledger",
        f"sqlite:///{db}",
        "--audit-checkpoints",
        str(marks),
        "--audit-checkpoint-every",
        "1",
    ]
    with signoff_server(tmp_path, args, "token") as (base, _):
        for _ in range(100):  # the ready line comes first; the lines after it are written one by one
            ready = (tmp_path / "demo.stdout").read_text()
            if "audit key:" in ready:
                break
            time.sleep(0.05)
        assert f"audit key: {os.environ['SIGNOFF_AUDIT_KEY_FILE']}" in ready
        message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 50 USD to Hanako"}]}
        httpx.post(f"{base}/api/chat", json={"id": "c1", "messages": [message]}, timeout=30)
        for _ in range(100):
            if marks.exists() and read_checkpoints(marks)[-1].count >= 1:
                break
            time.sleep(0.1)
    written = read_checkpoints(marks)
    assert written and written[-1].count == 1 and written[-1].authentic(load_keyring().keyring)
    env = {**os.environ, "COLUMNS": "200"}
    verified = run(env, "audit", "verify", "--ledger", f"sqlite:///{db}", "--checkpoint", str(marks))
    assert verified.returncode == 0, verified.stderr


def test_where_a_call_was_made_is_sealed_with_it() -> None:
    """A call's `context` (Claude Code's `cwd`) is shown to approvers and a rule may test it: a database write
    that moves it breaks the seal, as one that loosens the rule does. A call with none seals as before."""
    from signoff.core.proof import seal_holds, sealed

    key = AuditKey.generate()
    call = ToolCall("c1", "Bash", {"command": "make test"}, {"cwd": "/srv/app"})
    opened = Approval(
        id="apr_1", chat_id="claude-code:s1", call=call, digest=call.digest, description="", rule="Bash",
        created_at=0.0,
    )  # fmt: skip
    approval = sealed(key, opened)
    assert seal_holds(Keyring(key), approval)
    moved = msgspec.structs.replace(
        approval, call=ToolCall("c1", "Bash", {"command": "make test"}, {"cwd": "/"})
    )
    assert not seal_holds(Keyring(key), moved)
    bare = sealed(key, msgspec.structs.replace(opened, call=ToolCall("c1", "Bash", {"command": "make test"})))
    assert seal_holds(Keyring(key), bare)
