"""`WS /api/live` beyond the seed scenarios: the frames a client may get wrong, interrupt, a socket that
drops mid-wait, and the trust checks on answers sent over the socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets

from signoff.core.approval import State
from signoff.core.policy import Policy
from tests.chats import PLAYS, Site, decided, responded, serve_demo, tool_part, user

Socket = websockets.ClientConnection


async def frame(socket: Socket) -> dict[str, Any] | str:
    raw = await socket.recv()
    assert isinstance(raw, str)
    return raw if raw == "[DONE]" else json.loads(raw)  # type: ignore[no-any-return]


async def until(socket: Socket, kind: str) -> list[dict[str, Any] | str]:
    """Frames up to and including the first of `kind` (`[DONE]` for the end of a turn)."""
    seen: list[dict[str, Any] | str] = []
    while True:
        seen.append(got := await frame(socket))
        if got == kind or (isinstance(got, dict) and got["type"] == kind):
            return seen


async def paused(socket: Socket) -> list[dict[str, Any] | str]:
    """Frames up to the pause after a question: the `finish-step` where a standard client ends its
    stream so it can answer."""
    seen = await until(socket, "finish-step")
    assert [c["type"] for c in seen[-2:] if isinstance(c, dict)] == ["tool-approval-request", "finish-step"]
    return seen


def answer(chat: str, seen: list[dict[str, Any] | str], approved: bool, **changes: Any) -> str:
    chunks = [c for c in seen if isinstance(c, dict)]
    request = {**next(c for c in chunks if c["type"] == "tool-approval-request"), **changes}
    call = next(c for c in chunks if c["type"] == "tool-input-available")
    part = responded(call, request, (approved, ""))
    assistant = {"id": chunks[0]["messageId"], "role": "assistant", "parts": [part]}
    return json.dumps({"type": "message", "id": chat, "messages": [assistant]})


def spoken(seen: list[dict[str, Any] | str]) -> str:
    return "".join(c["delta"] for c in seen if isinstance(c, dict) and c["type"] == "text-delta")


def connect(site: Site) -> websockets.connect:
    return websockets.connect(f"ws://{site.base}/api/live")


async def test_ping_and_frames_a_client_gets_wrong(site: Site) -> None:
    async with connect(site) as socket:
        await socket.send('{"type":"ping"}')
        assert await frame(socket) == {"type": "pong"}
        for bad, says in [
            ("{nope", "not JSON"),
            ("[1]", "JSON object"),
            ('{"type":"dance"}', "must be message, resume, interrupt or ping"),
            ('{"type":"interrupt"}', "no reply"),
            ('{"type":"resume","id":""}', "id"),
        ]:
            await socket.send(bad)
            got = await frame(socket)
            assert isinstance(got, dict) and got["type"] == "error" and says in got["errorText"], (bad, got)
        await socket.send(b"\x00binary")
        assert "text frames" in str(await frame(socket))
        # a message that would start a turn ends its stream after the refusal, so the client's stream ends
        await socket.send(json.dumps({"type": "message", "id": "c1", "messages": []}))
        refused, done = await frame(socket), await frame(socket)
        assert isinstance(refused, dict) and "messages" in refused["errorText"] and done == "[DONE]"
        await socket.send('{"type":"ping"}')  # and the socket still works
        assert await frame(socket) == {"type": "pong"}


async def test_interrupt_ends_the_turn_with_abort(site: Site, runtime: str) -> None:
    """pydantic-ai saved the chat as waiting before it blocked, so the question can still be answered;
    ADK cannot pick a blocked call up again, so an interrupt withdraws the question."""
    async with connect(site) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "pay 50 USD to Hanako")}))
        asked = await paused(socket)
        await socket.send('{"type":"interrupt"}')
        rest = await until(socket, "[DONE]")
        assert rest[-2:] == [{"type": "abort"}, "[DONE]"]  # a v6 client gets no reason
        (approval,) = await site.ledger.approvals.query(chat_id="c1")
        if runtime in ("adk", "openai-agents"):  # a call blocked in its tool's body: no history to resume
            assert (
                approval.state is State.CANCELLED
                and approval.closed_reason == "the user interrupted the reply"
            )
            await socket.send(json.dumps({"type": "message", **user("c1", "weather in Tokyo")}))
            assert "in Tokyo." in spoken(await until(socket, "[DONE]"))
            return
        assert approval.state is State.PENDING
        await socket.send(answer("c1", asked, approved=True))  # a new turn continues the chat
        done = await until(socket, "[DONE]")
    assert "Paid 50 USD to Hanako" in spoken(done)
    assert site.wallets.balances["c1"] == 950


async def test_a_dropped_socket_leaves_the_approval_pending_and_a_new_one_shows_it_again(site: Site) -> None:
    async with connect(site) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "pay 50 USD to Hanako")}))
        first = await paused(socket)
    (approval,) = await site.ledger.approvals.query(chat_id="c1")
    assert approval.state is State.PENDING
    async with connect(site) as socket:
        await socket.send('{"type":"resume","id":"c1"}')
        again = await paused(socket)
        assert again == first  # the whole reply so far, question included
        await socket.send(answer("c1", again, approved=True))
        done = await until(socket, "[DONE]")
        assert "Paid 50 USD to Hanako; the balance is 950 USD." in spoken(done)
        await socket.send('{"type":"resume","id":"nothing-here"}')
        assert await frame(socket) == "[DONE]"  # nothing running: the resumed stream is empty
    assert site.wallets.balances["c1"] == 950


async def test_forged_answers_and_new_messages_are_refused_while_the_turn_goes_on(site: Site) -> None:
    async with connect(site) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "pay 50 USD to Hanako")}))
        asked = await paused(socket)
        await socket.send(answer("c1", asked, approved=True, approvalId="apr_forged"))
        forged = await frame(socket)
        assert isinstance(forged, dict) and forged["type"] == "error" and "apr_forged" in forged["errorText"]
        await socket.send(json.dumps({"type": "message", **user("c1", "weather in Tokyo")}))
        busy = await frame(socket)
        assert isinstance(busy, dict) and "still running" in busy["errorText"]
        assert site.wallets.balances["c1"] == 1000  # nothing ran
        await socket.send(answer("c1", asked, approved=False))
        done = await until(socket, "[DONE]")
    assert [c for c in done if c == "[DONE]"] == ["[DONE]"]
    audit = await site.ledger.audit.entries(0, 1000)
    assert any(e.action == "refuse" and e.subject == "apr_forged" for e in audit)
    (approval,) = await site.ledger.approvals.query(chat_id="c1")
    await decided(site, approval.id)
    assert approval.id != "apr_forged" and site.wallets.balances["c1"] == 1000


@pytest.mark.parametrize("route", ["/api/live with sse", "/live"])
async def test_the_sse_framing_frames_every_chunk_as_an_sse_event(site: Site, route: str) -> None:
    """Seed 000's transport reads `data: <json>` events over the socket: asking for the `sse` subprotocol,
    or opening the seed's own route `/live` with none, gets every chunk so, `[DONE]` included, for a whole
    approved payment. The pong is no chunk: it stays bare JSON, and echoes the ping's timestamp."""
    path, _, asked = route.partition(" with ")
    async with websockets.connect(
        f"ws://{site.base}{path}", subprotocols=[asked] if asked else None
    ) as socket:
        assert socket.subprotocol == (asked or None)
        await socket.send('{"type":"ping","version":"1.0","timestamp":1795757176123}')
        assert await socket.recv() == '{"type":"pong","timestamp":1795757176123}'
        raw: list[str] = []

        async def events(kind: str) -> list[dict[str, Any] | str]:
            seen: list[dict[str, Any] | str] = []
            while True:
                text = await socket.recv()
                assert isinstance(text, str) and text.startswith("data: ") and text.endswith("\n\n"), text
                raw.append(text)
                body = text.removeprefix("data: ").removesuffix("\n\n")
                seen.append(got := body if body == "[DONE]" else json.loads(body))
                if got == kind or (isinstance(got, dict) and got["type"] == kind):
                    return seen

        await socket.send(json.dumps({"type": "message", **user("c1", "pay 50 USD to Hanako")}))
        asked = await events("tool-approval-request")
        await socket.send(answer("c1", asked, approved=True))
        done = await events("[DONE]")
    assert "Paid 50 USD to Hanako; the balance is 950 USD." in spoken(done)
    assert raw[-1] == "data: [DONE]\n\n" and sum(text == "data: [DONE]\n\n" for text in raw) == 1
    assert site.wallets.balances["c1"] == 950


