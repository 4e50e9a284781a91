"""What a chat waits on is read from its history and the ledger, the one truth: the stored chat holds only
the framework's history (as its entries) and the assistant message it continues."""

from __future__ import annotations

import json

from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.demo.walkthrough import demo_policy
from signoff.integrations.chat.state import classify
from signoff.integrations.pydantic_ai.messages import open_calls
from signoff.ledger import MemoryLedger
from tests.chats import AUTH, answer, ask, chunks, serve, spoken

PAY = {"amount": 50, "currency": "USD", "to": "Hanako"}


async def test_a_waiting_chat_stores_only_its_history_and_reads_its_question_from_the_ledger() -> None:
    async for site in serve(MemoryLedger(), demo_policy()):
        first, reply = await ask(site, "c1")
        [asked] = [c for c in reply if c["type"] == "tool-approval-request"]
        stored = await site.ledger.chats.load("c1")
        assert stored is not None
        assert set(json.loads(stored.state)) == {"assistant_id"}  # nothing it waits on
        history = [json.loads(entry)["kind"] for entry in stored.entries]  # the history, a message each
        assert history == ["request", "response"]

        waiting = (await site.client.get("/api/chat/c1")).json()
        parts = [p for m in waiting["messages"] for p in m["parts"] if p.get("toolCallId")]
        assert [p["state"] for p in parts] == ["approval-requested"]
        assert parts[0]["approval"]["id"] == asked["approvalId"]

        # decided elsewhere: the chat still waits for the model to hear it, and the continuation is taken
        decided = await site.client.post(
            f"/api/approvals/{asked['approvalId']}/decision",
            json={"approved": False, "reason": "not today"},
            headers=AUTH,
        )
        assert decided.status_code == 200, decided.text
        body = answer(first, reply, [(False, "not today")])
        answered = await site.client.post("/api/chat", json=body)
        assert answered.status_code == 200, answered.text
        assert "not today" in spoken(chunks(answered.text))

        # the call has its result now: the chat waits on nothing, and the replayed answer is refused
        again = await site.client.post("/api/chat", json=body)
        assert again.status_code == 409
        assert "its call is over: the request answers nothing that waits" in again.text
        after = (await site.client.get("/api/chat/c1")).json()
        states = [p["state"] for m in after["messages"] for p in m["parts"] if p.get("toolCallId")]
        assert states == ["output-denied"]


def test_the_open_calls_are_those_of_the_last_response_with_no_result() -> None:
    def response(*calls: str) -> dict[str, object]:
        parts = [
            {"part_kind": "tool-call", "tool_name": "t_" + c, "tool_call_id": c, "args": {}} for c in calls
        ]
        return {"kind": "response", "parts": parts}

    def results(*calls: str) -> dict[str, object]:
        parts = [
            {"part_kind": "tool-return", "tool_call_id": c, "tool_name": "t", "content": 1} for c in calls
        ]
        return {"kind": "request", "parts": parts}

    history = [response("old"), results("old"), response("a", "b", "c"), results("b")]
    assert open_calls(json.dumps(history).encode()) == {"a": "t_a", "c": "t_c"}
    assert open_calls(b"[]") == {}
    assert open_calls(json.dumps([response("a"), results("a")]).encode()) == {}


async def test_each_open_call_is_classified_by_what_the_ledger_holds_for_it() -> None:
    async with MemoryLedger() as ledger:
        asked = await ledger.approvals.open(
            ToolCall("pay", "pay", PAY), chat_id="c", description="", rule="r"
        )
        used = await ledger.approvals.open(
            ToolCall("loc", "get_location", {}), chat_id="c", description="", rule="r"
        )
        await ledger.approvals.decide(used.id, Decision.approve("alice"))
        await ledger.approvals.consume(used.id, used.call, actor="test")
        crashed = await ledger.approvals.open(
            ToolCall("ran", "pay", PAY), chat_id="c", description="", rule="r"
        )
        await ledger.approvals.decide(crashed.id, Decision.approve("alice"))
        await ledger.approvals.consume(crashed.id, crashed.call, actor="test")
        task = await ledger.tasks.create(ToolCall("exp", "export", {}), chat_id="c", worker="w", actor="test")
        calls = {
            "pay": "pay",  # a person has not answered yet
            "loc": "get_location",  # approved and used: the browser runs it now
            "bgm": "change_bgm",  # a browser tool that needs nobody
            "ran": "pay",  # used, no result: the process died mid-call, and its claim can't hold again
            "exp": "export",  # started a task
            "quick": "weather",  # nothing to wait on
        }
        approvals, browser, tasks = await classify(ledger, "c", calls, {"get_location", "change_bgm"})
    assert approvals == {"pay": asked.id, "ran": crashed.id}
    assert browser == {"loc": "get_location", "bgm": "change_bgm"}
    assert tasks == {"exp": task.id}
