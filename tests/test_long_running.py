"""Long-running tools end to end (seed 004): declared, approved, started, watched, cancelled, resumed."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from google.adk.models.llm_request import LlmRequest
from google.adk.tools.function_tool import FunctionTool
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from signoff import Gate, MemoryLedger, Policy, SqliteLedger, Task, ToolCall, long_running, progress
from signoff.core.task import NOTE
from signoff.demo import tools
from signoff.demo.adk import demo_adk_agent
from signoff.demo.tools import get_weather
from signoff.demo.walkthrough import demo_policy
from signoff.integrations.adk import SignoffPlugin, long_running_tool
from signoff.integrations.chat.turn import Discard, Turn, current_turn
from signoff.integrations.pydantic_ai import Signoff
from signoff.integrations.pydantic_ai.toolset import TASK
from signoff.ledger import Ledger
from signoff.server.app import Settings, create_app
from tests.chats import AUTH, Server, answer, ask, chunks, said, serve, user
from tests.conftest import SIGNOFF
from tests.servers import audited, in_loop, signoff_server


@pytest.fixture
async def site(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.01)
    async for server in serve(MemoryLedger(), demo_policy(), keepalive=0.1, feed_interval=0.05):
        yield server


async def started(site: Server, chat: str, name: str = "q3") -> list[dict[str, Any]]:
    """Ask for the export, approve it, and return the reply that started it."""
    first, reply = await ask(site, chat, f"export report {name}")
    assert [c["type"] for c in reply if c["type"].startswith("tool-approval")] == ["tool-approval-request"]
    response = await site.client.post("/api/chat", json=answer(first, reply, [(True, "")]))
    assert response.status_code == 200, response.text
    return chunks(response.text)


def task_id_of(reply: list[dict[str, Any]]) -> str:
    """The task id in the reply's first tool output: the pending result of a long-running call."""
    return str(next(c for c in reply if c["type"] == "tool-output-available")["output"]["task_id"])


async def settled(ledger: Ledger, chat: str) -> dict[str, Any]:
    for _ in range(500):
        (task,) = await ledger.tasks.query(chat_id=chat)
        if task.state.finished:
            return task.public()
        await asyncio.sleep(0.01)
    raise AssertionError("the task never ended")


def test_the_note_is_appended_once_to_a_long_running_tools_description() -> None:
    seen: dict[str, str | None] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t.description for t in info.function_tools})
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    @long_running
    async def export_report(name: str) -> str:
        """Export a report."""
        return name

    @agent.tool_plain(metadata={"signoff": "long-running"})
    async def render(name: str) -> str:
        return name

    @agent.tool_plain
    async def quick(name: str) -> str:
        """Quick."""
        return name

    gate = Gate(MemoryLedger(), Policy())
    agent.run_sync("hi", capabilities=[Signoff(gate)])
    agent.run_sync("hi again", capabilities=[Signoff(gate)])
    assert seen["export_report"] == "Export a report.\n\n" + NOTE
    assert seen["render"] == NOTE
    assert seen["quick"] == "Quick."
    assert "check_task" in seen


async def test_an_approved_export_returns_at_once_with_a_pending_task_and_ends_the_turn(site: Server) -> None:
    reply = await started(site, "lr-1")
    types = [c["type"] for c in reply]
    outputs = [c for c in reply if c["type"] == "tool-output-available"]
    task_id = task_id_of(reply)
    assert outputs[0]["output"] == {"status": "pending", "task_id": task_id, "progress": 0}
    assert {"type": "data-task", "id": task_id}.items() <= next(
        c for c in reply if c["type"] == "data-task"
    ).items()
    assert types[-1] == "finish" and reply[-1]["finishReason"] == "tool-calls"
    assert "text-delta" not in types, "the model spoke although every call of the step was long-running"
    ended = await settled(site.ledger, "lr-1")
    assert ended["state"] == "completed" and ended["result"]["file"] == "q3.pdf"
    (task,) = await site.ledger.tasks.query(chat_id="lr-1")
    assert task.call.call_id == outputs[0]["toolCallId"]

    view = (await site.client.get("/api/chat/lr-1")).json()
    part = next(p for m in view["messages"] for p in m["parts"] if p["type"] == "tool-export_report")
    assert part["state"] == "output-available" and part["output"]["status"] == "completed"

    response = await site.client.post("/api/chat", json=user("lr-1", "thanks"))
    assert f"The report q3 is done: {json.dumps(ended['result'])}." in said(response.text)


async def test_a_denied_export_never_starts_a_task(site: Server) -> None:
    first, reply = await ask(site, "lr-2", "export report q3")
    response = await site.client.post("/api/chat", json=answer(first, reply, [(False, "too big")]))
    assert "I did not export the report q3: denied by the user: too big." in said(response.text)
    await asyncio.sleep(0.05)
    assert await site.ledger.tasks.query() == []
    assert (await site.client.get("/api/chat/lr-2/tasks")).json() == {"tasks": []}


