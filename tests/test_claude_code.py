"""The real Claude Code CLI (npm, pinned in tests/claude_code) behind signoff, offline against the Messages
API stub (tests/claude_stub.py), through each door: the `command` hook, the `http` hook and the
permission-prompt tool. "Runs" is what the shell command did: a line appended to a file in the project.

Where Claude Code's own rules would let a call run (`--allowedTools Bash`), a hook that failed open would run
it: those tests show that signoff's answer, or the command hook's exit 2, is what kept it from running.

Not under `unshare -n`: the stub, the server and the CLI would all have to live in one new network
namespace (it has its own loopback), and these tests decide from pytest while the CLI waits. The four
variables below, a throwaway HOME and the stub seeing every request keep the CLI offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from signoff import Gate, Policy, SqliteLedger, State
from signoff.channels.config import Channels, EmailChannel, SlackChannel
from signoff.channels.slack import APPROVE
from signoff.claude import can_use_tool
from signoff.hooks.ruling import NOT_DECIDED
from signoff.server.app import Settings, create_app
from tests.claude_stub import Stub, result_text, tool_results
from tests.conftest import ROOT, SIGNOFF
from tests.servers import in_loop
from tests.test_email import form_nonce, link_in, mail_for, post, smtp_server
from tests.test_slack import SIGNING, SlackApi, click, eventually

CLAUDE = ROOT / "tests" / "claude_code" / "node_modules" / ".bin" / "claude"
ADMIN = "admin-token-for-claude-code"
POLICY = """
[[tools.Bash]]
action = "allow"
when = 'command == "echo allowed >> ran.txt"'

[[tools.Bash]]
action = "deny"
when = 'command == "echo denied >> ran.txt"'

[[tools.Bash]]
action = "ask"

[[tools.mcp__payments__pay]]
action = "ask"
approvers = ["role:finance"]
quorum = 2
requester_may_approve = false
notify = ["slack:payments", "email:finance"]
"""


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    assert CLAUDE.exists(), "run tests/claude_code/install.sh (scripts/test does)"


@pytest.fixture(scope="module")
def stub() -> Iterator[Stub]:
    running = Stub().start()
    yield running
    running.shutdown()


@dataclass
class Site:
    base: str
    ledger: SqliteLedger
    token: str
    client: httpx.AsyncClient
    stub: Stub
    project: Path

    def env(self, **more: str) -> dict[str, str]:
        home = self.project.parent / "home"
        return {
            "PATH": os.environ["PATH"], "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": self.stub.url, "ANTHROPIC_API_KEY": "sk-test", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1", "SIGNOFF_URL": self.base, "SIGNOFF_TOKEN": self.token,
            "SIGNOFF_AUDIT_KEY_FILE": os.environ["SIGNOFF_AUDIT_KEY_FILE"], **more,
        }  # fmt: skip

    def hooks(self, *hooks: dict[str, Any]) -> None:
        settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": list(hooks)}]}}
        (self.project / ".claude").mkdir(exist_ok=True)
        (self.project / ".claude" / "settings.json").write_text(json.dumps(settings))

    async def claude(self, tool: str, args: dict[str, Any], *options: str, **env: str) -> str:
        """Run `claude -p` to make one call of `tool`; its result as the model read it."""
        before = len(self.stub.requests)
        prompt = f"call {tool} {json.dumps(args)}"
        process = await asyncio.create_subprocess_exec(
            str(CLAUDE), "-p", prompt, *options, cwd=self.project, env=self.env(**env),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, (out + err).decode()[-2000:]
        made = [r for r in self.stub.requests[before:] if tool_results(r)]
        assert len(made) == 1, f"the model heard no result: {out.decode()[-500:]}"
        return "".join(result_text(block) for block in tool_results(made[0]))

    def runs(self) -> list[str]:
        ran = self.project / "ran.txt"
        return ran.read_text().splitlines() if ran.exists() else []

    async def pending(self) -> Any:
        async with asyncio.timeout(60):
            while not (found := await self.ledger.approvals.query(state=State.PENDING)):
                await asyncio.sleep(0.05)
        return found[0]

    async def decide(self, approval_id: str, **body: Any) -> None:
        answer = await self.client.post(
            f"/api/approvals/{approval_id}/decision", json=body, headers={"authorization": f"Bearer {ADMIN}"}
        )
        assert answer.status_code == 200, answer.text


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, stub: Stub, channels: Channels | None = None, rules: str = POLICY
) -> AsyncIterator[Site]:
    """`signoff serve`'s app with no agent, on a real uvicorn over SQLite, and a project to run Claude in."""
    project = tmp_path / "project"
    project.mkdir()
    async with SqliteLedger(tmp_path / "signoff.db") as ledger:
        _, token = await ledger.principals.register("dev", [], actor="test")
        policy = Policy.from_toml(rules, resolve=os.path.realpath)
        app = create_app(None, ledger, Settings(token=ADMIN), policy=policy, channels=channels)
        async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=60) as client:
            yield Site(f"http://{host}", ledger, token, client, stub, project)


