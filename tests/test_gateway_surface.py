"""A gateway that is only a gateway (issue 42, items 6 and 8): `mcp-gateway --help` shows its own options
and none of a chat's; it serves the inbox and the API, never a chat page; its chats are named after the MCP
principal once; an approval its requester gave reads "by alice (the requester)"; and `--print-config`
prints a desktop client's config that starts from anywhere, with absolute paths checked to exist.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from signoff.cli.common import os_user
from signoff.core.approval import State
from tests.conftest import ROOT, SIGNOFF
from tests.servers import signoff_server
from tests.test_mcp_gateway import (
    MODERN,
    POLICY,
    UPSTREAM,
    Gateway,
    _principals,
    answering,
    client,
    stdio_gateway,
    text,
)

CHAT_OPTIONS = (
    "--model",
    "--browser-timeout",
    "--wait",
    "--keepalive",
    "--task-silence",
    "--max-sockets",
    "--socket-idle",
)


def signoff(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [SIGNOFF, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False
    )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("surface")
    db, runs, policy = directory / "ledger.db", directory / "runs.jsonl", directory / "policy.toml"
    policy.write_text(POLICY)
    tokens = asyncio.run(_principals(db))
    args = [
        "mcp-gateway", "--ledger", f"sqlite:///{db}", "--policy", str(policy), "--hold", "1",
        "--upstream-env", "UPSTREAM_RUNS", "--state-key-file", str(directory / "state.keys"),
        "--", *UPSTREAM,
    ]  # fmt: skip
    admin = "admin-" + os.urandom(8).hex()
    with signoff_server(directory, args, admin, env={"UPSTREAM_RUNS": str(runs)}) as (base, _):
        yield Gateway(base, db, runs, {**tokens, "admin": admin})


# -- item 6: only a gateway --------------------------------------------------------------------------------


def test_the_gateways_help_shows_its_own_options_and_no_chats() -> None:
    shown = signoff("mcp-gateway", "--help")
    assert shown.returncode == 0, shown.stderr
    assert [o for o in CHAT_OPTIONS if o in shown.stdout] == []
    for own in ("--stdio", "--upstream-url", "--hold", "--oidc-issuer", "--workers", "--print-config"):
        assert own in shown.stdout, own
    served = signoff("serve", "--help")
    assert [o for o in CHAT_OPTIONS if o not in served.stdout] == []  # a chat's server keeps them


def test_the_gateway_serves_the_inbox_and_the_api_and_no_chat_page(gateway: Gateway) -> None:
    front = httpx.get(f"{gateway.base}/")
    assert front.is_redirect and front.headers["location"] == "/approvals"
    assert httpx.get(f"{gateway.base}/approvals").status_code == 200
    listed = httpx.get(
        f"{gateway.base}/api/approvals", headers={"authorization": f"Bearer {gateway.tokens['admin']}"}
    )
    assert listed.status_code == 200
    chat = httpx.post(f"{gateway.base}/api/chat", json={"id": "c1", "messages": []})
    assert chat.status_code == 404, chat.text


async def test_an_http_chat_is_named_after_its_principal_and_the_requester_by_name(gateway: Gateway) -> None:
    async with client(gateway, "alice", elicitation_callback=answering("approve", "mine")) as mcp:
        result = await mcp.call_tool("pay", {"amount": 4, "to": "surface-self"})
    assert text(result) == "paid 4.0 to surface-self"
    approval = await gateway.approval("surface-self")
    assert approval.chat_id == "mcp:alice" and approval.state is State.CONSUMED
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {gateway.tokens['admin']}"}) as http:
        shown = (await http.get(f"{gateway.base}/api/approvals/{approval.id}")).json()
    assert shown["chat_id"] == "mcp:alice"
    assert shown["decision"]["who"] == "alice (the requester)"


async def test_a_stdio_chat_is_named_after_the_os_user_once(tmp_path: Path) -> None:
    params, db, _, _ = stdio_gateway(tmp_path)
    async with Client(params, mode=MODERN) as mcp:
        await mcp.call_tool("pay", {"amount": 2, "to": "stdio-named"})
    from signoff.ledger import open_ledger

    async with open_ledger(f"sqlite:///{db}") as ledger:
        (approval,) = await ledger.approvals.query()
    assert approval.requester == f"mcp:{os_user()}"
    assert approval.chat_id == f"mcp:{os_user()}"


# -- item 8: desktop clients that start ---------------------------------------------------------------------


def print_config(client_name: str, cwd: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return signoff(
        "mcp-gateway", "--print-config", client_name, "--policy", "policy.toml",
        "--ledger", "sqlite:///ledger.db", *more, "--", *UPSTREAM, cwd=cwd,
    )  # fmt: skip


def entry(client_name: str, printed: str) -> dict[str, Any]:
    """The signoff server's entry in a client's config, checking the file's shape on the way."""
    config = json.loads(printed)
    if client_name == "vscode":  # .vscode/mcp.json
        server: dict[str, Any] = config["servers"]["signoff"]
        assert server["type"] == "stdio"
        return server
    server = config["mcpServers"]["signoff"]  # claude_desktop_config.json, .cursor/mcp.json
    assert "type" not in server
    return server