async def test_check_task_reads_the_status_before_and_after_completion(
    site: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.2)
    reply = await started(site, "lr-3")
    task_id = task_id_of(reply)
    response = await site.client.post("/api/chat", json=user("lr-3", f"check task {task_id}"))
    assert response.status_code == 200, response.text
    response = await site.client.post("/api/chat", json=user("lr-3", f"check task {task_id}"))
    assert f"as task {task_id}." in said(response.text) and "is processing (" in said(response.text)
    monkeypatch.setattr(tools, "REPORT_TICK", 0.0)
    ended = await settled(site.ledger, "lr-3")
    response = await site.client.post("/api/chat", json=user("lr-3", f"check task {task_id}"))
    assert f"Task {task_id} is done: {json.dumps(ended['result'])}." in said(response.text)
    other = await site.client.post("/api/chat", json=user("lr-other", f"check task {task_id}"))
    assert f"Task {task_id} unknown: there is no task {task_id} in this chat." in said(other.text)


async def test_the_chat_cancels_its_own_task_and_only_its_own(
    site: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.5)
    reply = await started(site, "lr-4")
    task_id = task_id_of(reply)
    await site.client.post("/api/chat", json=user("lr-5", "hello"))  # another chat of the same principal
    stranger = await site.client.post(f"/api/chat/lr-5/tasks/{task_id}/cancel", json={})
    assert stranger.status_code == 404 and stranger.json()["error"]["message"] == f"no task {task_id}"
    entries = await audited(
        site.ledger, lambda found: any(e.detail.get("kind") == "another-chat" for e in found)
    )
    refused = next(e for e in entries if e.detail.get("kind") == "another-chat")  # counted: no credential
    assert (refused.action, refused.subject, refused.detail["count"]) == ("refuse", "chat", 1)
    assert refused.detail["paths"] == [f"/api/chat/lr-5/tasks/{task_id}/cancel"]
    response = await site.client.post(f"/api/chat/lr-4/tasks/{task_id}/cancel", json={})
    assert response.status_code == 200, response.text
    assert response.json()["cancel_by"] == "anonymous"
    ended = await settled(site.ledger, "lr-4")
    assert (ended["state"], ended["error"]) == ("cancelled", "cancelled by the user")
    again = await site.client.post(f"/api/chat/lr-4/tasks/{task_id}/cancel", json={})
    assert again.status_code == 409 and again.json()["task"]["state"] == "cancelled"
    assert "was cancelled" in again.json()["error"]["message"]


async def test_the_tasks_api_needs_the_token_and_lists_gets_and_cancels(
    site: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.5)
    await started(site, "lr-6")
    assert (await site.client.get("/api/tasks")).status_code == 401
    listed = (await site.client.get("/api/tasks?chat=lr-6", headers=AUTH)).json()["tasks"]
    assert [t["tool"] for t in listed] == ["export_report"]
    task_id = listed[0]["id"]
    assert (await site.client.get(f"/api/tasks/{task_id}", headers=AUTH)).json()["chat_id"] == "lr-6"
    assert (await site.client.get("/api/tasks/task_nope", headers=AUTH)).status_code == 404
    bad = await site.client.get("/api/tasks?state=done", headers=AUTH)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "state"
    named = await site.client.post(f"/api/tasks/{task_id}/cancel", headers=AUTH, json={"by": "ops"})
    assert named.status_code == 422, "who cancels comes from the credential, never from the body"
    cancelled = await site.client.post(f"/api/tasks/{task_id}/cancel", headers=AUTH, json={"reason": "r"})
    assert cancelled.status_code == 200 and cancelled.json()["cancel_by"] == "admin"
    assert (await settled(site.ledger, "lr-6"))["state"] == "cancelled"


async def test_the_chat_events_feed_carries_task_progress(
    site: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.05)
    seen: list[dict[str, Any]] = []

    async def follow() -> None:
        async with site.client.stream("GET", "/api/chat/lr-7/events") as events:
            kind = ""
            async for line in events.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "task":
                    seen.append(json.loads(line[6:]))
                    if seen[-1]["state"] == "completed":
                        return

    following = asyncio.create_task(follow())
    await asyncio.sleep(0.2)
    await started(site, "lr-7")
    await asyncio.wait_for(following, 10)
    progress = [t["progress"] for t in seen if t["state"] == "running"]
    assert len(progress) >= 3 and progress == sorted(progress)
    assert seen[-1]["result"]["file"] == "q3.pdf" and seen[-1]["status"] == "completed"