@pytest.fixture
async def site(tmp_path: Path, stub: Stub) -> AsyncIterator[Site]:
    async with serving(tmp_path, stub) as served:
        yield served


COMMAND = {"type": "command", "command": f"{SIGNOFF} hook claude-code"}


def bash(command: str) -> dict[str, str]:
    return {"command": command}


async def test_a_call_the_policy_allows_runs(site: Site) -> None:
    site.hooks(COMMAND)
    said = await site.claude("Bash", bash("echo allowed >> ran.txt"))
    assert site.runs() == ["allowed"], said


async def test_a_denied_call_never_runs_and_the_model_hears_why(site: Site) -> None:
    site.hooks(COMMAND)
    said = await site.claude("Bash", bash("echo denied >> ran.txt"), "--allowedTools", "Bash")
    assert site.runs() == []
    assert 'denied by the policy: rule Bash[1] (command == "echo denied >> ran.txt")' in said


async def test_an_asked_call_waits_for_approval_from_the_api_and_runs_once(site: Site) -> None:
    site.hooks(COMMAND)
    running = asyncio.ensure_future(site.claude("Bash", bash("echo asked >> ran.txt")))
    approval = await site.pending()
    assert approval.chat_id.startswith("claude-code:") and approval.requester == "dev"
    assert approval.call.call_id.startswith("toolu_") and site.runs() == []
    await site.decide(approval.id, approved=True)
    await running
    assert site.runs() == ["asked"]
    assert (await site.ledger.approvals.get(approval.id)).state is State.CONSUMED


async def test_an_asked_call_that_is_denied_never_runs(site: Site) -> None:
    site.hooks(COMMAND)
    running = asyncio.ensure_future(
        site.claude("Bash", bash("echo asked >> ran.txt"), "--allowedTools", "Bash")
    )
    await site.decide((await site.pending()).id, approved=False, reason="not today")
    said = await running
    assert site.runs() == [] and "not today" in said


async def test_an_approver_edits_the_command_and_the_edited_one_runs(site: Site) -> None:
    site.hooks(COMMAND)
    running = asyncio.ensure_future(site.claude("Bash", bash("echo asked >> ran.txt")))
    await site.decide((await site.pending()).id, approved=True, args=bash("echo edited >> ran.txt"))
    await running
    assert site.runs() == ["edited"]