async def test_without_the_subprotocol_frames_stay_bare_json(site: Site) -> None:
    async with websockets.connect(f"ws://{site.base}/api/live", subprotocols=["something-else"]) as socket:
        assert socket.subprotocol is None
        await socket.send('{"type":"ping"}')
        assert await socket.recv() == '{"type":"pong"}'


# -- standard clients: the pause, results sent early, results that can't be taken ---------------------------


def message(chat: str, first: dict[str, Any] | str, *parts: dict[str, Any]) -> str:
    """An ordinary `message` frame as `sendMessages` sends it: the user's message and the assistant's."""
    assert isinstance(first, dict)
    assistant = {"id": first["messageId"], "role": "assistant", "parts": [{"type": "step-start"}, *parts]}
    prompt = user(chat, "")["messages"][0]
    return json.dumps(
        {"type": "message", "id": chat, "trigger": "submit-message", "messages": [prompt, assistant]}
    )


def call_of(seen: list[dict[str, Any] | str], tool: str) -> dict[str, Any]:
    return next(c for c in seen if isinstance(c, dict) and c.get("toolName") == tool and "input" in c)


async def audited(site: Site, action: str, subject: str) -> list[str]:
    return [
        e.detail.get("why", "")
        for e in await site.ledger.audit.entries(0, 10_000)
        if (e.action, e.subject) == (action, subject)
    ]


