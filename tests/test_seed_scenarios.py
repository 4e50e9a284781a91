"""The seed project's fixture scenarios (seeds 000-002), over SSE and over the live socket, on every runtime.

Each scenario runs the demo agent with its scripted model behind a real uvicorn, answers like the page
would, and checks:
- the chunk sequence: well formed (`check_turn`), with the `[DONE]` count of its transport: SSE ends every
  request with one, so an approval costs two; the live socket keeps the turn open, so one per turn;
- that a denied or timed-out payment never runs, and that its reason reaches the model (the scripted
  model quotes every refusal it is told about);
- the wallet balance afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import pytest
import websockets

from signoff.core.approval import State
from signoff.core.policy import Policy
from signoff.demo.tools import STARTING_BALANCE
from tests.chats import PLAYS, Site, Verdict, decided, responded, serve_demo, tool_part, user

WHERE = {"latitude": 35.68, "longitude": 139.76}
DEADLINE = 0.5
"""The payment deadline of the timed-out scenario, in seconds."""


@pytest.fixture
async def hurried(runtime: str) -> AsyncIterator[Site]:
    """Payments expire unanswered after `DEADLINE` seconds."""
    text = f'mode = "interactive"\n[[tools.process_payment]]\naction = "ask"\ndeadline = "{DEADLINE}s"\n'
    async for served in serve_demo(runtime, Policy.from_toml(text + PLAYS)):
        yield served


# -- the two transports, answering like the page does ----------------------------------------------------


@dataclass
class Turns:
    """Everything a scenario received: the chunks of each `[DONE]`-terminated stream, in order."""

    streams: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [c for stream in self.streams for c in stream]

    @property
    def text(self) -> str:
        return "".join(c["delta"] for c in self.chunks if c["type"] == "text-delta")

    def outputs(self, kind: str) -> list[dict[str, Any]]:
        return [c for c in self.chunks if c["type"] == kind]


Decide = Callable[[dict[str, Any]], Verdict | None]
"""Given an approval request (with its tool's input chunk under `call`), the verdict; None waits."""


class Transport(Protocol):
    async def run(
        self, site: Site, chat: str, text: str, verdicts: list[Verdict], *, late: bool
    ) -> Turns: ...


def located(call: dict[str, Any]) -> dict[str, Any]:
    return tool_part(call, state="output-available", output=WHERE)


def frames(body: str) -> list[dict[str, Any] | str]:
    return [
        line[6:] if line == "data: [DONE]" else json.loads(line[6:])
        for line in body.splitlines()
        if line.startswith("data: ")
    ]


class SSE:
    """The AI SDK's `DefaultChatTransport` in deferred mode: a request per answer, each ending in `[DONE]`.

    With `late`, the answers go only after every approval has expired (the page's user walked away)."""

    async def run(self, site: Site, chat: str, text: str, verdicts: list[Verdict], *, late: bool) -> Turns:
        turns, body = Turns(), user(chat, text)
        async with httpx.AsyncClient(base_url=f"http://{site.base}", timeout=20) as client:
            while True:
                response = await client.post("/api/chat", json=body)
                assert response.status_code == 200, response.text
                received = frames(response.text)
                assert received.count("[DONE]") == 1 and received[-1] == "[DONE]"
                stream = [c for c in received if isinstance(c, dict)]
                turns.streams.append(stream)
                if stream[-1].get("finishReason") != "tool-calls":
                    return turns
                parts = await self._answers(site, chat, stream, verdicts, late)
                message_id = turns.streams[0][0]["messageId"]
                assistant = {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}
                body = {**body, "messages": [*body["messages"][:1], assistant]}

    async def _answers(
        self, site: Site, chat: str, stream: list[dict[str, Any]], verdicts: list[Verdict], late: bool
    ) -> list[dict[str, Any]]:
        inputs = {c["toolCallId"]: c for c in stream if c["type"] == "tool-input-available"}
        asked = [c for c in stream if c["type"] == "tool-approval-request"]
        if asked:
            if late:
                await expired(site, chat, len(asked))
            return [responded(inputs[r["toolCallId"]], r, verdicts.pop(0)) for r in asked]
        # no question: the server handed browser calls over, and the browser runs them
        return [located(call) for call in inputs.values()]


class Live:
    """The live socket: one turn, the answers sent on it while it runs.

    Every question of a step is answered once the step has asked them all: at once, or with `one_by_one`,
    one at each pause, as a client that sends on every click does: the next answer goes once the stream
    the last one opened paused again (its `finish-step`), after the answered call's result. Each answer
    is the assistant message as an AI SDK client keeps it: every part it was shown, in the state its
    chunks left it, so a call answered before comes again with its output or refusal and its `approval`.
    With `late`, nobody answers."""

    def __init__(self, *, one_by_one: bool = False) -> None:
        self.one_by_one = one_by_one

    async def run(self, site: Site, chat: str, text: str, verdicts: list[Verdict], *, late: bool) -> Turns:
        turns, stream = Turns(), []
        inputs: dict[str, dict[str, Any]] = {}
        parts: dict[str, dict[str, Any]] = {}
        """The client's copy of the assistant message's tool parts, by call id."""
        asked: list[dict[str, Any]] = []
        """The questions not answered yet."""
        calls, questions, paused = 0, 0, True
        async with websockets.connect(f"ws://{site.base}/api/live") as socket:

            async def answer(call_id: str, part: dict[str, Any]) -> None:
                parts[call_id] = part
                await socket.send(self._answer(chat, stream, list(parts.values())))

            await socket.send(json.dumps({"type": "message", **user(chat, text)}))
            async for raw in socket:
                if raw == "[DONE]":
                    turns.streams.append(stream)
                    return turns
                chunk = json.loads(raw)
                stream.append(chunk)
                kind, call_id = chunk["type"], chunk.get("toolCallId", "")
                if kind == "tool-input-start":
                    calls += 1
                elif kind == "tool-input-available":
                    inputs[call_id] = chunk
                    parts[call_id] = tool_part(chunk, state="input-available")
                elif kind == "tool-approval-request":
                    asked.append(chunk)
                    questions += 1
                    parts[call_id] = tool_part(
                        inputs[call_id], state="approval-requested", approval={"id": chunk["approvalId"]}
                    )
                elif kind == "tool-output-available":
                    parts[call_id] = {
                        **parts[call_id],
                        "state": "output-available",
                        "output": chunk["output"],
                    }
                elif kind == "tool-output-denied":
                    parts[call_id] = {**parts[call_id], "state": "output-denied"}
                elif kind == "data-browser-call":
                    call_id = chunk["data"]["toolCallId"]
                    await answer(call_id, located(inputs[call_id]))
                elif kind == "finish-step":
                    paused = True
                if late or not paused:  # nobody answers, or the last answer's stream goes on
                    continue
                if asked and questions == calls_asking(calls, inputs):
                    for request in list(asked):
                        call_id = request["toolCallId"]
                        await answer(call_id, responded(inputs[call_id], request, verdicts.pop(0)))
                        asked.remove(request)
                        if self.one_by_one:  # the next answer at the next pause
                            await decided(site, request["approvalId"])
                            paused = False
                            break
        raise AssertionError("the socket closed before [DONE]")

    @staticmethod
    def _answer(chat: str, stream: list[dict[str, Any]], parts: list[dict[str, Any]]) -> str:
        assistant = {"id": stream[0]["messageId"], "role": "assistant", "parts": parts}
        return json.dumps(
            {"type": "message", "id": chat, "trigger": "submit-message", "messages": [assistant]}
        )


def calls_asking(calls: int, inputs: dict[str, dict[str, Any]]) -> int:
    """How many of a step's calls ask a person: the demo's payments and location lookups."""
    return (
        sum(1 for c in inputs.values() if c["toolName"] in ("process_payment", "get_location"))
        if calls
        else 0
    )


async def expired(site: Site, chat: str, count: int) -> None:
    for _ in range(300):
        approvals = await site.ledger.approvals.query(chat_id=chat)
        if len([a for a in approvals if a.state is State.EXPIRED]) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} approvals in {chat} never expired")