@pytest.mark.parametrize("client_name", ["claude-desktop", "cursor", "vscode"])
def test_print_config_names_this_signoff_and_absolute_paths(tmp_path: Path, client_name: str) -> None:
    (tmp_path / "policy.toml").write_text(POLICY)
    printed = print_config(client_name, tmp_path)
    assert printed.returncode == 0, printed.stderr
    server = entry(client_name, printed.stdout)
    assert server["command"] == SIGNOFF and Path(server["command"]).is_absolute()
    args = server["args"]
    assert args[:2] == ["mcp-gateway", "--stdio"]
    assert args[args.index("--policy") + 1] == str(tmp_path / "policy.toml")
    assert args[args.index("--ledger") + 1] == f"sqlite:///{tmp_path / 'ledger.db'}"
    assert args[args.index("--") + 1 :] == UPSTREAM
    assert server["env"]["SIGNOFF_AUDIT_KEY_FILE"] == os.environ["SIGNOFF_AUDIT_KEY_FILE"]


def test_print_config_refuses_paths_that_do_not_exist(tmp_path: Path) -> None:
    missing = print_config("claude-desktop", tmp_path)
    assert missing.returncode == 1 and missing.stdout == ""
    assert f"{tmp_path / 'policy.toml'}" in " ".join(missing.stderr.split())
    assert "Traceback" not in missing.stderr
    (tmp_path / "policy.toml").write_text(POLICY)
    nowhere = signoff(
        "mcp-gateway", "--print-config", "cursor", "--policy", "policy.toml",
        "--ledger", "sqlite:////no/such/dir/ledger.db", "--", *UPSTREAM, cwd=tmp_path,
    )  # fmt: skip
    assert nowhere.returncode == 1 and "/no/such/dir" in nowhere.stderr
    assert "Traceback" not in nowhere.stderr
    unknown = signoff("mcp-gateway", "--print-config", "notepad", cwd=tmp_path)
    assert unknown.returncode != 0 and "claude-desktop" in unknown.stderr


async def test_the_printed_config_starts_from_anywhere_with_a_bare_path(tmp_path: Path) -> None:
    """As a desktop client spawns it: another directory, a PATH without this virtualenv, and only the
    environment the config names."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "policy.toml").write_text(POLICY)
    runs = tmp_path / "runs.jsonl"
    printed = print_config(
        "claude-desktop", project, "--upstream-env", f"UPSTREAM_RUNS={runs}", "--hold", "0"
    )
    assert printed.returncode == 0, printed.stderr
    server = entry("claude-desktop", printed.stdout)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **server["env"]}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env, cwd=elsewhere)
    async with Client(params, mode=MODERN) as mcp:
        result = await mcp.call_tool("lookup", {"query": "from-a-desktop"})
    assert text(result) == "found from-a-desktop"
    assert (project / "ledger.db").exists() and not (elsewhere / "ledger.db").exists()


def test_the_manual_shows_the_command_not_a_literal_config() -> None:
    section = (ROOT / "docs" / "mcp-gateway.md").read_text()
    assert "--print-config claude-desktop" in section
    assert '"command": "signoff"' not in section
