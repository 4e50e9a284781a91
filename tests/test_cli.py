"""The CLI against a real SQLite ledger, run as the `signoff` program a person would type."""

from __future__ import annotations

import asyncio
import os
import pwd
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.demo.walkthrough import demo_policy
from signoff.gate import Gate, Pending
from signoff.ledger import SqliteLedger
from signoff.ledger.postgres import PostgresLedger
from tests.conftest import POSTGRES, SIGNOFF, drop
from tests.workers import payment

USER = pwd.getpwuid(os.getuid()).pw_name
OPERATOR = f"cli:{USER}"
"""Who the CLI acts as: the operating system's user of its process, whatever $USER says."""


def signoff(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIGNOFF, *args], env=env, capture_output=True, text=True, timeout=60)


def db_of(env: dict[str, str]) -> Path:
    return Path(env["SIGNOFF_LEDGER"].removeprefix("sqlite:///"))


def seed(env: dict[str, str], count: int) -> list[str]:
    async def go() -> list[str]:
        async with SqliteLedger(db_of(env)) as ledger:
            return [
                (
                    await ledger.approvals.open(
                        payment(i), chat_id=f"chat-{i % 2}", description=f"Pay {i + 1}", rule="r"
                    )
                ).id
                for i in range(count)
            ]

    return asyncio.run(go())


def state(env: dict[str, str], approval_id: str) -> State:
    async def go() -> State:
        async with SqliteLedger(db_of(env)) as ledger:
            return (await ledger.approvals.get(approval_id)).state

    return asyncio.run(go())


def test_list_show_approve_deny(cli_env: dict[str, str], tmp_path: Path) -> None:
    first, second, third = seed(cli_env, 3)
    listed = signoff(cli_env, "approvals", "list", "--state", "pending")
    assert listed.returncode == 0 and all(i in listed.stdout for i in (first, second, third))
    assert second not in signoff(cli_env, "approvals", "list", "--chat", "chat-0").stdout
    shown = signoff(cli_env, "approvals", "show", first)
    assert shown.returncode == 0 and '"recipient": "r0"' in shown.stdout

    approved = signoff(cli_env, "approvals", "approve", first, "--remember", "session")
    assert approved.returncode == 0 and f"{first} approved by {OPERATOR}" in approved.stdout
    denied = signoff(cli_env, "approvals", "deny", second, "--reason", "no")
    assert denied.returncode == 0 and f"denied by {OPERATOR}" in denied.stdout
    unruled = signoff(cli_env, "approvals", "approve", third, "--args", '{"amount": 1}')
    assert unruled.returncode == 2 and "give --policy FILE" in unruled.stderr, "an edit is a new call"
    rules = tmp_path / "policy.toml"
    rules.write_text('[[tools.process_payment]]\naction = "ask"\n')
    edit = ["approvals", "approve", third, "--args", '{"amount": 1}', "--policy", str(rules)]
    edited = signoff(cli_env, *edit)
    assert edited.returncode == 0 and "approved by cli:" in edited.stdout
    assert [state(cli_env, i) for i in (first, second, third)] == [
        State.APPROVED,
        State.DENIED,
        State.APPROVED,
    ]

    lost = signoff(cli_env, "approvals", "approve", second)
    assert lost.returncode == 1 and f"already decided: denied by {USER} (admin)" in lost.stderr

    grants = signoff(cli_env, "grants", "list")
    assert grants.returncode == 0 and "process_payment" in grants.stdout and "session" in grants.stdout
    grant_id = next(word for word in grants.stdout.split() if word.startswith("grt_"))
    assert signoff(cli_env, "grants", "revoke", grant_id).returncode == 0
    assert "no grants" in signoff(cli_env, "grants", "list").stdout
    again = signoff(cli_env, "grants", "revoke", grant_id)
    assert again.returncode == 1 and "already revoked" in again.stderr

    verified = signoff(cli_env, "audit", "verify")
    assert verified.returncode == 0 and "audit ok: 9 entries" in verified.stdout  # the lost one refused too


