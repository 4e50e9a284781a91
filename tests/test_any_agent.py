"""Any agent, unchanged (issue 42): a pydantic-ai `Agent(TestModel())`, one with a structured output type,
one with deps, and an ADK `LlmAgent` with a plain function tool, none with a line of signoff code, are
served as they are, and a person approves and denies their calls over both waits. An agent none can serve
is refused when the app is made, in one line that names the fix.

Reproduced first: the plain agent's deferred reply ended in `the agent run failed: UserError: A deferred
tool call was present, but DeferredToolRequests is not among output types`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.core.policy import Policy
from signoff.integrations.pydantic_ai.chat import CannotServe
from signoff.ledger import MemoryLedger
from signoff.server.app import Settings, create_app
from tests import plain_agents
from tests.chats import AUTH, TOKEN, answer, chunks, pending, user
from tests.chats import Server as Site
from tests.servers import in_loop, signoff_server

AGENTS = {
    "plain": ("plain", plain_agents.plain),
    "structured": ("structured", plain_agents.structured),
    "with_deps": ("with_deps fee 1", plain_agents.with_deps),
    "adk": ("adk", plain_agents.adk),
}


@pytest.fixture(params=sorted(AGENTS))
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Site, str]]:
    ran, agent = AGENTS[str(request.param)]
    plain_agents.RUNS.clear()
    async with MemoryLedger() as ledger:
        app = create_app(agent, ledger, Settings(token=TOKEN, anonymous=True), policy=Policy())
        async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=20) as client:
            yield Site(client, ledger), ran


def outputs(reply: list[dict[str, Any]]) -> list[str]:
    return [c["type"] for c in reply if c["type"].startswith("tool-output")]


@pytest.mark.parametrize("approved", [True, False])
async def test_a_call_waits_for_a_person_in_the_deferred_flow(
    served: tuple[Site, str], approved: bool
) -> None:
    site, ran = served
    first = user("deferred", "pay Hanako")
    asked = chunks((await site.client.post("/api/chat", json=first)).text)
    assert [c["type"] for c in asked][-3:] == ["tool-approval-request", "finish-step", "finish"], asked
    assert plain_agents.RUNS == []
    reply = await site.client.post("/api/chat", json=answer(first, asked, [(approved, "no")]))
    second = chunks(reply.text)
    assert not [c for c in second if c["type"] == "error"], second
    assert outputs(second) == ["tool-output-available" if approved else "tool-output-denied"]
    assert second[-1]["type"] == "finish" and reply.text.count("[DONE]") == 1
    assert ([ran] if approved else []) == plain_agents.RUNS


@pytest.mark.parametrize("approved", [True, False])
async def test_a_call_waits_for_a_person_in_the_blocking_flow(
    served: tuple[Site, str], approved: bool
) -> None:
    site, ran = served
    body = user("blocking", "pay Hanako", wait="blocking")
    posted = asyncio.ensure_future(site.client.post("/api/chat", json=body))
    [approval] = await pending(site, "blocking", 1)
    assert plain_agents.RUNS == []
    decided = await site.client.post(
        f"/api/approvals/{approval['id']}/decision", json={"approved": approved}, headers=AUTH
    )
    assert decided.status_code == 200
    reply = await posted
    streamed = chunks(reply.text)
    assert not [c for c in streamed if c["type"] == "error"], streamed
    assert outputs(streamed) == ["tool-output-available" if approved else "tool-output-denied"]
    assert reply.text.count("[DONE]") == 1
    assert ([ran] if approved else []) == plain_agents.RUNS


async def test_an_agent_whose_deps_nobody_can_make_is_refused_when_it_is_served() -> None:
    async with MemoryLedger() as ledger:
        with pytest.raises(CannotServe, match=r"deps_type Vault .* --deps module:function"):
            create_app(plain_agents.needs_a_key, ledger, Settings(token=TOKEN), policy=Policy())
        app = create_app(
            plain_agents.needs_a_key, ledger, Settings(token=TOKEN), policy=Policy(),
            deps=lambda: plain_agents.Vault("k"),
        )  # fmt: skip
        assert app is not None


def test_serve_takes_a_function_that_makes_the_deps(tmp_path: Path) -> None:
    """`signoff serve --agent … --deps module:function`, as a user runs it: the run gets its deps, and the
    approved call runs with them (the tool's counter is in the server's process: the reply says it ran)."""
    args = [
        "serve", "--agent", "tests.plain_agents:needs_a_key", "--deps", "tests.plain_agents:vault",
        "--anonymous-chats", "--ledger", f"sqlite:///{tmp_path / 'ledger.db'}",
    ]  # fmt: skip
    with signoff_server(tmp_path, args, TOKEN) as (base, _):
        first = user("deps", "pay")
        asked = chunks(httpx.post(f"{base}/api/chat", json=first, timeout=30).text)
        assert asked[-1] == {"type": "finish", "finishReason": "tool-calls"}, asked
        reply = httpx.post(f"{base}/api/chat", json=answer(first, asked, [(True, "")]), timeout=30)
        done = [c for c in chunks(reply.text) if c["type"] == "tool-output-available"]
        assert len(done) == 1 and "paid" in str(done[0]["output"]), reply.text