# -- well-formedness ---------------------------------------------------------------------------------------


def check_turn(stream: list[dict[str, Any]], *, live: bool = False) -> None:
    """The rules of docs/design.md that a client enforces: one start first and one finish last, steps that
    open and close in pairs, text parts that start before their deltas and end once, approvals and outputs
    only for calls whose input the message holds, every tool result of a continuation before its first step.

    A `live` turn also pauses: a `finish-step` while some call waits on the client, where a standard
    client ends its stream to answer. It closes the open step, or comes alone when nothing was streamed
    since the last pause; the paused step's results follow before the next step opens."""
    assert stream[0]["type"] == "start" and stream[-1]["type"] == "finish", [c["type"] for c in stream]
    open_step, texts, calls, stepped = False, set(), set(), False
    unresolved: set[str] = set()
    for chunk in stream[1:-1]:
        kind = chunk["type"]
        assert kind not in ("start", "finish", "error"), chunk
        if kind == "start-step":
            assert not open_step
            open_step = stepped = True
        elif kind == "finish-step":
            assert open_step or (live and unresolved), chunk
            open_step = False
        elif kind == "text-start":
            assert open_step and chunk["id"] not in texts
            texts.add(chunk["id"])
        elif kind in ("text-delta", "text-end"):
            assert chunk["id"] in texts
        elif kind == "tool-input-start":
            assert open_step
            calls.add(chunk["toolCallId"])
        elif kind in ("tool-input-available", "tool-approval-request") or kind.startswith("tool-output"):
            assert chunk["toolCallId"] in calls or not stepped, chunk
            if kind == "tool-input-available":
                assert chunk["toolCallId"] not in unresolved, f"announced twice: {chunk}"
                unresolved.add(chunk["toolCallId"])
            elif kind.startswith("tool-output"):
                unresolved.discard(chunk["toolCallId"])
    assert not open_step and not (live and unresolved)


