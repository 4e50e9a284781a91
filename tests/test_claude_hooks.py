"""`POST /api/hooks/claude-code` on a real uvicorn over SQLite, as Claude Code's `http` hook and
`signoff hook claude-code` call it: allow, deny with the rule's reason, ask held until decided (an edit as
`updatedInput`), deny a margin before the hook's timeout, the single-use claim, `PostToolUse` in the audit,
`PermissionRequest`'s shape and derived call id, and bad input as a 4xx."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff import Policy, SqliteLedger, State
from signoff.hooks.client import margin
from signoff.hooks.ruling import NOT_DECIDED
from signoff.server.app import Settings, create_app
from signoff.server.hooks import PATH
from tests.conftest import SIGNOFF
from tests.servers import in_loop

POLICY = """
[[tools.Read]]
action = "allow"

[[tools.Bash]]
action = "deny"
when = 'command == "rm -rf /"'

[[tools.Bash]]
action = "ask"
"""
ADMIN = "admin-token-for-hooks"


@dataclass
class Served:
    client: httpx.AsyncClient
    ledger: SqliteLedger
    token: str

    async def hook(
        self, event: dict[str, Any], *, seconds: float | None = None, token: str | None = None
    ) -> httpx.Response:
        query = "" if seconds is None else f"?timeout={seconds}"
        headers = {"authorization": f"Bearer {token or self.token}"}
        return await self.client.post(PATH + query, json=event, headers=headers)

    async def pending(self, chat: str) -> Any:
        """The approval the held event opened, once it exists."""
        async with asyncio.timeout(30):
            while not (found := await self.ledger.approvals.query(chat_id=chat, state=State.PENDING)):
                await asyncio.sleep(0.02)
        return found[0]

    async def decide(self, approval_id: str, body: dict[str, Any]) -> httpx.Response:
        headers = {"authorization": f"Bearer {ADMIN}"}
        return await self.client.post(f"/api/approvals/{approval_id}/decision", json=body, headers=headers)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with SqliteLedger(tmp_path / "hooks.db") as ledger:
        _, token = await ledger.principals.register("dev", [], actor="test")
        app = create_app(None, ledger, Settings(token=ADMIN), policy=Policy.from_toml(POLICY))
        async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=60) as client:
            yield Served(client, ledger, token)


def pre(command: str, *, session: str = "s1", use: str = "toolu_1", tool: str = "Bash") -> dict[str, Any]:
    return {
        "session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/work/project",
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool,
        "tool_input": {"command": command}, "tool_use_id": use, "prompt_id": "ignored",
    }  # fmt: skip


def decision(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    said: dict[str, Any] = response.json()["hookSpecificOutput"]
    return said


async def test_a_call_the_policy_allows_is_allowed_at_once_and_opens_no_approval(served: Served) -> None:
    said = decision(await served.hook({**pre("x"), "tool_name": "Read", "tool_input": {"file_path": "/a"}}))
    assert said == {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                    "permissionDecisionReason": "allowed by Read[0]"}  # fmt: skip
    assert await served.ledger.approvals.query(chat_id="claude-code:s1") == []


async def test_a_denied_call_is_denied_with_the_rules_reason(served: Served) -> None:
    said = decision(await served.hook(pre("rm -rf /")))
    assert said["permissionDecision"] == "deny"
    assert said["permissionDecisionReason"].startswith(
        'denied by the policy: rule Bash[0] (command == "rm -rf /")'
    )


async def test_an_asked_call_is_held_until_approved_then_claimed_once(served: Served) -> None:
    held = asyncio.ensure_future(served.hook(pre("make deploy")))
    approval = await served.pending("claude-code:s1")
    assert approval.call.call_id == "toolu_1" and approval.requester == "dev"
    assert approval.call.context == {"cwd": "/work/project", "permission_mode": "default"}
    assert not held.done()
    assert (await served.decide(approval.id, {"approved": True})).status_code == 200
    said = decision(await held)
    assert said["permissionDecision"] == "allow" and "updatedInput" not in said
    assert (await served.ledger.approvals.get(approval.id)).state is State.CONSUMED
    again = decision(await served.hook(pre("make deploy")))  # the same tool_use_id once more: it ran
    assert again["permissionDecision"] == "deny" and "has run already" in again["permissionDecisionReason"]


async def test_another_principal_can_neither_take_nor_report_a_sessions_call(served: Served) -> None:
    """A session is its requester's: another principal's token, replaying the session and call ids it saw
    in the inbox, neither claims the approved call nor reports how it ended, and is audited."""
    _, eve = await served.ledger.principals.register("eve", [], actor="test")
    first = decision(await served.hook(pre("make deploy"), seconds=2))  # undecided in time: asked again later
    assert first["permissionDecision"] == "deny"
    approval = await served.pending("claude-code:s1")
    assert (await served.decide(approval.id, {"approved": True})).status_code == 200
    stolen = decision(await served.hook(pre("make deploy"), token=eve))
    assert (
        stolen["permissionDecision"] == "deny" and "another principal's" in stolen["permissionDecisionReason"]
    )
    other = decision(await served.hook(pre("ls", use="toolu_9"), token=eve))  # nor asks in it
    assert other["permissionDecision"] == "deny"
    assert (
        decision(await served.hook(pre("make deploy")))["permissionDecision"] == "allow"
    )  # dev's, untouched
    post = {**pre("make deploy"), "hook_event_name": "PostToolUse", "tool_response": {"stdout": "forged"}}
    assert (await served.hook(post, token=eve)).status_code == 200
    assert (await served.ledger.approvals.get(approval.id)).outcome is None
    refusals = [e for e in await served.ledger.audit.entries() if e.action == "refuse" and e.actor == "eve"]
    assert len(refusals) == 3


async def test_a_denial_is_answered_with_its_reason(served: Served) -> None:
    held = asyncio.ensure_future(served.hook(pre("make deploy")))
    approval = await served.pending("claude-code:s1")
    await served.decide(approval.id, {"approved": False, "reason": "not on a Friday"})
    said = decision(await held)
    assert said["permissionDecision"] == "deny" and "not on a Friday" in said["permissionDecisionReason"]


async def test_an_edit_comes_back_as_updated_input(served: Served) -> None:
    held = asyncio.ensure_future(served.hook(pre("make deploy")))
    approval = await served.pending("claude-code:s1")
    edited = {"approved": True, "args": {"command": "make deploy-staging"}}
    assert (await served.decide(approval.id, edited)).status_code == 200
    said = decision(await held)
    assert said["permissionDecision"] == "allow"
    assert said["updatedInput"] == {"command": "make deploy-staging"}


async def test_an_undecided_call_is_denied_before_the_hooks_timeout_and_stays_open(served: Served) -> None:
    said = decision(await served.hook(pre("make deploy"), seconds=2))
    assert said["permissionDecision"] == "deny" and NOT_DECIDED in said["permissionDecisionReason"]
    approval = await served.pending("claude-code:s1")
    assert margin(2) == 0.4 and margin(600) == 5
    # decided later, the same call asked again hears the decision
    await served.decide(approval.id, {"approved": True})
    assert decision(await served.hook(pre("make deploy")))["permissionDecision"] == "allow"


async def test_a_permission_request_is_answered_in_its_own_shape_under_a_derived_id(served: Served) -> None:
    event = {**pre("make deploy"), "hook_event_name": "PermissionRequest"}
    del event["tool_use_id"]
    held = asyncio.ensure_future(served.hook(event))
    approval = await served.pending("claude-code:s1")
    assert approval.call.call_id.startswith("perm_") and approval.call.call_id.endswith(".0")
    await served.decide(approval.id, {"approved": True})
    assert decision(await held) == {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}
    # the identical call once more, after the first ran, is a new question: generation 1
    held = asyncio.ensure_future(served.hook(event))
    second = await served.pending("claude-code:s1")
    assert second.call.call_id == approval.call.call_id.removesuffix(".0") + ".1"
    await served.decide(second.id, {"approved": False, "reason": "once is enough"})
    assert decision(await held)["decision"] == {
        "behavior": "deny",
        "message": "denied by admin: once is enough",
    }


async def test_post_tool_use_records_that_it_ran_and_ends_the_claim(served: Served) -> None:
    held = asyncio.ensure_future(served.hook(pre("make deploy")))
    approval = await served.pending("claude-code:s1")
    await served.decide(approval.id, {"approved": True})
    await held
    post = {**pre("make deploy"), "hook_event_name": "PostToolUse", "tool_response": {"stdout": "ok"}}
    answer = await served.hook(post)
    assert answer.status_code == 200 and answer.json() == {}
    ended = await served.ledger.approvals.get(approval.id)
    assert ended.outcome is not None and ended.outcome.ok and len(ended.outcome.result["digest"]) == 64
    ran = [e for e in await served.ledger.audit.entries(0, 1000) if e.action == "ran"]
    assert [(e.subject, e.actor, e.detail["approval"]) for e in ran] == [("toolu_1", "dev", approval.id)]
    assert ran[0].detail["result"] == ended.outcome.result["digest"]


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"hook_event_name": "Stop"}, 422, "hook_event_name"),
        ({"tool_input": "ls"}, 422, "tool_input"),
        ({"session_id": ""}, 422, "session_id"),
        ({"tool_name": "x" * 300}, 422, "tool_name"),
        ({"hook_event_name": "PostToolUse", "tool_use_id": None}, 422, "tool_use_id"),
    ],
)
async def test_a_bad_event_is_a_4xx_naming_its_field(
    served: Served, change: dict[str, Any], status: int, field: str
) -> None:
    event = {k: v for k, v in {**pre("ls"), **change}.items() if v is not None}
    answer = await served.hook(event)
    assert answer.status_code == status and answer.json()["error"]["field"] == field, answer.text


@pytest.mark.parametrize("given", ["0", "abc", "nan", "1e9"])
async def test_a_bad_timeout_is_a_422(served: Served, given: str) -> None:
    answer = await served.client.post(
        f"{PATH}?timeout={given}", json=pre("ls"), headers={"authorization": f"Bearer {served.token}"}
    )
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "timeout"


async def test_an_event_needs_a_bearer_token_and_a_body_within_bounds(served: Served) -> None:
    assert (await served.client.post(PATH, json=pre("ls"))).status_code == 401
    assert (await served.hook(pre("ls"), token="sop_not_a_token")).status_code == 401
    big = pre("x" * (1024 * 1024))
    assert (await served.hook(big)).status_code == 413
    not_json = await served.client.post(
        PATH,
        content=b"{",
        headers={"authorization": f"Bearer {served.token}", "content-type": "application/json"},
    )
    assert not_json.status_code == 422


@pytest.mark.parametrize(
    ("args", "stdin", "said"),
    [
        (["--bogus"], "{}", "signoff hook claude-code: unrecognized arguments: --bogus"),
        ([], "{}", "signoff hook claude-code: no server: pass --server or set SIGNOFF_URL"),
        (
            ["--server", "http://127.0.0.1:9"],
            "not json",
            "signoff hook claude-code: the event on stdin is not JSON",
        ),
        (
            ["--server", "http://127.0.0.1:9"],
            '{"hook_event_name": "Stop"}',
            "signoff hook claude-code: not an",
        ),
        (
            ["--server", "http://127.0.0.1:9"],
            json.dumps(pre("ls")),
            "signoff at http://127.0.0.1:9 could not",
        ),
        (["--ledger", "sqlite:///x.db"], json.dumps(pre("ls")), "signoff hook claude-code: --ledger needs"),
    ],
)
def test_the_command_hook_fails_closed_in_one_line(args: list[str], stdin: str, said: str) -> None:
    """Exit 2, which makes Claude Code block the call, with one line saying why."""
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_URL"} | {"SIGNOFF_TOKEN": "sop_x"}
    done = subprocess.run(
        [SIGNOFF, "hook", "claude-code", *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr


async def test_the_command_hook_answers_as_the_server_does(served: Served) -> None:
    env = {**os.environ, "SIGNOFF_URL": str(served.client.base_url), "SIGNOFF_TOKEN": served.token}
    event = json.dumps(pre("rm -rf /"))
    done = await asyncio.create_subprocess_exec(
        SIGNOFF, "hook", "claude-code", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    out, _ = await done.communicate(event.encode())
    assert done.returncode == 0
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_serve_without_an_agent_serves_the_inbox_and_the_hooks_and_no_chat(tmp_path: Path) -> None:
    """`signoff serve` with a policy and no `--agent`, as a real process: the hook route rules, the inbox
    and the API answer, and there is no chat to start."""
    from tests.servers import signoff_server

    database = tmp_path / "inbox.db"

    async def register() -> str:
        async with SqliteLedger(database) as ledger:
            return (await ledger.principals.register("dev", [], actor="test"))[1]

    token = asyncio.run(register())
    (tmp_path / "policy.toml").write_text(POLICY)
    args = ["serve", "--policy", str(tmp_path / "policy.toml"), "--ledger", f"sqlite:///{database}"]
    with signoff_server(tmp_path, args, ADMIN) as (base, _):
        headers = {"authorization": f"Bearer {token}"}
        read = {**pre("cat x"), "tool_name": "Read", "tool_input": {"file_path": "/work/project/x"}}
        allowed = httpx.post(base + PATH, json=read, headers=headers, timeout=30)
        assert allowed.status_code == 200, allowed.text
        assert allowed.json()["hookSpecificOutput"]["permissionDecision"] == "allow"
        denied = httpx.post(base + PATH, json=pre("rm -rf /", use="toolu_2"), headers=headers, timeout=30)
        assert denied.json()["hookSpecificOutput"]["permissionDecision"] == "deny"
        listed = httpx.get(base + "/api/approvals", headers={"authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert listed.status_code == 200, listed.text
        front = httpx.get(base + "/", timeout=30, follow_redirects=True)
        assert front.status_code == 200 and front.url.path == "/approvals"
        chat = httpx.post(base + "/api/chat", json={"id": "c1", "messages": []}, headers=headers, timeout=30)
        assert chat.status_code == 404, chat.text