COMPOUND = """
[[tools.Bash]]
action = "deny"
commands = ["curl *"]

[[tools.Bash]]
action = "allow"
commands = ["echo *", "ls", "ls *"]

[[tools.Bash]]
action = "allow"
paths = ["."]

[[tools.Bash]]
action = "ask"
"""
"""Echo and ls anywhere, writes within the project, never curl. The denied part is harmless should it run:
this test must never lean on a hook that might fail open to keep something dangerous from running."""


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        ("echo hidden >> ran.txt; curl -s http://127.0.0.1:9/", []),
        ("ls && echo shown >> ran.txt | cat && bash -c 'curl -s http://127.0.0.1:9/'", []),
        ("ls && echo shown >> ran.txt", ["shown"]),
    ],
)
async def test_a_compound_command_is_judged_by_its_worst_part(
    tmp_path: Path, stub: Stub, command: str, runs: list[str]
) -> None:
    async with serving(tmp_path, stub, rules=COMPOUND) as site:
        site.hooks(COMMAND)
        said = await site.claude("Bash", bash(command), "--allowedTools", "Bash")
        assert site.runs() == runs, said
        if not runs:
            assert "denied by the policy" in said and "curl" in said, said
        assert await site.ledger.approvals.query(state=State.PENDING) == []


async def test_the_command_hook_blocks_when_the_server_is_down(site: Site, tmp_path: Path) -> None:
    site.hooks(COMMAND)
    said = await site.claude(
        "Bash", bash("echo allowed >> ran.txt"), "--allowedTools", "Bash", SIGNOFF_URL="http://127.0.0.1:9"
    )
    assert site.runs() == [] and "could not be reached" in said


async def test_the_command_hook_blocks_when_the_server_fails(site: Site) -> None:
    async def broken(request: Any) -> JSONResponse:
        return JSONResponse({"error": {"message": "boom"}}, 500)

    site.hooks(COMMAND)
    failing = Starlette(routes=[Route("/api/hooks/claude-code", broken, methods=["POST"])])
    async with in_loop(failing) as host:
        said = await site.claude(
            "Bash", bash("echo allowed >> ran.txt"), "--allowedTools", "Bash", SIGNOFF_URL=f"http://{host}"
        )
    assert site.runs() == [] and "(500): 'boom'" in said


async def test_an_http_hook_is_answered_deny_before_its_timeout(site: Site) -> None:
    site.hooks({
        "type": "http", "url": f"{site.base}/api/hooks/claude-code?timeout=3", "timeout": 3,
        "headers": {"Authorization": "Bearer $SIGNOFF_TOKEN"}, "allowedEnvVars": ["SIGNOFF_TOKEN"],
    })  # fmt: skip
    said = await site.claude("Bash", bash("echo asked >> ran.txt"), "--allowedTools", "Bash")
    assert site.runs() == [] and NOT_DECIDED in said
    assert (await site.pending()).state is State.PENDING  # it stays open in the inbox


def prompt_tool(site: Site) -> tuple[str, ...]:
    server = {"command": SIGNOFF, "args": ["hook", "claude-code", "--mcp"], "env": site.env()}
    config = json.dumps({"mcpServers": {"signoff": server}})
    return ("--mcp-config", config, "--permission-prompt-tool", "mcp__signoff__approve")


async def test_the_permission_prompt_tool_approves(site: Site) -> None:
    running = asyncio.ensure_future(site.claude("Bash", bash("echo asked >> ran.txt"), *prompt_tool(site)))
    approval = await site.pending()
    await site.decide(approval.id, approved=True)
    said = await running
    assert site.runs() == ["asked"] and approval.call.call_id.startswith("toolu_"), said


async def test_the_permission_prompt_tool_denies(site: Site) -> None:
    said = await site.claude("Bash", bash("echo denied >> ran.txt"), *prompt_tool(site))
    assert site.runs() == [] and "denied by the policy" in said


