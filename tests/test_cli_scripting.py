"""A CLI people can script (issue 42, item 3), run as the `signoff` program: `--json` of every list and show,
whole ids when piped and shortest unique prefixes on a terminal, ids by prefix, `$SIGNOFF_LEDGER` for every
command, read commands that make nothing, and hints that name the ledger in use."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import subprocess
from pathlib import Path
from typing import Any

import pytest

from signoff.cli.ids import prefixes
from signoff.core import notice, opening, task
from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.views import approval_json, notice_json
from signoff.ledger import SqliteLedger
from signoff.ledger.keyfile import load_keyring
from signoff.ledger.url import command_hint
from signoff.server.approvals import grant_json
from tests.conftest import SIGNOFF
from tests.workers import payment

ALPHA = "apr_HHUqgAlpha00000000000000000"
BRAVO = "apr_HHUqgBravo00000000000000000"
TOP = "apr_ZZtop0000000000000000000000"
TASK = "task_Q7run0000000000000000"
NOTICE = "msg_c0ffee00000000000000000000000000"
"""The CLI's own notices get random ids: `msg_c0ffee` stays unique among them."""
NO_LEDGER = "error: no ledger at ./signoff.db: pass --ledger URL or set SIGNOFF_LEDGER\n"


def signoff(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIGNOFF, *args], env=env, capture_output=True, text=True, timeout=60, cwd=cwd)


