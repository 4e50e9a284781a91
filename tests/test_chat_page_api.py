"""What the chat page needs beside the chat transport, over real HTTP: the chat as the server holds it (for a
reload), the chat's own approval feed, deciding from the chat, browser calls that time out, and the pages."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from signoff.demo.walkthrough import demo_policy
from signoff.ledger import MemoryLedger
from signoff.server.app import STATIC
from tests.chats import (
    AUTH,
    Server,
    answer,
    ask,
    chunks,
    pending,
    said,
    serve,
    spoken,
    user,
    with_output,
)
from tests.servers import audited


@pytest.fixture
async def site() -> AsyncIterator[Server]:
    async for server in serve(MemoryLedger(), demo_policy(), keepalive=0.1, feed_interval=0.02):
        yield server


async def view(site: Server, chat: str) -> dict[str, Any]:
    response = await site.client.get(f"/api/chat/{chat}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"].startswith("tool-")]


async def test_an_unknown_chat_is_an_empty_one(site: Server) -> None:
    shown = await view(site, "new")
    assert {key: value for key, value in shown.items() if key != "tools"} == {
        "id": "new",
        "wait": "deferred",
        "running": False,
        "continues": False,
        "cut": False,
        "messages": [],
        "approvals": [],
    }


async def test_a_reload_shows_the_pending_approval_under_the_streamed_message_id(site: Server) -> None:
    _, reply = await ask(site, "c1")
    asked = next(c for c in reply if c["type"] == "tool-approval-request")
    shown = await view(site, "c1")
    user_message, assistant = shown["messages"]
    assert user_message["role"] == "user"
    assert user_message["parts"] == [{"type": "text", "text": "pay 50 USD to Hanako"}]
    assert assistant["id"] == reply[0]["messageId"]  # a continuation streams into this very message
    assert tool_parts(assistant) == [
        {
            "type": "tool-process_payment",
            "toolCallId": asked["toolCallId"],
            "input": {"amount": 50, "currency": "USD", "recipient": "Hanako"},
            "state": "approval-requested",
            "approval": {"id": asked["approvalId"]},
        }
    ]
    [approval] = shown["approvals"]
    assert approval["id"] == asked["approvalId"] and approval["description"] == "Pay 50 USD to Hanako"


async def test_after_the_answers_a_reload_shows_done_and_refused_with_the_reason(site: Server) -> None:
    first, reply = await ask(site, "c1", "pay 10 USD to Jiro and 20 USD to Saburo")
    await site.client.post("/api/chat", json=answer(first, reply, [(True, ""), (False, "too much")]))
    [_, assistant] = (await view(site, "c1"))["messages"]
    paid, refused = tool_parts(assistant)
    assert paid["state"] == "output-available" and paid["output"]["success"] is True
    assert paid["approval"]["approved"] is True
    assert refused["state"] == "output-denied" and "output" not in refused
    assert refused["approval"] == {"id": refused["approval"]["id"], "approved": False, "reason": "too much"}
    texts = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
    assert any("Paid 10 USD to Jiro" in t for t in texts) and any("too much" in t for t in texts)
    assert [p["type"] for p in assistant["parts"]].count("step-start") == 2  # the ask, then the answer


async def test_a_running_blocking_reply_shows_its_prompt_and_replays_in_full(site: Server) -> None:
    body = user("c1", "pay 50 USD to Hanako", wait="blocking")
    post = asyncio.ensure_future(site.client.post("/api/chat", json=body))
    [approval] = await pending(site, "c1", 1)
    shown = await view(site, "c1")
    assert shown["running"] is True and shown["continues"] is False
    assert shown["messages"] == body["messages"]  # the stored chat has nothing yet; the stream has it all
    decided = await site.client.post(f"/api/chat/c1/approvals/{approval['id']}", json={"approved": True})
    assert decided.status_code == 200 and decided.json()["decision"]["by"] == "anonymous"
    assert "Paid 50 USD" in said((await post).text)
    assert (await view(site, "c1"))["running"] is False


async def test_deciding_from_the_chat_reaches_only_that_chats_approvals(site: Server) -> None:
    await ask(site, "mine")
    await ask(site, "theirs")
    [theirs] = await pending(site, "theirs", 1)
    [mine] = await pending(site, "mine", 1)
    stolen = await site.client.post(f"/api/chat/mine/approvals/{theirs['id']}", json={"approved": True})
    assert stolen.status_code == 403 and "another chat" in stolen.json()["error"]["message"]
    unknown = await site.client.post("/api/chat/mine/approvals/apr_nothing", json={"approved": True})
    assert unknown.status_code == 404
    entries = await audited(site.ledger, lambda found: len([e for e in found if e.action == "refuse"]) >= 2)
    refusals = {
        e.detail["kind"]: e for e in entries if e.action == "refuse"
    }  # no credential: counted by kind
    assert refusals["another-chat"].detail["paths"] == [f"/api/chat/mine/approvals/{theirs['id']}"]
    assert refusals["unknown-approval"].detail["paths"] == ["/api/chat/mine/approvals/apr_nothing"]
    assert all(e.actor == "client:127.0.0.1" and e.subject == "chat" for e in refusals.values())

    for body, field in [
        ({"approved": True, "remember": "always"}, "remember"),  # a chat can't grant for every chat
        ({"approved": "yes"}, "approved"),
        ({"approved": True, "args": {"amount": 1}}, None),  # editing is the inbox's job
    ]:
        bad = await site.client.post(f"/api/chat/mine/approvals/{mine['id']}", json=body)
        assert bad.status_code == 422 and bad.json()["error"].get("field") == field, bad.text
    remembered_denial = await site.client.post(
        f"/api/chat/mine/approvals/{mine['id']}", json={"approved": False, "remember": "session"}
    )
    assert remembered_denial.status_code == 422

    denied = await site.client.post(f"/api/chat/mine/approvals/{mine['id']}", json={"approved": False})
    assert denied.status_code == 200 and denied.json()["state"] == "denied"
    late = await site.client.post(
        f"/api/approvals/{mine['id']}/decision", json={"approved": True}, headers=AUTH
    )
    assert late.status_code == 409 and late.json()["approval"]["decision"]["by"] == "anonymous"


async def test_remember_for_this_chat_makes_a_session_grant_the_next_call_uses(site: Server) -> None:
    first, reply = await ask(site, "c1", "pay 5 USD to Jiro")
    [approval] = await pending(site, "c1", 1)
    remembered = await site.client.post(
        f"/api/chat/c1/approvals/{approval['id']}", json={"approved": True, "remember": "session"}
    )
    assert remembered.status_code == 200
    # the page still answers through the chat, so the client goes on; the decision already stands
    done = await site.client.post("/api/chat", json=answer(first, reply, [(True, "")]))
    assert "Paid 5 USD to Jiro" in said(done.text)
    [grant] = (await site.client.get("/api/grants?chat=c1", headers=AUTH)).json()["grants"]
    assert grant["scope"] == "session" and grant["chat_id"] == "c1" and grant["created_by"] == "anonymous"
    _, again = await ask(site, "c1", "pay 5 USD to Jiro")
    assert "tool-approval-request" not in str(again) and "Paid 5 USD to Jiro" in spoken(again)


async def test_the_chat_feed_shows_only_that_chats_approvals(site: Server) -> None:
    await ask(site, "other")
    await ask(site, "c1")
    [mine] = await pending(site, "c1", 1)
    seen: list[dict[str, Any]] = []

    async def follow() -> None:
        async with site.client.stream("GET", "/api/chat/c1/events") as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if seen[-1]["state"] == "approved":
                        return

    reading = asyncio.ensure_future(follow())
    await asyncio.sleep(0.2)
    [other] = await pending(site, "other", 1)
    await site.client.post(f"/api/approvals/{other['id']}/decision", json={"approved": False}, headers=AUTH)
    await site.client.post(f"/api/approvals/{mine['id']}/decision", json={"approved": True}, headers=AUTH)
    await asyncio.wait_for(reading, 10)
    assert {a["chat_id"] for a in seen} == {"c1"}
    assert [a["state"] for a in seen] == ["pending", "approved"]


@pytest.fixture
async def hasty() -> AsyncIterator[Server]:
    async for server in serve(MemoryLedger(), demo_policy(), keepalive=0.1, sweep=0.05, browser_timeout=0.3):
        yield server


async def test_a_browser_call_without_a_result_ends_as_an_error_the_model_hears(hasty: Server) -> None:
    site = hasty
    first, reply = await ask(site, "c1", "where am I")
    announced: list[str] = []

    async def watch() -> None:
        async with site.client.stream("GET", "/api/chat/c1/events") as response:
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    announced.append(line[7:])
                    if announced[-1] == "reply":
                        return

    watching = asyncio.ensure_future(watch())
    handed_over = await site.client.post("/api/chat", json=answer(first, reply, [(True, "")]))
    assert chunks(handed_over.text)[-1] == {"type": "finish", "finishReason": "tool-calls"}
    await asyncio.wait_for(watching, 10)  # an open page hears that the server started a reply itself
    shown = await view(site, "c1")
    assert shown["continues"] is True or shown["running"] is False  # it may have ended already
    told = await site.client.get("/api/chat/c1/stream")
    assert "get_location failed" in said(told.text)
    [_, assistant] = (await view(site, "c1"))["messages"]
    [location] = tool_parts(assistant)
    assert location["state"] == "output-error"
    assert location["errorText"] == "the browser returned no result within 0.3 s"
    assert any("get_location failed" in p.get("text", "") for p in assistant["parts"])
    [expired] = [e for e in await site.ledger.audit.entries() if e.action == "expire"]
    assert expired.subject == location["toolCallId"] and expired.detail["chat"] == "c1"

    late = with_output(first, reply, state="output-available", output={"latitude": 1, "longitude": 2})
    refused = await site.client.post("/api/chat", json=late)
    assert refused.status_code == 409  # the chat no longer waits on that call


@pytest.fixture
async def unswept() -> AsyncIterator[Server]:
    async for server in serve(MemoryLedger(), demo_policy(), sweep=3600, browser_timeout=0.3):
        yield server


async def test_a_late_output_gets_the_timeout_not_the_value(unswept: Server) -> None:
    """With no sweep in time (a restart loses its timers), the next request applies the deadline itself."""
    site = unswept
    first, reply = await ask(site, "c1", "where am I")
    await site.client.post("/api/chat", json=answer(first, reply, [(True, "")]))
    await asyncio.sleep(0.4)
    late = with_output(first, reply, state="output-available", output={"latitude": 1, "longitude": 2})
    response = await site.client.post("/api/chat", json=late)
    assert "get_location failed: the browser returned no result within 0.3 s" in said(response.text)
    assert "You are at" not in said(response.text)
    call_id = late["messages"][-1]["parts"][1]["toolCallId"]
    errors = [c for c in chunks(response.text) if c["type"] == "tool-output-error"]
    assert [c["toolCallId"] for c in errors] == [call_id]  # the page must learn its output was not used


async def test_the_pages_and_their_assets_are_served(site: Server) -> None:
    for path in ("/", "/approvals"):
        page = await site.client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.text.lstrip().lower().startswith("<!doctype html>")
        linked = re.findall(r'(?:src|href)="/static/([^"]+)"', page.text)
        assert linked, f"{path} links no built assets"
        for asset in linked:
            served = await site.client.get(f"/static/{asset}")
            assert served.status_code == 200 and served.content == (STATIC / asset).read_bytes()
    assert (await site.client.get("/static/nothing.js")).status_code == 404


async def test_a_reloaded_chat_continues_from_the_servers_messages(site: Server) -> None:
    """The page's messages after a reload are the server's; answering on them must work like live ones."""
    await ask(site, "c1", "pay 10 USD to Jiro and 20 USD to Saburo")
    messages = (await view(site, "c1"))["messages"]
    for part, approved in zip(tool_parts(messages[-1]), [True, False], strict=True):
        part["state"] = "approval-responded"
        part["approval"] = {**part["approval"], "approved": approved, "reason": "" if approved else "no"}
    answered = await site.client.post(
        "/api/chat", json={"id": "c1", "trigger": "submit-message", "messages": messages}
    )
    assert answered.status_code == 200, answered.text
    assert chunks(answered.text)[0] == {"type": "start", "messageId": messages[-1]["id"]}
    assert "Paid 10 USD to Jiro" in said(answered.text) and "denied by the user: no" in said(answered.text)
    after = (await view(site, "c1"))["messages"]
    follow_up = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "weather in Tokyo"}]}
    again = await site.client.post(
        "/api/chat", json={"id": "c1", "trigger": "submit-message", "messages": [*after, follow_up]}
    )
    assert again.status_code == 200 and "Tokyo" in said(again.text)
    assert [m["role"] for m in (await view(site, "c1"))["messages"]] == ["user", "assistant"] * 2


async def test_a_reply_that_just_ended_still_replays_for_a_page_that_saw_it_running(site: Server) -> None:
    """The page loads the chat (running), the reply ends, then the page asks for the stream: it must still
    get the whole reply, or the page would show the question without its answer."""
    body = user("c1", "pay 50 USD to Hanako", wait="blocking")
    post = asyncio.ensure_future(site.client.post("/api/chat", json=body))
    [approval] = await pending(site, "c1", 1)
    assert (await view(site, "c1"))["running"] is True
    await site.client.post(f"/api/chat/c1/approvals/{approval['id']}", json={"approved": True})
    finished = await post
    assert (await view(site, "c1"))["running"] is False
    late = await site.client.get("/api/chat/c1/stream")
    assert late.status_code == 200 and chunks(late.text) == chunks(finished.text)


async def test_a_blocking_browser_call_is_handed_to_the_page_once_approved(site: Server) -> None:
    post = asyncio.ensure_future(
        site.client.post("/api/chat", json=user("c1", "where am I", wait="blocking"))
    )
    [approval] = await pending(site, "c1", 1)
    await site.client.post(f"/api/chat/c1/approvals/{approval['id']}", json={"approved": True})
    reply = chunks((await post).text)
    types = [c["type"] for c in reply]
    asked = types.index("tool-approval-request")
    assert types[asked + 1 :] == ["tool-input-available", "finish-step", "finish"]
    assert reply[asked + 1] == next(c for c in reply if c["type"] == "tool-input-available")


async def test_the_page_learns_the_agents_tools_from_the_server(site: Server) -> None:
    """The page hard-codes no tool: the server says which ones the browser runs, and how to word a call."""
    tools = {t["name"]: t for t in (await view(site, "fresh"))["tools"]}
    assert tools["get_location"]["browser"] is True and "location" in tools["get_location"]["description"]
    assert tools["change_bgm"] == {
        "name": "change_bgm",
        "browser": True,
        "acknowledged": True,
        "description": "Play a background music track in the user's browser.",
        "title": "Play {track}",
    }
    assert tools["process_payment"] == {
        "name": "process_payment",
        "browser": False,
        "title": "Pay {amount} {currency} to {recipient}",
    }
