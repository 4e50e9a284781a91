"""Proves the JS client harness (tests/js/chat.mjs + tests/jsclient.py) against a throwaway fake server.

The fake answers with FIXED, valid AI SDK UI message streams, so these tests check the harness (recording,
idle detection, automatic follow-up, REST decisions, raw posts), not the product.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.jsclient import (
    CLIENTS,
    JsClientError,
    assistant_messages,
    chunk_types,
    needs_node,
    run_scenario,
    tool_parts,
)

pytestmark = needs_node

TOKEN = "smoke-token"
PAYMENT = {"amount": 50, "currency": "USD", "recipient": "Hanako"}
SSE_HEADERS = {
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


def sse(*chunks: dict[str, Any]) -> list[str]:
    return [f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in chunks]


DONE = "data: [DONE]\n\n"

TEXT_REPLY = [
    *sse(
        {"type": "start", "messageId": "t1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "x1"},
        {"type": "text-delta", "id": "x1", "delta": "Hello there."},
        {"type": "text-end", "id": "x1"},
        {"type": "finish-step"},
        # ai 6.0.0 accepts finishReason on `finish` (it is in its strict schema), so every version gets it.
        {"type": "finish", "finishReason": "stop"},
    ),
    DONE,
]

ASK_TURN = [
    *sse(
        {"type": "start", "messageId": "m1"},
        {"type": "start-step"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "process_payment"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "process_payment", "input": PAYMENT},
        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ),
    DONE,
]

CONTINUATION = [
    *sse(
        {"type": "start", "messageId": "m1"},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"success": True, "balance": 950}},
        {"type": "start-step"},
        {"type": "text-start", "id": "x2"},
        {"type": "text-delta", "id": "x2", "delta": "Paid 50 USD to Hanako."},
        {"type": "text-end", "id": "x2"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ),
    DONE,
]


# Leaves the responded call unresolved and opens no new step, so the client re-POSTs forever.
LOOPING_CONTINUATION = [
    *sse(
        {"type": "start", "messageId": "m1"},
        {"type": "text-start", "id": "x4"},
        {"type": "text-delta", "id": "x4", "delta": "Hmm."},
        {"type": "text-end", "id": "x4"},
        {"type": "finish", "finishReason": "stop"},
    ),
    DONE,
]


@dataclass
class FakeState:
    """What the fake server saw; shared with the tests (read after each scenario, so no locking needed)."""

    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    decided: dict[str, asyncio.Event] = field(default_factory=dict)


def has_approval_response(body: dict[str, Any]) -> bool:
    return any(
        part.get("state") == "approval-responded"
        for message in body.get("messages", [])
        for part in message.get("parts", [])
    )


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    if not users:
        return ""
    return "".join(p.get("text", "") for p in users[-1].get("parts", []) if p.get("type") == "text")


def make_app(state: FakeState) -> Starlette:
    def stream(lines: list[str]) -> StreamingResponse:
        async def gen() -> AsyncIterator[str]:
            for line in lines:
                yield line

        return StreamingResponse(gen(), media_type="text/event-stream", headers=SSE_HEADERS)

    def blocking_turn(chat_id: str) -> StreamingResponse:
        # One stream: ask, keep the socket open with comments until the REST decision, then the tool outcome.
        approval_id = f"ap-{chat_id}"
        state.approvals[approval_id] = {
            "id": approval_id,
            "chat_id": chat_id,
            "state": "pending",
            "created_at": time.time(),
            "call": {"call_id": "c1", "tool": "process_payment", "args": PAYMENT},
        }
        event = state.decided.setdefault(approval_id, asyncio.Event())

        async def gen() -> AsyncIterator[str]:
            for line in ASK_TURN[:5]:  # start .. tool-approval-request
                yield line.replace('"a1"', json.dumps(approval_id))
            while not event.is_set():
                yield ": keep-alive\n\n"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), 0.1)
            if state.approvals[approval_id]["state"] == "approved":
                outcome = {"type": "tool-output-available", "toolCallId": "c1", "output": {"success": True}}
                text = "Paid."
            else:
                outcome = {"type": "tool-output-denied", "toolCallId": "c1"}
                text = "Refused."
            for line in sse(
                outcome,
                {"type": "finish-step"},
                {"type": "start-step"},
                {"type": "text-start", "id": "x3"},
                {"type": "text-delta", "id": "x3", "delta": text},
                {"type": "text-end", "id": "x3"},
                {"type": "finish-step"},
                {"type": "finish", "finishReason": "stop"},
            ):
                yield line
            yield DONE

        return StreamingResponse(gen(), media_type="text/event-stream", headers=SSE_HEADERS)

    async def chat(request: Request) -> Response:
        body = await request.json()
        if not isinstance(body.get("messages"), list):
            return JSONResponse({"error": "messages must be a list"}, status_code=400)
        if has_approval_response(body):
            return stream(LOOPING_CONTINUATION if body["id"].startswith("loop-") else CONTINUATION)
        text = last_user_text(body)
        if text == "fail":
            return JSONResponse({"error": "boom"}, status_code=500)
        if text.startswith("pay"):
            return blocking_turn(body["id"]) if body.get("wait") == "blocking" else stream(ASK_TURN)
        return stream(TEXT_REPLY)

    def authorized(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {TOKEN}"

    async def list_approvals(request: Request) -> Response:
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        wanted_state = request.query_params.get("state")
        chat_id = request.query_params.get("chat")
        approvals = [
            a
            for a in state.approvals.values()
            if wanted_state in (None, a["state"]) and chat_id in (None, a["chat_id"])
        ]
        return JSONResponse({"approvals": approvals})

    async def decide(request: Request) -> Response:
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        approval = state.approvals.get(request.path_params["approval_id"])
        if approval is None:
            return JSONResponse({"error": "not found"}, status_code=404)
        if approval["state"] != "pending":
            return JSONResponse({"error": "already decided", "state": approval["state"]}, status_code=409)
        decision = await request.json()
        approval["state"] = "approved" if decision["approved"] else "denied"
        approval["reason"] = decision.get("reason")
        state.decided.setdefault(approval["id"], asyncio.Event()).set()
        return JSONResponse({"id": approval["id"], "state": approval["state"]})

    return Starlette(
        routes=[
            Route("/api/chat", chat, methods=["POST"]),
            Route("/api/approvals", list_approvals, methods=["GET"]),
            Route("/api/approvals/{approval_id}/decision", decide, methods=["POST"]),
        ]
    )


@dataclass
class FakeServer:
    base: str
    state: FakeState

    def scenario(
        self, client: str, chat_id: str, steps: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        return {
            "client": client,
            "api": f"{self.base}/api/chat",
            "base": self.base,
            "token": TOKEN,
            "chatId": f"{chat_id}-{client}",
            "steps": steps,
            **extra,
        }


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    state = FakeState()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(state), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "fake server did not start"
        time.sleep(0.01)
    try:
        yield FakeServer(f"http://127.0.0.1:{port}", state)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_text_reply(fake: FakeServer, client: str) -> None:
    t = run_scenario(fake.scenario(client, "text", [{"send": "hello"}]))

    assert t["status"] == "ready" and "error" not in t and t["errors"] == []
    assert t["client"] == client and t["version"].startswith("7." if client == "ai-7" else "6.")
    [reply] = assistant_messages(t)
    assert reply["id"] == "t1"
    assert next(p for p in reply["parts"] if p["type"] == "text")["text"] == "Hello there."
    [request] = t["requests"]
    assert request["status"] == 200 and request["done"] == 1 and request["doneLast"]
    assert request["responseHeaders"]["x-vercel-ai-ui-message-stream"] == "v1"
    assert chunk_types(request) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert request["body"]["id"] == f"text-{client}" and request["body"]["trigger"] == "submit-message"


@pytest.mark.parametrize("client", CLIENTS)
def test_deferred_approval_round_trip(fake: FakeServer, client: str) -> None:
    t = run_scenario(
        fake.scenario(
            client,
            "deferred",
            [
                {"send": "pay 50 USD to Hanako"},
                {"respond": [{"tool": "process_payment", "index": 0, "approved": True, "reason": "ok"}]},
            ],
            body={"wait": "deferred"},
        )
    )

    assert t["status"] == "ready" and t["errors"] == []
    [message] = assistant_messages(t)
    assert message["id"] == "m1"
    [part] = tool_parts(message, "process_payment")
    assert part["state"] == "output-available"
    assert part["output"] == {"success": True, "balance": 950}
    assert part["approval"]["id"] == "a1" and part["approval"]["approved"] is True
    assert len(t["requests"]) == 2
    assert [r["done"] for r in t["requests"]] == [1, 1]
    assert all(r["body"]["wait"] == "deferred" for r in t["requests"])  # transport `body` merged into each
    follow_up = t["requests"][1]["body"]
    responded = [
        p for m in follow_up["messages"] for p in m["parts"] if p.get("state") == "approval-responded"
    ]
    assert len(responded) == 1
    assert responded[0]["toolCallId"] == "c1"
    assert responded[0]["approval"] == {"id": "a1", "approved": True, "reason": "ok"}
    assert [f.get("finishReason") for f in t["finishes"]] == ["tool-calls", "stop"]


@pytest.mark.parametrize("client", CLIENTS)
def test_blocking_decision_through_rest(fake: FakeServer, client: str) -> None:
    decision = {"tool": "process_payment", "index": 0, "approved": False, "reason": "no"}
    t = run_scenario(
        fake.scenario(
            client,
            "blocking",
            # The second, identical decision shows that a late decision is recorded with its REST answer.
            [{"send": "pay 50 USD to Hanako", "decide": [decision, decision]}],
            body={"wait": "blocking"},
        )
    )

    approval_id = f"ap-blocking-{client}"
    statuses = [(d["approval_id"], d["status"]) for d in t["decisions"]]
    assert statuses == [(approval_id, 200), (approval_id, 409)]
    assert t["decisions"][0]["body"] == {"id": approval_id, "state": "denied"}
    assert fake.state.approvals[approval_id]["reason"] == "no"
    [request] = t["requests"]  # one stream, one [DONE]
    assert request["done"] == 1 and request["comments"] >= 1
    [message] = assistant_messages(t)
    [part] = tool_parts(message, "process_payment")
    assert part["state"] == "output-denied"
    assert t["status"] == "ready"


@pytest.mark.parametrize("client", CLIENTS)
def test_server_error_raw_post_and_replay(fake: FakeServer, client: str) -> None:
    t = run_scenario(
        fake.scenario(
            client,
            "raw",
            [{"send": "hello"}, {"send": "fail"}, {"replay": 0}, {"post": {"id": "x", "messages": "nope"}}],
        )
    )

    # A server error is reported, not a harness failure.
    assert t["status"] == "error" and t["error"] == '{"error":"boom"}'
    assert t["errors"] == ['{"error":"boom"}']
    assert [r["status"] for r in t["requests"]] == [200, 500]
    assert t["requests"][1]["json"] == {"error": "boom"}
    replay, bad = t["raw"]
    assert replay["body"] == t["requests"][0]["body"]
    assert replay["chunks"] == t["requests"][0]["chunks"] and replay["done"] == 1
    assert bad["status"] == 400 and bad["json"] == {"error": "messages must be a list"}


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"respond": [{"tool": "x", "approved": True}]}], "respond: there is no assistant message"),
        (
            [{"send": "hello", "decide": [{"tool": "process_payment", "approved": True}]}],
            "decide: process_payment#0 never became pending",
        ),
        (
            [{"send": "pay 1"}, {"respond": [{"tool": "process_payment", "approved": True}]}],
            "runaway: the client made more than 4 chat requests",
        ),
    ],
    ids=["respond-without-message", "decide-never-pending", "runaway-loop"],
)
def test_harness_failure_is_loud(fake: FakeServer, steps: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(JsClientError, match=message):
        run_scenario(fake.scenario("ai-6", "loop", steps, maxRequests=4))