async def test_an_acknowledged_call_is_answered_by_the_server_and_the_browsers_result_only_audited(
    site: Site,
) -> None:
    """Seed 001's client acts on `change_bgm` as it sees the call, and may send its own result at once:
    the server's acknowledgment is what the model hears, the turn ends with one `[DONE]`, and the browser's
    result is audited, not used."""
    async with connect(site) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "play lofi beats")}))
        seen = await until(socket, "tool-input-available")
        played = tool_part(
            call_of(seen, "change_bgm"), state="output-error", errorText="autoplay was blocked"
        )
        await socket.send(message("c1", seen[0], played))
        rest = await until(socket, "[DONE]")
    assert "Now playing lofi beats." in spoken(rest) and "autoplay" not in spoken(rest)
    kinds = [c["type"] for c in seen + rest if isinstance(c, dict)]
    assert kinds.count("tool-input-available") == 1 and kinds.count("tool-output-available") == 1
    assert kinds.count("error") == 0 and kinds.count("data-browser-call") == 0
    assert [c for c in rest if c == "[DONE]"] == ["[DONE]"]
    (why,) = await audited(site, "acted", call_of(seen, "change_bgm")["toolCallId"])
    assert why.startswith("the browser reported on an acknowledged call (it failed: autoplay was blocked)")


async def test_a_result_that_cannot_be_taken_gets_an_error_and_the_turn_goes_on(site: Site) -> None:
    """A location sent alone while its approval waits for a person, or a result for a call nobody made:
    refused with an `error` chunk saying why, and audited; never dropped silently. The turn still takes
    the real answer."""
    async with connect(site) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "where am I")}))
        seen = await paused(socket)
        call = call_of(seen, "get_location")
        alone = tool_part(call, state="output-available", output={"latitude": 1, "longitude": 2})
        await socket.send(message("c1", seen[0], alone))
        refused = await frame(socket)
        assert isinstance(refused, dict) and refused["type"] == "error"
        assert "waits for a person's approval, not for an output" in refused["errorText"]
        ghost = {**alone, "toolCallId": "call_nobody_made"}
        await socket.send(message("c1", seen[0], ghost))
        refused = await frame(socket)
        assert isinstance(refused, dict) and "no call call_nobody_made was made" in refused["errorText"]
        asked = next(c for c in seen if isinstance(c, dict) and c["type"] == "tool-approval-request")
        approve_and_run = tool_part(
            call, state="output-available", output={"latitude": 35.68, "longitude": 139.76},
            approval={"id": asked["approvalId"], "approved": True},
        )  # fmt: skip
        await socket.send(message("c1", seen[0], approve_and_run))
        rest = await until(socket, "[DONE]")
    assert "You are at 35.68, 139.76." in spoken(rest)
    assert len(await audited(site, "refuse", call["toolCallId"])) == 1
    assert len(await audited(site, "refuse", "call_nobody_made")) == 1
    assert await audited(site, "run", call["toolCallId"]) == [
        "the browser ran it with its approval, in one message"
    ]
    assert not any(isinstance(c, dict) and c.get("type") == "data-browser-call" for c in rest)  # not handed