def test_the_operator_is_the_processs_user_not_what_user_says(cli_env: dict[str, str]) -> None:
    """One operator typing the command twice under two names is one principal: a quorum of two is not met."""

    async def asked() -> str:
        async with SqliteLedger(db_of(cli_env)) as ledger:
            big = ToolCall(
                "call_big", "process_payment", {"amount": 900, "currency": "USD", "recipient": "Eve"}
            )
            outcome = await Gate(ledger, demo_policy()).authorize(
                big, chat_id="c", wait="deferred", requester="r"
            )
            assert isinstance(outcome, Pending) and outcome.approval.authority.quorum == 2
            return outcome.approval.id

    approval_id = asyncio.run(asked())
    first = signoff({**cli_env, "USER": "opsone", "LOGNAME": "opsone"}, "approvals", "approve", approval_id)
    assert first.returncode == 0 and f"{approval_id} pending: 1 of 2: {USER}" in first.stdout
    second = signoff({**cli_env, "USER": "opstwo", "LOGNAME": "opstwo"}, "approvals", "approve", approval_id)
    said = " ".join(second.stderr.split())
    assert second.returncode == 1 and said == f"error: {OPERATOR} approved {approval_id} already; " + (
        f"it waits for finance, 1 of 2: {USER}"
    )
    assert state(cli_env, approval_id) == State.PENDING


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["approvals", "approve", "apr_missing"], "error: no approval apr_missing", 1),
        (["approvals", "approve", "apr_x", "--remember", "forever"], "must be once, session or always", 2),
        (["approvals", "approve", "apr_x", "--args", "{nope"], "not JSON", 2),
        (["approvals", "approve", "apr_x", "--args", "[1]"], "must be a JSON object", 2),
        (["approvals", "list", "--ledger", "mysql://x"], "unsupported ledger URL 'mysql://x'", 1),
        (
            ["approvals", "list", "--ledger", "sqlite:////nonexistent/dir/x.db"],
            "error: no ledger at /nonexistent/dir/x.db: pass --ledger URL or set SIGNOFF_LEDGER",
            1,
        ),
        (
            ["approvals", "expire", "--ledger", "sqlite:////nonexistent/dir/x.db"],
            "cannot open SQLite ledger",
            1,
        ),
        (["grants", "revoke", "grt_missing"], "no grant grt_missing", 1),
        (["demo", "--oidc-issuer", "https://idp"], "OIDC also needs --oidc-audience, --oidc-jwks", 2),
        (["principals", "revoke", "nobody"], "no principal nobody", 1),
        (["principals", "add", "admin"], "'admin' is reserved", 1),
    ],
)
def test_errors_are_one_clear_line(cli_env: dict[str, str], args: list[str], message: str, code: int) -> None:
    result = signoff(cli_env, *args)
    assert result.returncode == code
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr + result.stdout


def test_a_tampered_audit_row_is_named(cli_env: dict[str, str]) -> None:
    ids = seed(cli_env, 3)
    assert signoff(cli_env, "approvals", "deny", ids[1]).returncode == 0
    assert signoff(cli_env, "audit", "verify").returncode == 0
    with sqlite3.connect(db_of(cli_env)) as db:
        db.execute("UPDATE audit SET actor = 'alice' WHERE seq = 4")
    result = signoff(cli_env, "audit", "verify")
    assert result.returncode == 1
    assert "audit broken at entry 4" in result.stderr and "edited" in result.stderr


def test_a_deleted_audit_row_is_named(cli_env: dict[str, str]) -> None:
    seed(cli_env, 3)
    with sqlite3.connect(db_of(cli_env)) as db:
        db.execute("DELETE FROM audit WHERE seq = 2")
    result = signoff(cli_env, "audit", "verify")
    assert (
        result.returncode == 1 and "audit broken at entry 2" in result.stderr and "missing" in result.stderr
    )


def test_expire_sweeps_due_approvals(cli_env: dict[str, str]) -> None:
    async def go() -> str:
        async with SqliteLedger(db_of(cli_env)) as ledger:
            approval = await ledger.approvals.open(
                payment(0), chat_id="c", description="d", rule="r", deadline=0.01
            )
            return approval.id

    approval_id = asyncio.run(go())
    result = signoff(cli_env, "approvals", "expire")
    assert result.returncode == 0 and "1 expired" in result.stdout
    assert state(cli_env, approval_id) is State.EXPIRED


AGENT = """
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

agent = Agent(TestModel())

@agent.tool_plain
def delete_repo(name: str) -> str:
    return f"deleted {name}"
"""