# -- the scenarios -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    text: str
    verdicts: list[Verdict]
    said: list[str]
    """Sentences the model must say (refusal reasons included)."""
    balance: float = STARTING_BALANCE
    late: bool = False


DENY = "not this one"
PAY = "pay 50 USD to Hanako"
PAY_TWO = "pay 10 USD to Jiro and 20 USD to Saburo"
JIRO_PAID, SABURO_PAID = "Paid 10 USD to Jiro", "Paid 20 USD to Saburo"
JIRO_REFUSED, SABURO_REFUSED = "I did not pay 10 USD to Jiro", "I did not pay 20 USD to Saburo"

SCENARIOS = {
    "get_weather": Scenario("weather in Tokyo", [], ["°C", "in Tokyo."]),
    "change_bgm": Scenario("play lullaby", [], ["Now playing lullaby."]),
    "get_location-approved": Scenario("where am I", [(True, "")], ["You are at 35.68, 139.76."]),
    "get_location-denied": Scenario("where am I", [(False, DENY)], ["I did not look up your location", DENY]),
    "process_payment-approved": Scenario(
        PAY, [(True, "")], ["Paid 50 USD to Hanako; the balance is 950 USD."], 950
    ),
    "process_payment-denied": Scenario(PAY, [(False, DENY)], ["I did not pay 50 USD to Hanako", DENY]),
    "two-payments-approve-approve": Scenario(
        PAY_TWO, [(True, ""), (True, "")], [JIRO_PAID, SABURO_PAID], 970
    ),
    "two-payments-approve-deny": Scenario(
        PAY_TWO, [(True, ""), (False, DENY)], [JIRO_PAID, SABURO_REFUSED, DENY], 990
    ),
    "two-payments-deny-approve": Scenario(
        PAY_TWO, [(False, DENY), (True, "")], [JIRO_REFUSED, DENY, SABURO_PAID], 980
    ),
    "two-payments-deny-deny": Scenario(
        PAY_TWO, [(False, DENY), (False, DENY)], [JIRO_REFUSED, SABURO_REFUSED]
    ),
}
SSE_DONES = {"get_weather": 1, "change_bgm": 1, "get_location-approved": 3}
"""`[DONE]`s over SSE where not 2: an allowed server tool needs no answer, nor does an acknowledged browser
tool (the server answers it, the browser acts on the call as it sees it, as in seed 001's recorded flow); a
browser tool whose result the model needs runs after the server hands it over, which for a location lookup
is only after the server checked the approval."""


async def play(site: Site, transport: Transport, name: str, scenario: Scenario) -> Turns:
    chat = f"{name}-{type(transport).__name__}"
    turns = await transport.run(site, chat, scenario.text, list(scenario.verdicts), late=scenario.late)
    for stream in turns.streams:
        check_turn(stream, live=isinstance(transport, Live))
    for sentence in scenario.said:
        assert sentence in turns.text, turns.text
    assert site.wallets.balances[chat] == scenario.balance
    refused = [a for a in await site.ledger.approvals.query(chat_id=chat) if a.state is not State.CONSUMED]
    assert all(a.state in (State.DENIED, State.EXPIRED) for a in refused)
    consumed = [a for a in await site.ledger.approvals.query(chat_id=chat) if a.state is State.CONSUMED]
    assert len(consumed) == sum(approved for approved, _ in scenario.verdicts if not scenario.late)
    return turns


@pytest.mark.parametrize("name", SCENARIOS)
async def test_over_sse(site: Site, name: str) -> None:
    turns = await play(site, SSE(), name, SCENARIOS[name])
    assert len(turns.streams) == SSE_DONES.get(name, 2)


LIVE = [
    *(pytest.param(name, False, id=f"{name}-parallel") for name in SCENARIOS),
    *(pytest.param(name, True, id=f"{name}-one-by-one") for name in SCENARIOS if name.startswith("two-")),
]


@pytest.mark.parametrize(("name", "one_by_one"), LIVE)
async def test_over_the_live_socket(site: Site, name: str, one_by_one: bool) -> None:
    turns = await play(site, Live(one_by_one=one_by_one), name, SCENARIOS[name])
    assert len(turns.streams) == 1


TIMED_OUT = Scenario(
    PAY,
    [(True, "too late")],
    ["I did not pay 50 USD to Hanako", "no decision before the deadline"],
    late=True,
)


@pytest.mark.parametrize("transport", [SSE(), Live()], ids=["sse", "live"])
async def test_an_unanswered_payment_expires_and_the_model_is_told(
    hurried: Site, transport: Transport
) -> None:
    turns = await play(hurried, transport, "process_payment-timed-out", TIMED_OUT)
    assert len(turns.streams) == (2 if isinstance(transport, SSE) else 1)
    assert [c["type"] for c in turns.outputs("tool-output-denied")] == ["tool-output-denied"]