async def sdk(site: Site, command: str, callback: Any) -> str:
    """Run the Agent SDK (its bundled Claude Code) to make one Bash call, asking `callback`; what the model
    heard of it."""
    from claude_agent_sdk import ClaudeAgentOptions, query

    async def prompt() -> AsyncIterator[dict[str, Any]]:
        text = f"call Bash {json.dumps(bash(command))}"
        yield {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None}

    before = len(site.stub.requests)
    options = ClaudeAgentOptions(cwd=site.project, env=site.env(), can_use_tool=callback)
    async with asyncio.timeout(120):
        async for _ in query(prompt=prompt(), options=options):
            pass
    (made,) = [r for r in site.stub.requests[before:] if tool_results(r)]
    return "".join(result_text(block) for block in tool_results(made))


async def test_the_agent_sdks_can_use_tool_asks_the_server_and_a_person_approves(site: Site) -> None:
    callback = can_use_tool(server=site.base, token=site.token, cwd=str(site.project))
    running = asyncio.ensure_future(sdk(site, "echo asked >> ran.txt", callback))
    approval = await site.pending()
    assert approval.requester == "dev" and approval.call.context == {"cwd": str(site.project)}
    await site.decide(approval.id, approved=True, args=bash("echo edited >> ran.txt"))
    await running
    assert site.runs() == ["edited"]


async def test_the_agent_sdks_can_use_tool_with_a_gate_denies(site: Site) -> None:
    callback = can_use_tool(gate=Gate(site.ledger, Policy.from_toml(POLICY)), requester="dev")
    said = await sdk(site, "echo denied >> ran.txt", callback)
    assert site.runs() == [] and "denied by the policy" in said


async def test_a_payment_two_of_finance_approve_by_email_and_slack_runs_once(
    tmp_path: Path, stub: Stub
) -> None:
    api = SlackApi()
    slack_stub = Starlette(routes=[Route("/api/{method}", api.method, methods=["POST"])])
    with smtp_server() as (mailbox, port):
        async with in_loop(slack_stub) as slack:
            channels = Channels({
                "slack:payments": SlackChannel("payments", "C0PAY", "xoxb-test", SIGNING, f"http://{slack}/api/"),
                "email:finance": EmailChannel("finance", f"smtp://127.0.0.1:{port}", "s@example.com"),
            })  # fmt: skip
            async with serving(tmp_path, stub, channels) as site:
                for name, email, user in (("bob", "bob@example.com", None), ("carol", None, "U0CAROL")):
                    await site.ledger.principals.register(name, ["finance"], actor="test")
                    await site.ledger.principals.link(name, email=email, slack=user, actor="test")
                runs = tmp_path / "payments.jsonl"
                payments = {"command": sys.executable, "args": [str(ROOT / "tests" / "mcp_upstream.py")],
                            "env": {"UPSTREAM_RUNS": str(runs)}}  # fmt: skip
                site.hooks(COMMAND)
                config = json.dumps({"mcpServers": {"payments": payments}})
                pay = {"amount": 700, "to": "Hanako"}
                running = asyncio.ensure_future(
                    site.claude("mcp__payments__pay", pay, "--mcp-config", config)
                )
                approval = await site.pending()
                assert approval.call.tool == "mcp__payments__pay" and approval.call.args == pay
                (bob,) = await mail_for(mailbox, "bob@example.com")
                link = link_in(bob, site.base)
                await post(
                    site.client,
                    link,
                    site.base,
                    nonce=await form_nonce(site.client, link),
                    decision="approve",
                )
                assert (await site.ledger.approvals.get(approval.id)).state is State.PENDING  # one of two
                await eventually(lambda: api.made("chat.postMessage"))
                body, headers = click("U0CAROL", APPROVE, approval.id)
                clicked = await site.client.post(
                    "/api/channels/slack/interactions", content=body, headers=headers
                )
                assert clicked.status_code == 200
                await running
                decided = await site.ledger.approvals.get(approval.id)
                assert [(v.decision.by, v.decision.via) for v in decided.votes] == [
                    ("bob", "email"),
                    ("carol", "slack"),
                ]
                assert decided.state is State.CONSUMED
                assert [json.loads(line)["args"] for line in runs.read_text().splitlines()] == [pay]
