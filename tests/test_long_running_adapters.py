"""Long-running tools on the OpenAI Agents and LangGraph adapters, served: as on pydantic-ai and ADK, a step
whose every call started a task ends the run, and the next user message brings the model the task's news."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from signoff import MemoryLedger
from signoff.demo import tools
from signoff.demo.langgraph import demo_langgraph_agent
from signoff.demo.openai_agents import demo_openai_agent
from signoff.demo.walkthrough import demo_policy
from signoff.server.app import Settings, create_app
from tests.chats import Server, said, user
from tests.servers import in_loop
from tests.test_long_running import settled, started, task_id_of, the_next_turn_hears_the_result_once

AGENTS: dict[str, Callable[[], Any]] = {"openai-agents": demo_openai_agent, "langgraph": demo_langgraph_agent}


@pytest.fixture(params=sorted(AGENTS))
async def site(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.01)
    ledger = MemoryLedger()
    await ledger.start()
    settings = Settings(token="t", anonymous=True, feed_interval=0.05)
    app = create_app(AGENTS[request.param](), ledger, settings, policy=demo_policy())
    async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=20) as client:
        yield Server(client, ledger)
    await ledger.close()


async def test_a_step_of_tasks_ends_the_run_and_the_next_turn_hears_the_result(site: Server) -> None:
    reply = await started(site, "lr-a")
    task_id = task_id_of(reply)
    assert "text-delta" not in [c["type"] for c in reply], "the model spoke after a step of tasks"
    assert any(c["type"] == "data-task" and c["id"] == task_id for c in reply)
    await the_next_turn_hears_the_result_once(site, "lr-a", lambda part: part["type"] == "tool-export_report")


async def test_the_next_turn_hears_a_task_was_cancelled(
    site: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.5)
    task_id = task_id_of(await started(site, "lr-c", "q4"))
    response = await site.client.post(f"/api/chat/lr-c/tasks/{task_id}/cancel", json={})
    assert response.status_code == 200, response.text
    assert (await settled(site.ledger, "lr-c"))["state"] == "cancelled"
    response = await site.client.post("/api/chat", json=user("lr-c", "and now?"))
    assert "The report q4 cancelled: cancelled by the user." in said(response.text)
