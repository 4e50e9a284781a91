"""The OpenAI Agents SDK served through signoff (issue 45): a paused run resumed by two processes at once
runs its tool once; the `ApprovalServer`'s decisions are the ledger's, audited; `--agent` finds an SDK
agent; and the adapter is one folder on the framework facade (tests/test_layers.py holds every adapter to
it). (The SDK's own test of its `ApprovalServer` example runs in tests/test_openai_agents_example.py; the
chat suites run on `--runtime openai-agents`.)"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from agents import Agent, RunResult
from agents.testing import ScriptedModel, assistant_message, function_call

from signoff.core.approval import State
from signoff.core.decision import Decision
from signoff.core.principal import ANONYMOUS
from signoff.gate import Gate
from signoff.ledger import MemoryLedger, open_ledger
from signoff.openai_agents import ApprovalServer, OpenAIAgentsChat, PendingApproval
from signoff.protocol.request import parse_chat_request
from signoff.server.loading import chat_for, load_agent
from tests.chats import user
from tests.conftest import ROOT, drop_url, shared_url
from tests.openai_agents_resume import POLICY, first_steps, report_agent


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_processes_resuming_one_paused_run_run_its_tool_once(backend: str, tmp_path: Path) -> None:
    """The peer bug: two workers each read the serialised `RunState`, each `approve` its interruption and
    run it on. Here the chat store holds the state, and the gate's claim, taken before the tool's body,
    lets one of them run it; the other is told what came of it."""
    url, ran = shared_url(backend, tmp_path), tmp_path / "ran.txt"
    try:
        async with open_ledger(url) as ledger:
            chat = OpenAIAgentsChat(report_agent(ran, *first_steps()), Gate(ledger, POLICY))
            request = parse_chat_request(json.dumps(user("c1", "send the report")).encode())
            reply = await chat.prepare(request, "deferred", ANONYMOUS)
            pushed: list[object] = []
            await reply.run(pushed.append)
            (approval,) = await ledger.approvals.query(chat_id="c1")
            assert approval.state is State.PENDING and not ran.exists()
            await ledger.approvals.decide(approval.id, Decision.of(True, ANONYMOUS.id), policy=POLICY)
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        resume = (sys.executable, "-m", "tests.openai_agents_resume", url, "c1", str(ran), str(barrier))
        pipe = asyncio.subprocess.PIPE
        processes = [
            await asyncio.create_subprocess_exec(*resume, name, stdout=pipe, stderr=pipe, cwd=ROOT)
            for name in ("a", "b")
        ]
        said = [await asyncio.wait_for(p.communicate(), 300) for p in processes]
        assert [p.returncode for p in processes] == [0, 0], said
        assert ran.read_text() == "board\n"  # the body ran once, in one of the two
        async with open_ledger(url) as ledger:
            (approval,) = await ledger.approvals.query(chat_id="c1")
            assert approval.state is State.CONSUMED
            assert approval.outcome is not None and approval.outcome.result == "sent"
    finally:
        await drop_url(url)


def reports(calls: list[str]) -> Agent[None]:
    from agents import function_tool

    @function_tool(needs_approval=True)
    def send_report(destination: str) -> str:
        """Send the report."""
        calls.append(destination)
        return "sent"

    steps = [[function_call("send_report", {"destination": "x"}, call_id="c-1")], [assistant_message("done")]]
    return Agent(name="Reports", tools=[send_report], model=ScriptedModel(steps))


@pytest.mark.parametrize("approved", [True, False])
async def test_the_approval_servers_decisions_are_the_ledgers_and_audited(approved: bool) -> None:
    calls: list[str] = []
    ledger = MemoryLedger()
    await ledger.start()
    server = ApprovalServer(reports(calls), ledger=ledger)
    pending = await server.start("owner", "send it")
    assert isinstance(pending, PendingApproval)
    (prompt,) = pending.prompts
    (approval,) = await ledger.approvals.query()
    assert prompt.decision_id == approval.id and approval.requester == "owner"
    result = await server.decide("owner", pending.request_id, {prompt.decision_id: approved})
    assert isinstance(result, RunResult) and calls == (["x"] if approved else [])
    decided = await ledger.approvals.get(approval.id)
    assert decided.state is (State.CONSUMED if approved else State.DENIED) and decided.by == "owner"
    audited = [e for e in await ledger.audit.entries() if e.subject == approval.id]
    assert [e.actor for e in audited if e.action in ("approve", "deny")] == ["owner"], audited
    assert (await ledger.audit.verify())[1] is None
    await ledger.close()


AGENT = reports([])


def test_serve_finds_an_agents_sdk_agent_and_serves_it_through_the_driver() -> None:
    agent = load_agent("tests.test_openai_agents:AGENT")
    chat = chat_for(agent, Gate(MemoryLedger(), POLICY), model=None, signing_key=b"k", browser_timeout=1.0)
    assert isinstance(chat, OpenAIAgentsChat)