def test_a_killed_workers_task_is_failed_by_the_sweeper_and_the_cli_shows_it(tmp_path: Path) -> None:
    """A real `signoff demo` starts an export and is killed with SIGKILL mid-task; another one on the same
    ledger finds the task silent and fails it, saying why. The CLI lists, shows and cancels tasks."""
    db = tmp_path / "signoff.db"
    options = ["demo", "--ledger", f"sqlite:///{db}", "--task-silence", "1"]
    with signoff_server(tmp_path, options, "t", name="first") as (base, process):
        with httpx.Client(base_url=base, timeout=20) as client:
            first = user("killed", "export report q3")
            reply = chunks(client.post("/api/chat", json=first).text)
            started = chunks(client.post("/api/chat", json=answer(first, reply, [(True, "")])).text)
            task_id = task_id_of(started)
            for _ in range(200):
                if client.get("/api/chat/killed/tasks").json()["tasks"][0]["progress"] > 0:
                    break
                time.sleep(0.05)
        process.kill()
        process.wait()
    env = {**os.environ, "SIGNOFF_LEDGER": f"sqlite:///{db}", "COLUMNS": "200"}
    listed = subprocess.run([SIGNOFF, "tasks", "list"], capture_output=True, text=True, env=env, check=True)
    assert task_id in listed.stdout and "running" in listed.stdout
    with signoff_server(tmp_path, options, "t", name="second"):
        for _ in range(100):
            shown = subprocess.run(
                [SIGNOFF, "tasks", "show", task_id], capture_output=True, text=True, env=env, check=True
            )
            task = json.loads(shown.stdout)
            if task["state"] != "running":
                break
            time.sleep(0.1)
    assert task["state"] == "failed"
    assert re.fullmatch(r"the worker running it \(.+\) stopped: no heartbeat for \d+ s", task["error"]), task
    again = subprocess.run([SIGNOFF, "tasks", "cancel", task_id], capture_output=True, text=True, env=env)
    assert again.returncode == 1 and f"cannot cancel task {task_id}: it already failed" in again.stderr
    missing = subprocess.run([SIGNOFF, "tasks", "show", "task_nope"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "no task task_nope" in missing.stderr


async def test_the_cli_cancels_a_task_another_process_runs(tmp_path: Path) -> None:
    """The CLI only asks; the worker running the body hears it at its next beat or report and stops it."""
    async with SqliteLedger(tmp_path / "l.db") as ledger:
        gate = Gate(ledger, Policy.from_dict({"tools": {"export_report": [{"action": "allow"}]}}))

        async def slow(name: str) -> str:
            for n in range(100):
                progress(n)
                await asyncio.sleep(0.05)
            return name

        task = await gate.start(ToolCall("c1", "export_report", {"name": "q3"}), slow, chat_id="cli")
        assert isinstance(task, Task)
        env = {**os.environ, "SIGNOFF_LEDGER": f"sqlite:///{tmp_path / 'l.db'}"}
        await asyncio.sleep(0.2)
        done = await asyncio.to_thread(
            subprocess.run,
            [SIGNOFF, "tasks", "cancel", task.id],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        operator = pwd.getpwuid(os.getuid()).pw_name  # the CLI's: the process's user, whatever $USER says
        assert done.stdout.strip() == f"{task.id} asked to cancel by cli:{operator}"
        for _ in range(100):
            if (await ledger.tasks.get(task.id)).state.finished:
                break
            await asyncio.sleep(0.05)
        ended = await ledger.tasks.get(task.id)
        assert (ended.state, ended.error) == ("cancelled", f"cancelled by {operator} (admin)")
        await gate.tasks.close()


@pytest.fixture
async def adk_site(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    monkeypatch.setattr(tools, "REPORT_TICK", 0.01)
    ledger = MemoryLedger()
    await ledger.start()
    app = create_app(
        demo_adk_agent(),
        ledger,
        Settings(token="t", anonymous=True, feed_interval=0.05),
        policy=demo_policy(),
    )
    async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=20) as client:
        yield Server(client, ledger)
    await ledger.close()


async def test_adk_an_approved_export_returns_a_pending_task_and_ends_the_turn(adk_site: Server) -> None:
    reply = await started(adk_site, "adk-1")
    outputs = [c for c in reply if c["type"] == "tool-output-available"]
    task_id = task_id_of(reply)
    assert outputs == [
        {"type": "tool-output-available", "toolCallId": outputs[0]["toolCallId"],
         "output": {"status": "pending", "task_id": task_id, "progress": 0}}
    ]  # fmt: skip
    assert "text-delta" not in [c["type"] for c in reply]
    ended = await settled(adk_site.ledger, "adk-1")
    assert ended["result"]["file"] == "q3.pdf"
    response = await adk_site.client.post("/api/chat", json=user("adk-1", f"check task {task_id}"))
    assert f"Task {task_id} is done: {json.dumps(ended['result'])}." in said(response.text)


async def test_adk_the_next_turn_sees_a_finished_tasks_result(adk_site: Server) -> None:
    reply = await started(adk_site, "adk-3")
    call_id = next(c for c in reply if c["type"] == "tool-output-available")["toolCallId"]
    await the_next_turn_hears_the_result_once(
        adk_site, "adk-3", lambda part: part.get("toolCallId") == call_id
    )


async def the_next_turn_hears_the_result_once(site: Server, chat: str, ours: Callable[[Any], bool]) -> None:
    """Once the export of report q3 in `chat` has ended, the chat's part that is `ours` shows it completed,
    the next user message brings the model its result, and the one after does not again."""
    ended = await settled(site.ledger, chat)
    view = (await site.client.get(f"/api/chat/{chat}")).json()
    part = next(p for m in view["messages"] for p in m["parts"] if ours(p))
    assert part["state"] == "output-available" and part["output"]["status"] == "completed"

    response = await site.client.post("/api/chat", json=user(chat, "thanks"))
    assert f"The report q3 is done: {json.dumps(ended['result'])}." in said(response.text)
    response = await site.client.post("/api/chat", json=user(chat, "and now?"))
    assert "The report q3" not in said(response.text), "the model was told the same news twice"
    view = (await site.client.get(f"/api/chat/{chat}")).json()
    texts = [p["text"] for m in view["messages"] if m["role"] == "user" for p in m["parts"]]
    assert texts == ["export report q3", "thanks", "and now?"]


async def test_adk_a_denied_export_never_starts_a_task(adk_site: Server) -> None:
    first, reply = await ask(adk_site, "adk-2", "export report q3")
    response = await adk_site.client.post("/api/chat", json=answer(first, reply, [(False, "too big")]))
    assert "too big" in said(response.text)
    assert await adk_site.ledger.tasks.query() == []


async def test_adk_declarations_get_the_note_once() -> None:
    plugin = SignoffPlugin(Gate(MemoryLedger(), Policy()))
    request = LlmRequest()
    request.append_tools([long_running_tool(tools.export_report), FunctionTool(get_weather)])
    for _ in range(2):
        await plugin.before_model_callback(
            callback_context=SimpleNamespace(agent_name="a"),  # type: ignore[arg-type]
            llm_request=request,
        )
    declared = {
        d.name: d.description for t in request.config.tools or [] for d in t.function_declarations or []
    }
    assert declared["export_report"] == (tools.export_report.__doc__ or "").strip() + "\n\n" + NOTE
    assert NOTE not in (declared["get_weather"] or "")


async def test_the_turn_marks_long_running_calls_and_ends_only_when_every_call_is_one() -> None:
    """Two long-running calls in one step end the run (pydantic-ai: deferred calls carrying their task);
    a long-running call beside an ordinary one returns its pending status, and the model goes on."""
    steps: list[list[str]] = [["export_report", "export_report"], ["export_report", "quick"]]
    seen: list[object] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns:
            seen.extend(p.content for p in returns)
            return ModelResponse(parts=[TextPart("noted")])
        names = steps.pop(0)
        return ModelResponse(
            parts=[
                ToolCallPart(n, {"name": f"r{i}"}, f"call_{len(steps)}_{n}_{i}") for i, n in enumerate(names)
            ]
        )

    agent = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    @long_running
    async def export_report(name: str) -> str:
        return name

    @agent.tool_plain
    async def quick(name: str) -> str:
        return name

    ledger = MemoryLedger()
    gate = Gate(
        ledger, Policy.from_dict({"tools": {t: [{"action": "allow"}] for t in ("export_report", "quick")}})
    )
    turn = Turn(chat_id="c1", wait="deferred", sink=Discard())
    token = current_turn.set(turn)
    try:
        first = await agent.run("go", capabilities=[Signoff(gate)])
        assert isinstance(first.output, DeferredToolRequests)
        assert sorted(c.tool_call_id for c in first.output.calls) == [
            "call_1_export_report_0",
            "call_1_export_report_1",
        ]
        tasks = {t.call.call_id: t.id for t in await ledger.tasks.query(chat_id="c1")}
        assert turn.long_running == tasks and len(tasks) == 2
        assert {m[TASK] for m in first.output.metadata.values()} == set(tasks.values())
        assert seen == []

        second = await agent.run("again", capabilities=[Signoff(gate)])
        assert second.output == "noted"
        mixed = turn.long_running["call_0_export_report_0"]
        assert mixed not in tasks.values() and "call_0_quick_1" not in turn.long_running
        assert {"status": "pending", "task_id": mixed, "progress": 0} in seen and "r1" in seen
    finally:
        current_turn.reset(token)
        await gate.tasks.close()
