"""`WS /api/live` beyond the seed scenarios: the frames a client may get wrong, interrupt, a socket that
drops mid-wait, and the trust checks on answers sent over the socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets

from signoff.core.approval import State
from signoff.demo.runtime import RUNTIMES
from signoff.demo.walkthrough import demo_policy
from tests.chats import Site, decided, responded, serve_demo, user

Socket = websockets.ClientConnection


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def site(runtime: str) -> AsyncIterator[Site]:
    async for served in serve_demo(runtime, demo_policy()):
        yield served


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
        (approval,) = await site.ledger.approvals(chat_id="c1")
        if runtime == "adk":
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
    (approval,) = await site.ledger.approvals(chat_id="c1")
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
    audit = await site.ledger.audit(0, 1000)
    assert any(e.action == "refuse" and e.subject == "apr_forged" for e in audit)
    (approval,) = await site.ledger.approvals(chat_id="c1")
    await decided(site, approval.id)
    assert approval.id != "apr_forged" and site.wallets.balances["c1"] == 1000


async def test_the_sse_subprotocol_frames_every_frame_as_an_sse_event(site: Site) -> None:
    """Seed 000's transport reads `data: <json>` events over the socket: asking for the `sse` subprotocol
    gets every frame so, `[DONE]` included, for a whole approved payment."""
    async with websockets.connect(f"ws://{site.base}/api/live", subprotocols=["sse"]) as socket:
        assert socket.subprotocol == "sse"
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

        await socket.send('{"type":"ping"}')
        assert await events("pong") == [{"type": "pong"}]
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