def parsed(env: dict[str, str], *args: str) -> Any:
    result = signoff(env, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def on_terminal(env: dict[str, str], *args: str, columns: int) -> str:
    """What the command prints to a terminal `columns` wide, without its colours."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [SIGNOFF, *args], env={**env, "COLUMNS": str(columns)}, stdin=subprocess.DEVNULL, stdout=follower
    ) as process:
        os.close(follower)
        chunks = []
        while select.select([leader], [], [], 60)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the program closed its terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 0
    os.close(leader)
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(chunks).decode()).replace("\r\n", "\n")


def ledger_of(env: dict[str, str]) -> SqliteLedger:
    return SqliteLedger(Path(env["SIGNOFF_LEDGER"].removeprefix("sqlite:///")))


@pytest.fixture(autouse=True)
def audit_key() -> None:
    """The run's audit key, made now: a command that makes it says so, on a line of its own."""
    load_keyring()


@pytest.fixture
def seeded(cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Three approvals (two sharing `apr_HHUqg`, one announced to a webhook, one described with a hidden
    character), a task and a principal, with ids chosen so that prefixes are known."""
    ids = iter([ALPHA, BRAVO, TOP])
    monkeypatch.setattr(opening, "new_approval_id", lambda: next(ids))
    monkeypatch.setattr(task, "new_task_id", lambda: TASK)
    monkeypatch.setattr(notice, "new_notice_id", lambda: NOTICE)

    async def go() -> None:
        async with ledger_of(cli_env) as ledger:
            await ledger.approvals.open(payment(0), chat_id="c0", description="Pay 1", rule="r")
            await ledger.approvals.open(
                payment(1), chat_id="c1", description="Pay 2", rule="r", notify=("webhook:ops",)
            )
            await ledger.approvals.open(payment(2), chat_id="c0", description="Pay \u202eokanaH", rule="r")
            await ledger.tasks.create(
                ToolCall("t1", "export_report", {}), chat_id="c0", worker="w", actor="a"
            )
            await ledger.principals.register("alice", ["finance"], display="Alice", actor="test")

    asyncio.run(go())
    return cli_env


def test_every_list_and_show_prints_the_rest_apis_json(seeded: dict[str, str]) -> None:
    approved = signoff(seeded, "approvals", "approve", ALPHA, "--remember", "session")
    assert approved.returncode == 0, approved.stderr

    async def views() -> dict[str, Any]:
        async with ledger_of(seeded) as ledger:
            return {
                "approvals": [approval_json(a) for a in await ledger.approvals.query()],
                "bravo": approval_json(await ledger.approvals.get(BRAVO)),
                "notices": await ledger.outbox.query(),
                "grants": [grant_json(g) for g in await ledger.grants.query(active=False)],
                "tasks": [t.public() for t in await ledger.tasks.query()],
            }

    expected = asyncio.run(views())
    listed = parsed(seeded, "approvals", "list")
    assert listed == {"approvals": expected["approvals"]}
    first = listed["approvals"][0]
    assert {"id", "chat_id", "state", "call", "digest", "description", "rule", "created_at"} <= set(first)
    assert {"quorum", "awaiting", "tally", "decision"} <= set(first) and first["state"] == "approved"
    assert set(first["call"]) == {"call_id", "tool", "args"}
    assert [a["id"] for a in parsed(seeded, "approvals", "list", "--state", "pending")["approvals"]] == [
        BRAVO,
        TOP,
    ]

    [announced] = expected["notices"]
    assert parsed(seeded, "approvals", "show", BRAVO) == {
        **expected["bravo"],
        "notices": [notice_json(announced)],
    }
    assert parsed(seeded, "outbox", "list") == {"notices": [{"approval_id": BRAVO, **notice_json(announced)}]}
    assert set(parsed(seeded, "outbox", "list")["notices"][0]) >= {"id", "approval_id", "channel", "type"}

    grants = parsed(seeded, "grants", "list")
    assert grants == {"grants": expected["grants"]} and grants["grants"][0]["scope"] == "session"
    assert {"id", "tool", "scope", "any_args", "created_by", "created_at", "active"} <= set(
        grants["grants"][0]
    )

    assert parsed(seeded, "tasks", "list") == {"tasks": expected["tasks"]}
    shown = parsed(seeded, "tasks", "show", TASK)
    assert shown == expected["tasks"][0] and {"id", "call_id", "tool", "state", "status"} <= set(shown)

    [alice] = parsed(seeded, "principals", "list")["principals"]
    assert alice == {
        "id": "alice",
        "name": "Alice",
        "roles": ["finance"],
        "created_at": alice["created_at"],
        "created_by": "test",
        "active": True,
    }, "never the token's hash nor the MAC"

    entries = parsed(seeded, "audit", "list")["entries"]
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert {"seq", "at", "actor", "action", "subject", "detail", "prev", "hash"} <= set(entries[0])
    assert "open" in {e["action"] for e in entries} and "approve" in {e["action"] for e in entries}
    assert all(None not in e.values() for e in entries)


def test_json_keeps_strings_exact_and_escapes_what_would_hide(seeded: dict[str, str]) -> None:
    raw = signoff(seeded, "approvals", "show", TOP, "--json").stdout
    assert "\u202e" not in raw and "\\u202e" in raw, "a terminal shows the override rather than obeying it"
    assert json.loads(raw)["description"] == "Pay \u202eokanaH"
    human = signoff(seeded, "approvals", "show", TOP).stdout
    assert "Pay ⟨U+202E⟩okanaH" in human and '"call_id": "call_2"' in human


@pytest.mark.parametrize("columns", ["80", "200"])
def test_piped_tables_print_ids_whole_one_record_a_line(seeded: dict[str, str], columns: str) -> None:
    env = {**seeded, "COLUMNS": columns}
    listed = signoff(env, "approvals", "list").stdout
    for approval_id, description in ((ALPHA, "Pay 1"), (BRAVO, "Pay 2"), (TOP, "Pay ⟨U+202E⟩okanaH")):
        [line] = [line for line in listed.splitlines() if approval_id in line]
        assert "pending" in line and description in line, listed
    assert TASK in signoff(env, "tasks", "list").stdout
    outbox = signoff(env, "outbox", "list").stdout
    [line] = [line for line in outbox.splitlines() if NOTICE in line]
    assert BRAVO in line and "webhook:ops" in line


@pytest.mark.parametrize("columns", [80, 120])
def test_a_terminal_shows_shortest_unique_prefixes(seeded: dict[str, str], columns: int) -> None:
    shown = on_terminal(seeded, "approvals", "list", columns=columns)
    assert prefixes([ALPHA, BRAVO, TOP], "apr_") == {
        ALPHA: "apr_HHUqgA",
        BRAVO: "apr_HHUqgB",
        TOP: "apr_ZZto",
    }
    assert re.findall(r"apr_[\w-]+", shown) == ["apr_HHUqgA", "apr_HHUqgB", "apr_ZZto"], shown
    assert max(len(line) for line in shown.splitlines()) <= columns
    tasks = on_terminal(seeded, "tasks", "list", columns=columns)
    assert re.findall(r"task_[\w-]+", tasks) == ["task_Q7ru"]
    outbox = on_terminal(seeded, "outbox", "list", columns=columns)
    assert re.findall(r"(?:msg|apr)_[\w-]+", outbox) == ["msg_c0ff", "apr_HHUqgB"]
    again = signoff(seeded, "approvals", "show", "apr_HHUqgB", "--json")
    assert json.loads(again.stdout)["id"] == BRAVO, "what a table shows, a command takes"


def test_an_id_is_taken_by_any_unique_prefix(seeded: dict[str, str]) -> None:
    assert json.loads(signoff(seeded, "approvals", "show", "apr_ZZ", "--json").stdout)["id"] == TOP
    assert json.loads(signoff(seeded, "tasks", "show", "task_Q", "--json").stdout)["id"] == TASK
    of = parsed(seeded, "outbox", "list", "--approval", "apr_HHUqgB")["notices"]
    assert [n["id"] for n in of] == [NOTICE]

    approved = signoff(seeded, "approvals", "approve", "apr_HHUqgA", "--remember", "session")
    assert approved.returncode == 0 and approved.stdout.startswith(f"{ALPHA} approved by cli:")
    denied = signoff(seeded, "approvals", "deny", "apr_HHUqgB")
    assert denied.returncode == 0 and denied.stdout.startswith(f"{BRAVO} denied by cli:")
    cancelled = signoff(seeded, "approvals", "cancel", "apr_ZZt")
    assert cancelled.returncode == 0 and cancelled.stdout.startswith(f"{TOP} cancelled by cli:")
    retried = signoff(seeded, "outbox", "retry", "msg_c0ffee")
    assert retried.returncode == 0 and retried.stdout.startswith(f"{NOTICE} (webhook:ops")
    [grant] = parsed(seeded, "grants", "list")["grants"]
    revoked = signoff(seeded, "grants", "revoke", grant["id"][:8])
    assert revoked.returncode == 0 and revoked.stdout.startswith(f"{grant['id']} revoked by cli:")
    stopped = signoff(seeded, "tasks", "cancel", "task_Q7")
    assert stopped.returncode == 0 and stopped.stdout.startswith(f"{TASK} cancelled by cli:")


@pytest.mark.parametrize("command", ["show", "approve", "deny", "cancel"])
def test_an_ambiguous_prefix_is_refused_naming_its_candidates(seeded: dict[str, str], command: str) -> None:
    refused = signoff(seeded, "approvals", command, "apr_HHUqg")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"error: approval apr_HHUqg is ambiguous: it begins {ALPHA}, {BRAVO}; give more of the id\n"
    )

    async def states() -> list[State]:
        async with ledger_of(seeded) as ledger:
            return [(await ledger.approvals.get(i)).state for i in (ALPHA, BRAVO)]

    assert asyncio.run(states()) == [State.PENDING, State.PENDING]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["approvals", "show", "apr_nope"], "no approval apr_nope"),
        (["approvals", "approve", "apr_nope"], "no approval apr_nope"),
        (["approvals", "show", "apr_"], "no approval apr_"),
        (["approvals", "approve", ""], "no approval ''"),
        (["tasks", "show", "task_nope"], "no task task_nope"),
        (["grants", "revoke", "grt_nope"], "no grant grt_nope"),
        (["outbox", "retry", "msg_nope"], "no notice msg_nope"),
        (["outbox", "list", "--approval", "apr_nope"], "no approval apr_nope"),
    ],
)
def test_an_unknown_id_is_named(seeded: dict[str, str], args: list[str], said: str) -> None:
    """An empty id, as an unset `$ID` in a script gives, or a bare tag names nothing, not the only record."""
    refused = signoff(seeded, *args)
    assert (refused.returncode, refused.stderr) == (1, f"error: {said}\n")


EVERY_COMMAND = [
    ["approvals", "list"],
    ["approvals", "show", "apr_x"],
    ["approvals", "approve", "apr_x"],
    ["approvals", "deny", "apr_x"],
    ["approvals", "cancel", "apr_x"],
    ["approvals", "expire"],
    ["grants", "list"],
    ["grants", "revoke", "grt_x"],
    ["audit", "verify"],
    ["audit", "checkpoint"],
    ["audit", "list"],
    ["tasks", "list"],
    ["tasks", "show", "task_x"],
    ["tasks", "cancel", "task_x"],
    ["principals", "add", "bob"],
    ["principals", "list"],
    ["principals", "roles", "bob"],
    ["principals", "revoke", "bob"],
    ["principals", "link", "bob", "--email", "bob@example.com"],
    ["principals", "unlink", "bob"],
    ["outbox", "list"],
    ["outbox", "retry", "msg_x"],
    ["db", "upgrade"],
    ["walkthrough"],
    ["demo", "--port", "0"],
    ["serve", "--agent", "nowhere:agent", "--port", "0"],
    ["mcp-gateway", "--upstream-url", "http://127.0.0.1:9/mcp", "--port", "0"],
]


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=" ".join)
def test_signoff_ledger_names_the_ledger_for_every_command(cli_env: dict[str, str], args: list[str]) -> None:
    result = signoff({**cli_env, "SIGNOFF_LEDGER": "mysql://from-env"}, *args)
    assert result.returncode == 1
    assert result.stderr.startswith("error: unsupported ledger URL 'mysql://from-env'"), result.stderr


READS = [
    ["approvals", "list", "--json"],
    ["approvals", "show", "apr_x"],
    ["grants", "list"],
    ["audit", "verify"],
    ["audit", "checkpoint"],
    ["audit", "list"],
    ["tasks", "list"],
    ["tasks", "show", "task_x", "--json"],
    ["principals", "list"],
    ["outbox", "list"],
]


@pytest.fixture
def empty(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An empty folder, and an environment that names no ledger and an audit key not made yet."""
    folder = tmp_path / "empty"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_LEDGER"}
    env["SIGNOFF_AUDIT_KEY_FILE"] = str(tmp_path / "keys" / "audit.key")
    return folder, env


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_in_an_empty_folder_makes_nothing(empty: tuple[Path, dict[str, str]], args: list[str]) -> None:
    folder, env = empty
    result = signoff(env, *args, cwd=folder)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", NO_LEDGER)
    assert list(folder.iterdir()) == []
    assert not Path(env["SIGNOFF_AUDIT_KEY_FILE"]).exists(), "nor an audit key"


def test_a_read_names_the_missing_ledger_it_was_given(empty: tuple[Path, dict[str, str]]) -> None:
    folder, env = empty
    named = signoff(env, "approvals", "list", "--ledger", "sqlite:///other.db", cwd=folder)
    assert named.stderr == NO_LEDGER.replace("./signoff.db", "./other.db")
    absolute = signoff({**env, "SIGNOFF_LEDGER": f"sqlite:///{folder}/x.db"}, "audit", "list", cwd=folder)
    assert absolute.stderr == NO_LEDGER.replace("./signoff.db", f"{folder}/x.db")
    assert list(folder.iterdir()) == []


def test_a_write_in_an_empty_folder_still_makes_its_ledger(empty: tuple[Path, dict[str, str]]) -> None:
    folder, env = empty
    result = signoff(env, "approvals", "expire", cwd=folder)
    assert result.returncode == 0 and "0 expired" in result.stdout
    assert (folder / "signoff.db").exists()
    assert signoff(env, "approvals", "list", cwd=folder).stdout.strip() == "no approvals"


def test_a_hint_names_the_ledger_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIGNOFF_LEDGER", raising=False)
    assert command_hint("approvals approve apr_x") == "signoff approvals approve apr_x"
    assert command_hint("walkthrough", "sqlite:///signoff.db") == "signoff walkthrough"
    assert command_hint("walkthrough", "sqlite:///x.db") == "signoff walkthrough --ledger sqlite:///x.db"
    url = "postgresql://ops:s3cret@db:5432/signoff?schema=pay"
    assert command_hint("approvals list", url) == (
        "signoff approvals list --ledger 'postgresql://ops@db:5432/signoff?schema=pay'"
    ), "quoted for the shell, and never the password"
    assert command_hint("approvals list", "redis://:pw@cache:6379/0").endswith(
        "--ledger redis://cache:6379/0"
    )
    monkeypatch.setenv("SIGNOFF_LEDGER", "sqlite:////srv/signoff.db")
    assert command_hint("approvals list") == "signoff approvals list --ledger sqlite:////srv/signoff.db"
