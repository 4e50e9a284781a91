"""The server over real HTTP (uvicorn in the test's loop): the approvals API contract, blocking and resumed
streams, the live feed, deadlines, and the trust refusals a stock client cannot produce."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from signoff.core.policy import Policy
from signoff.demo.walkthrough import demo_policy
from signoff.ledger import MemoryLedger, SqliteLedger
from signoff.ledger.postgres import PostgresLedger
from tests.chats import (
    AUTH,
    JSON,
    PLAYS,
    Server,
    answer,
    ask,
    chunks,
    pending,
    said,
    serve,
    user,
    with_output,
)
from tests.conftest import POSTGRES, SIGNOFF, drop
from tests.servers import audited


@pytest.fixture
async def site() -> AsyncIterator[Server]:
    async for server in serve(MemoryLedger(), demo_policy(), keepalive=0.1):
        yield server


# -- the approvals API -------------------------------------------------------------------------------------


async def test_the_approvals_api_needs_the_token_and_audits_who_tried(site: Server) -> None:
    missing = await site.client.get("/api/approvals")
    assert missing.status_code == 401
    assert missing.json()["error"]["message"].startswith("a credential is required: 'Authorization: Bearer")
    wrong = await site.client.get("/api/approvals", headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert wrong.json()["error"]["message"] == "the bearer token is not valid"
    entries = await audited(site.ledger, lambda entries: len(entries) >= 2)
    assert [e.action for e in entries] == ["unauthorized", "unauthorized"]
    assert (await site.client.get("/api/approvals", headers=AUTH)).json() == {"approvals": []}


async def test_list_get_and_decide_with_the_documented_shapes(site: Server) -> None:
    await ask(site, "c1")
    await ask(site, "c2", "weather in Tokyo")
    [listed] = await pending(site, "c1", 1)
    assert listed["chat_id"] == "c1" and listed["state"] == "pending"
    assert listed["call"]["tool"] == "process_payment"
    assert listed["call"]["args"] == {"amount": 50, "currency": "USD", "recipient": "Hanako"}
    assert listed["description"] == "Pay 50 USD to Hanako" and listed["deadline"] > listed["created_at"]
    assert "decision" not in listed and None not in listed.values()
    one = (await site.client.get(f"/api/approvals/{listed['id']}", headers=AUTH)).json()
    assert one == {**listed, "notices": []}  # one approval also says where it was announced: nowhere here

    decided = await site.client.post(
        f"/api/approvals/{listed['id']}/decision", json={"approved": False, "reason": "no"}, headers=AUTH
    )
    assert decided.status_code == 200
    assert decided.json()["decision"] == {
        "verdict": "deny", "by": "admin", "name": "admin", "who": "admin", "via": "bootstrap",
        "reason": "no", "remember": "once",
    }  # fmt: skip
    again = await site.client.post(
        f"/api/approvals/{listed['id']}/decision", json={"approved": True}, headers=AUTH
    )
    assert again.status_code == 409
    assert "already decided: denied by admin" in again.json()["error"]["message"]
    assert again.json()["approval"]["state"] == "denied"
    assert (await site.client.get("/api/approvals?state=denied", headers=AUTH)).json()["approvals"][0][
        "id"
    ] == listed["id"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 422, None),
        (b"{}", 422, None),
        (b'{"approved": "yes"}', 422, "approved"),
        (b'{"approved": true, "remember": "forever"}', 422, "remember"),
        (b'{"approved": false, "remember": "session"}', 422, None),
        (b'{"approved": true, "surprise": 1}', 422, None),
        (b'{"approved": true, "args": {"amount": NaN}}', 422, None),
    ],
)
async def test_a_malformed_decision_is_a_422_naming_the_fault(
    site: Server, body: bytes, status: int, field: str | None
) -> None:
    await ask(site, "c1")
    [approval] = await pending(site, "c1", 1)
    response = await site.client.post(
        f"/api/approvals/{approval['id']}/decision", content=body, headers={**AUTH, **JSON}
    )
    assert response.status_code == status, response.text
    assert response.json()["error"].get("field") == field
    assert (await site.client.get(f"/api/approvals/{approval['id']}", headers=AUTH)).json()[
        "state"
    ] == "pending"


async def test_unknown_ids_and_bad_filters(site: Server) -> None:
    assert (await site.client.get("/api/approvals/apr_nope", headers=AUTH)).status_code == 404
    missing = await site.client.post(
        "/api/approvals/apr_nope/decision", json={"approved": True}, headers=AUTH
    )
    assert missing.status_code == 404
    bad = await site.client.get("/api/approvals?state=maybe", headers=AUTH)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "state"
    assert (await site.client.delete("/api/grants/grt_nope", headers=AUTH)).status_code == 404


async def test_an_edit_runs_the_edited_call_and_a_session_grant_covers_the_next_one(site: Server) -> None:
    chat = "c-edit"
    await ask(site, chat)
    [approval] = await pending(site, chat, 1)
    edited = {"amount": 40, "currency": "USD", "recipient": "Hanako"}
    decided = await site.client.post(
        f"/api/approvals/{approval['id']}/decision",
        json={"approved": True, "args": edited, "remember": "session"},
        headers=AUTH,
    )
    assert decided.json()["decision"]["args"] == edited and decided.json()["decision"]["by"] == "admin"
    assert decided.json()["edited"]["args"] == edited
    grants = (await site.client.get(f"/api/grants?chat={chat}", headers=AUTH)).json()["grants"]
    assert len(grants) == 1 and grants[0]["tool"] == "process_payment"
    revoked = await site.client.delete(f"/api/grants/{grants[0]['id']}", headers=AUTH)
    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert (await site.client.delete(f"/api/grants/{grants[0]['id']}", headers=AUTH)).status_code == 409


# -- deferred and blocking replies -------------------------------------------------------------------------


async def test_deferred_continuation_resolves_every_call_before_any_step(site: Server) -> None:
    first, reply = await ask(site, "c1", "pay 10 USD to Jiro and 20 USD to Saburo")
    assert [c["type"] for c in reply][-3:] == ["tool-approval-request", "finish-step", "finish"]
    assert reply[-1] == {"type": "finish", "finishReason": "tool-calls"}
    response = await site.client.post(
        "/api/chat", json=answer(first, reply, [(True, ""), (False, "too much")])
    )
    second = chunks(response.text)
    kinds = [c["type"] for c in second]
    assert second[0] == {"type": "start", "messageId": reply[0]["messageId"]}
    assert kinds[1:3] == ["tool-output-available", "tool-output-denied"] or kinds[1:3] == [
        "tool-output-denied",
        "tool-output-available",
    ]
    assert kinds.index("start-step") > 2 and response.text.count("[DONE]") == 1
    text = "".join(c["delta"] for c in second if c["type"] == "text-delta")
    assert "Paid 10 USD to Jiro" in text and "denied by the user: too much" in text


async def test_blocking_keeps_one_stream_open_until_the_api_decides(site: Server) -> None:
    post = asyncio.ensure_future(
        site.client.post("/api/chat", json=user("c1", "pay 50 USD to Hanako", wait="blocking"))
    )
    [approval] = await pending(site, "c1", 1)
    await asyncio.sleep(0.35)  # long enough for keep-alive comments at 0.1 s
    resumed = asyncio.ensure_future(site.client.get("/api/chat/c1/stream"))  # replays, then follows
    decided = await site.client.post(
        f"/api/approvals/{approval['id']}/decision",
        json={"approved": False, "reason": "not today"},
        headers=AUTH,
    )
    assert decided.status_code == 200
    response = await post
    assert response.text.count("[DONE]") == 1 and ": keep-alive" in response.text
    reply = chunks(response.text)
    assert {"type": "tool-output-denied", "toolCallId": approval["call"]["call_id"]} in reply
    assert "denied by admin: not today" in said(response.text)
    assert (await resumed).status_code == 200 and chunks((await resumed).text) == reply


async def test_a_second_request_while_a_reply_runs_is_refused(site: Server) -> None:
    post = asyncio.ensure_future(
        site.client.post("/api/chat", json=user("c1", "pay 50 USD to Hanako", wait="blocking"))
    )
    [approval] = await pending(site, "c1", 1)
    busy = await site.client.post("/api/chat", json=user("c1", "hello"))
    assert busy.status_code == 409 and "still running" in busy.json()["error"]["message"]
    await site.client.post(f"/api/approvals/{approval['id']}/decision", json={"approved": True}, headers=AUTH)
    assert "Paid 50 USD" in said((await post).text)


async def test_nothing_running_resumes_as_204(site: Server) -> None:
    assert (await site.client.get("/api/chat/nobody/stream")).status_code == 204


async def test_a_cli_decision_wakes_a_blocked_stream(tmp_path: Path, cli_env: dict[str, str]) -> None:
    path = tmp_path / "server.db"
    async for site in serve(SqliteLedger(path, poll_interval=0.02), demo_policy(), keepalive=0.1):
        post = asyncio.ensure_future(
            site.client.post("/api/chat", json=user("c1", "pay 50 USD to Hanako", wait="blocking"))
        )
        [approval] = await pending(site, "c1", 1)
        cli = await asyncio.to_thread(
            subprocess.run,
            [SIGNOFF, "approvals", "approve", approval["id"], "--ledger", f"sqlite:///{path}"],
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert cli.returncode == 0, cli.stderr
        assert "Paid 50 USD to Hanako" in said((await post).text)


async def test_a_new_message_withdraws_the_approvals_it_leaves_behind(site: Server) -> None:
    first, reply = await ask(site, "c1")
    [approval] = await pending(site, "c1", 1)
    moved_on = {
        **first,
        "messages": [
            *first["messages"],
            {"id": reply[0]["messageId"], "role": "assistant", "parts": []},
            user("c1", "weather in Tokyo")["messages"][0],
        ],
    }
    response = await site.client.post("/api/chat", json=moved_on)
    assert response.status_code == 200
    later = chunks(response.text)
    assert later[0]["messageId"] != reply[0]["messageId"]
    assert approval["call"]["call_id"] not in response.text  # no chunk for a call of the old message
    state = (await site.client.get(f"/api/approvals/{approval['id']}", headers=AUTH)).json()
    assert (
        state["state"] == "cancelled" and state["closed"]["reason"] == "the user sent a new message instead"
    )


async def test_deadlines_expire_without_any_waiter() -> None:
    policy = Policy.from_toml('[[tools.process_payment]]\naction = "ask"\ndeadline = "0.2s"\n' + PLAYS)
    async for site in serve(MemoryLedger(), policy, sweep=0.05):
        await ask(site, "c1")
        [approval] = await pending(site, "c1", 1)
        for _ in range(100):
            state = (await site.client.get(f"/api/approvals/{approval['id']}", headers=AUTH)).json()["state"]
            if state != "pending":
                break
            await asyncio.sleep(0.02)
        assert state == "expired"


# -- chat request errors and trust -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"nope", None),
        (b'{"messages": []}', "id"),
        (b'{"id": "c1", "messages": "hi"}', "messages"),
        (
            b'{"id": "c1", "messages": [{"id": "m", "role": "boss", "parts": []}]}',
            "messages[0].role",
        ),
        (b'{"id": "c1", "wait": "forever", "messages": [{"id": "m", "role": "user", "parts": []}]}', "wait"),
        (b'{"id": "c\\u0000", "messages": [{"id": "m", "role": "user", "parts": []}]}', "id"),
    ],
)
async def test_a_malformed_chat_body_is_a_400_naming_the_field(
    site: Server, body: bytes, field: str | None
) -> None:
    response = await site.client.post("/api/chat", content=body, headers=JSON)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] and (field is None or error["field"] == field)


async def test_an_id_with_control_characters_is_a_400_even_on_postgresql() -> None:
    ledger = PostgresLedger(POSTGRES, schema=f"test_{uuid.uuid4().hex[:12]}")
    async for site in serve(ledger, demo_policy()):
        for path in ("/api/chat/a%00b", "/api/chat/a%00b/events"):
            response = await site.client.get(path)
            assert response.status_code == 400 and "control" in response.json()["error"]["message"], path
    await drop(ledger)


async def test_continuing_a_chat_that_waits_on_nothing_is_refused(site: Server) -> None:
    body = {"id": "c1", "messages": [{"id": "a1", "role": "assistant", "parts": []}]}
    response = await site.client.post("/api/chat", json=body)
    assert response.status_code == 409 and "not waiting" in response.json()["error"]["message"]


async def test_a_response_with_other_args_is_refused_and_audited(site: Server) -> None:
    first, reply = await ask(site, "c1")
    forged = answer(first, reply, [(True, "")])
    forged["messages"][-1]["parts"][1]["input"]["amount"] = 5000
    response = await site.client.post("/api/chat", json=forged)
    assert response.status_code == 403 and "arguments differ" in response.json()["error"]["message"]
    [approval] = await pending(site, "c1", 1)
    refusals = [e for e in await site.ledger.audit.entries() if e.action == "refuse"]
    assert [(e.subject, e.detail["why"]) for e in refusals] == [
        (approval["id"], "the arguments differ from the ones that were asked")
    ]


# -- browser tools -----------------------------------------------------------------------------------------


async def test_a_browser_tool_runs_after_approval_and_its_output_reaches_the_model(site: Server) -> None:
    first, reply = await ask(site, "c1", "where am I")
    approved = await site.client.post("/api/chat", json=answer(first, reply, [(True, "")]))
    handed_over = chunks(approved.text)
    assert handed_over[-1] == {"type": "finish", "finishReason": "tool-calls"}  # the browser's turn now
    call = next(c for c in reply if c["type"] == "tool-input-available")
    assert handed_over[1:-1] == [call]  # moves the client's part from answered to input-available
    assert not any(c["type"].startswith("tool-output") for c in handed_over)
    where = {"latitude": 35.68, "longitude": 139.76}
    body = with_output(first, reply, state="output-available", output=where)
    located = await site.client.post("/api/chat", json=body)
    assert located.status_code == 200 and "You are at 35.68, 139.76." in said(located.text)
    assert not any(c["type"].startswith("tool-output") for c in chunks(located.text))  # the page has it
    replayed = await site.client.post("/api/chat", json=body)
    assert replayed.status_code == 409  # nothing left to wait on


async def test_a_browser_failure_reaches_the_model_as_a_failure() -> None:
    policy = Policy.from_toml('[[tools.get_location]]\naction = "allow"\n' + PLAYS)
    async for site in serve(MemoryLedger(), policy):
        first, reply = await ask(site, "c1", "where am I")
        assert reply[-1]["finishReason"] == "tool-calls" and "tool-approval-request" not in str(reply)
        body = with_output(first, reply, state="output-error", errorText="the person said no")
        failed = await site.client.post("/api/chat", json=body)
        assert "get_location failed: the person said no" in said(failed.text)


async def test_an_output_for_a_call_never_made_is_refused(site: Server) -> None:
    first, reply = await ask(site, "c1", "where am I")
    body = with_output(first, reply, state="output-available", output={"latitude": 0, "longitude": 0})
    body["messages"][-1]["parts"][1]["toolCallId"] = "call_invented"
    refused = await site.client.post("/api/chat", json=body)
    assert refused.status_code == 409 and "no call call_invented" in refused.json()["error"]["message"]


# -- the live feed -----------------------------------------------------------------------------------------


@pytest.fixture
async def watched() -> AsyncIterator[Server]:
    async for server in serve(MemoryLedger(), demo_policy(), keepalive=0.1, feed_interval=0.02):
        yield server


async def test_the_feed_shows_what_is_pending_then_each_change(watched: Server) -> None:
    site = watched
    await ask(site, "before")
    [earlier] = await pending(site, "before", 1)
    seen: list[dict[str, Any]] = []

    async def follow() -> None:
        async with site.client.stream("GET", "/api/approvals/feed", headers=AUTH) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if seen[-1]["state"] == "denied":
                        return

    reading = asyncio.ensure_future(follow())
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    await ask(site, "after")
    [later] = await pending(site, "after", 1)
    await site.client.post(f"/api/approvals/{later['id']}/decision", json={"approved": False}, headers=AUTH)
    await asyncio.wait_for(reading, 10)
    states = [(a["id"], a["state"]) for a in seen]
    assert states[0] == (earlier["id"], "pending") and states[-1] == (later["id"], "denied")
    assert set(states[1:-1]) <= {(later["id"], "pending")}  # a change seen in one poll shows its end state
    assert (await site.client.get("/api/approvals/feed")).status_code == 401


async def test_regenerate_replaces_the_last_reply_and_withdraws_its_approvals(site: Server) -> None:
    first, reply = await ask(site, "c1")
    [approval] = await pending(site, "c1", 1)
    again = await site.client.post("/api/chat", json={**first, "trigger": "regenerate-message"})
    assert again.status_code == 200
    redone = chunks(again.text)
    assert redone[0]["messageId"] != reply[0]["messageId"]
    assert [c["type"] for c in redone].count("tool-approval-request") == 1
    old = (await site.client.get(f"/api/approvals/{approval['id']}", headers=AUTH)).json()
    assert old["state"] == "cancelled"
    assert len(await pending(site, "c1", 1)) == 1  # only the new call's approval waits


async def test_regenerate_with_nothing_before_is_refused(site: Server) -> None:
    body = {**user("empty", "hi"), "trigger": "regenerate-message"}
    response = await site.client.post("/api/chat", json=body)
    assert response.status_code == 409 and "no earlier user message" in response.json()["error"]["message"]


async def test_a_reply_is_cut_to_each_readers_client_version(site: Server) -> None:
    """The running reply keeps typed chunks: a v7 client that starts it gets the signature, and a v6 page
    that reloads and follows the same reply gets the chunks a 6.0.0 client accepts."""
    first = user("c1", "pay 50 USD to Hanako")
    started = await site.client.post("/api/chat", json=first, headers={"x-ai-sdk-version": "7"})
    [signed] = [c for c in chunks(started.text) if c["type"] == "tool-approval-request"]
    followed = chunks((await site.client.get("/api/chat/c1/stream")).text)
    [plain] = [c for c in followed if c["type"] == "tool-approval-request"]
    assert "signature" in signed and plain == {k: v for k, v in signed.items() if k != "signature"}
    again = chunks((await site.client.get("/api/chat/c1/stream", headers={"x-ai-sdk-version": "7"})).text)
    assert [c for c in again if c["type"] == "tool-approval-request"] == [signed]


async def test_a_v7_client_gets_signed_requests_and_a_bad_signature_is_refused(site: Server) -> None:
    first = user("c1", "pay 50 USD to Hanako")
    response = await site.client.post("/api/chat", json=first, headers={"x-ai-sdk-version": "7"})
    reply = chunks(response.text)
    [asked] = [c for c in reply if c["type"] == "tool-approval-request"]
    assert len(asked["signature"]) == 43  # unpadded base64url of a SHA-256 HMAC
    plain = chunks((await site.client.post("/api/chat", json=user("c2", "pay 50 USD to Hanako"))).text)
    assert "signature" not in next(c for c in plain if c["type"] == "tool-approval-request")

    tampered = answer(first, reply, [(True, "")])
    tampered["messages"][-1]["parts"][1]["approval"]["signature"] = asked["signature"][::-1]
    refused = await site.client.post("/api/chat", json=tampered)
    assert refused.status_code == 403 and "signature" in refused.json()["error"]["message"]
    signed = answer(first, reply, [(True, "")])
    signed["messages"][-1]["parts"][1]["approval"]["signature"] = asked["signature"]
    assert "Paid 50 USD to Hanako" in said((await site.client.post("/api/chat", json=signed)).text)