def test_serve_finds_an_agent_in_the_working_directory_and_asks_for_unlisted_tools(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    import httpx

    (tmp_path / "myagent.py").write_text(AGENT)
    server = subprocess.Popen(
        [SIGNOFF, "serve", "--agent", "myagent:agent", "--port", "0"],
        env={**cli_env, "SIGNOFF_API_TOKEN": "tok"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("signoff serve: http://127.0.0.1:"), first + server.stderr.read()
        base = first.split(": ", 1)[1].strip()
        assert server.stdout.readline().strip() == f"approvals inbox: {base}/approvals"
        assert server.stdout.readline().strip() == "approvals API token: from SIGNOFF_API_TOKEN"
        url = first.split(": ", 1)[1].strip()
        body = {
            "id": "c1",
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        }
        anonymous = httpx.post(f"{url}/api/chat", json=body, timeout=30)
        assert anonymous.status_code == 401, "serve takes credential-less chats only with --anonymous-chats"
        reply = httpx.post(f"{url}/api/chat", json=body, headers={"authorization": "Bearer tok"}, timeout=30)
        assert '"type":"tool-approval-request"' in reply.text and "deleted" not in reply.text
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--agent", "nowhere:agent"], "--agent nowhere:agent: cannot import nowhere"),
        (["serve", "--agent", "json:dumps"], "--agent json:dumps: a function, not a pydantic-ai Agent"),
        (["serve", "--agent", "json"], "--agent json: must be module:attribute"),
        (["demo", "--wait", "soon"], "must be deferred or blocking"),
        (["demo", "--ledger", "sqlite:////nonexistent/dir/x.db"], "cannot open SQLite ledger"),
    ],
)
def test_serve_and_demo_fail_in_one_line(cli_env: dict[str, str], args: list[str], message: str) -> None:
    result = signoff(cli_env, *args)
    assert result.returncode != 0
    assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_db_upgrade_creates_the_schema_once(backend: str, tmp_path: Path) -> None:
    schema = f"test_{uuid.uuid4().hex[:12]}"
    url = f"sqlite:///{tmp_path / 'up.db'}" if backend == "sqlite" else f"{POSTGRES}?schema={schema}"
    env = {**os.environ, "SIGNOFF_LEDGER": url}
    try:
        first = signoff(env, "db", "upgrade")
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip().startswith("ledger schema migrated from version 0 to ")
        again = signoff(env, "db", "upgrade")
        assert again.stdout.strip().startswith("ledger schema already at ")
    finally:
        if backend == "postgres":
            asyncio.run(drop(PostgresLedger(POSTGRES, schema=schema)))


def test_db_upgrade_names_an_unreachable_server() -> None:
    env = {**os.environ, "SIGNOFF_LEDGER": "postgresql://nobody@127.0.0.1:1/x"}
    failed = signoff(env, "db", "upgrade")
    assert failed.returncode == 1 and "cannot reach PostgreSQL ledger" in failed.stderr


def test_what_others_wrote_prints_as_it_is(cli_env: dict[str, str]) -> None:
    """A description or a recorded name can't hide characters, reorder what follows, pass a Cyrillic letter
    off as a Latin one, or style the terminal: the CLI spells them out."""

    async def go() -> str:
        async with SqliteLedger(db_of(cli_env)) as ledger:
            call = ToolCall("c1", "process_payment", {"recipient": "M\u0430llory"})
            approval = await ledger.approvals.open(
                call, chat_id="c[red]1[/]", description="Pay 50 USD to \u202eokanaH", rule="r"
            )
            await ledger.audit.record("refuse", approval.id, "evil\x1b[2J\u200bactor", why="x")
            return approval.id

    approval_id = asyncio.run(go())
    listed = signoff(cli_env, "approvals", "list").stdout
    assert "Pay 50 USD to ⟨U+202E⟩okanaH" in listed and "\u202e" not in listed
    assert "c[red]1[/]" in listed, "markup in a chat id is printed, not applied"
    shown = signoff(cli_env, "approvals", "show", approval_id).stdout
    assert "⚠M\u0430llory" in shown and "⟨U+202E⟩okanaH" in shown
    audit = signoff(cli_env, "audit", "list").stdout
    assert "evil⟨U+001B⟩[2J⟨U+200B⟩actor" in audit and "\x1b" not in audit


def test_serving_commands_take_their_own_options_and_the_shared_ones(cli_env: dict[str, str]) -> None:
    """`demo` and `serve` share their serving options (`cli/serving.py`), each keeps its own, and a help
    text shows its brackets as written (Rich reads `[adk]` as markup unless it is escaped)."""
    shared = ["--host", "--ledger", "--wait", "--workers", "--allowed-host", "--oidc-issuer", "--socket-idle"]
    for command, own, not_own in (("demo", "--runtime", "--agent"), ("serve", "--agent", "--runtime")):
        shown = signoff({**cli_env, "COLUMNS": "200"}, command, "--help")
        assert shown.returncode == 0, shown.stderr
        assert all(option in shown.stdout for option in [*shared, own]), shown.stdout
        assert not_own not in shown.stdout
    assert "signoff[adk]" in signoff({**cli_env, "COLUMNS": "200"}, "demo", "--help").stdout