async def test_a_denied_location_sent_with_its_result_never_reaches_the_model(site: Site) -> None:
    async with connect(site) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "where am I")}))
        seen = await paused(socket)
        call = call_of(seen, "get_location")
        asked = next(c for c in seen if isinstance(c, dict) and c["type"] == "tool-approval-request")
        denied = tool_part(
            call, state="output-available", output={"latitude": 35.68, "longitude": 139.76},
            approval={"id": asked["approvalId"], "approved": False, "reason": "not now"},
        )  # fmt: skip
        await socket.send(message("c1", seen[0], denied))
        rest = await until(socket, "[DONE]")
    assert "35.68" not in spoken(rest) and "not now" in spoken(rest)
    assert await audited(site, "refuse", call["toolCallId"]) == [
        "the browser's output is not used: the approval is denied"
    ]


@pytest.fixture
async def quorum(runtime: str) -> AsyncIterator[Site]:
    """Payments need two approvals: the chat's owner and an admin."""
    text = '[[tools.process_payment]]\naction = "ask"\napprovers = ["requester", "role:admin"]\nquorum = 2\n'
    async for served in serve_demo(runtime, Policy.from_toml(text + PLAYS)):
        yield served


async def test_an_answer_that_changes_nothing_pauses_the_turn_again(quorum: Site) -> None:
    """The owner's approval is one vote of two: the client's new stream must end, so the server pauses
    again at once; the second vote, from elsewhere, lets the turn go on with one `[DONE]`."""
    async with connect(quorum) as socket:
        await socket.send(json.dumps({"type": "message", **user("c1", "pay 50 USD to Hanako")}))
        seen = await paused(socket)
        await socket.send(answer("c1", seen, approved=True))
        assert await frame(socket) == {"type": "finish-step"}  # the pause again, nothing else
        (approval,) = await quorum.ledger.approvals.query(chat_id="c1")
        assert approval.state is State.PENDING and len(approval.votes) == 1
        async with httpx.AsyncClient(base_url=f"http://{quorum.base}") as client:
            response = await client.post(
                f"/api/approvals/{approval.id}/decision",
                json={"approved": True},
                headers={"authorization": "Bearer t"},
            )
            assert response.status_code == 200, response.text
        rest = await until(socket, "[DONE]")
    assert "Paid 50 USD to Hanako" in spoken(rest) and [c for c in rest if c == "[DONE]"] == ["[DONE]"]
    assert quorum.wallets.balances["c1"] == 950


async def test_a_call_refused_elsewhere_shows_its_result_while_the_turn_waits_on_the_other(
    site: Site,
) -> None:
    """Two payments ask in one step; the inbox denies Saburo's while the client still holds both. His
    result goes out at once, on either framework (ADK reports a step's results together, later), and the
    turn pauses again on Jiro's; one answer then ends the turn."""
    async with connect(site) as socket:
        await socket.send(
            json.dumps({"type": "message", **user("c1", "pay 10 USD to Jiro and 20 USD to Saburo")})
        )
        seen = await until(socket, "finish-step")
        asked = [c for c in seen if isinstance(c, dict) and c["type"] == "tool-approval-request"]
        assert len(asked) == 2
        saburo = next(
            a for a in await site.ledger.approvals.query(chat_id="c1") if a.call.args["recipient"] == "Saburo"
        )
        async with httpx.AsyncClient(base_url=f"http://{site.base}") as client:
            denied = await client.post(
                f"/api/approvals/{saburo.id}/decision", json={"approved": False, "reason": "no"},
                headers={"authorization": "Bearer t"},
            )  # fmt: skip
            assert denied.status_code == 200, denied.text
        moved = await until(socket, "finish-step")
        assert [c["type"] for c in moved if isinstance(c, dict)] == ["tool-output-denied", "finish-step"]
        assert moved[0]["toolCallId"] == saburo.call.call_id  # type: ignore[index]
        jiro = next(c for c in asked if c["toolCallId"] != saburo.call.call_id)
        await socket.send(answer("c1", seen, approved=True, **jiro))
        rest = await until(socket, "[DONE]")
    kinds = [c["type"] for c in rest if isinstance(c, dict)]
    assert kinds.count("tool-output-denied") == 0 and "Paid 10 USD to Jiro" in spoken(rest)
    assert site.wallets.balances["c1"] == 990
