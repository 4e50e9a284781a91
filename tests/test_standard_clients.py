"""Seed 000/001's clients, unchanged: the real `ai` client (6.0.0, the newest 6.x, the newest 7.x) using only
the AI SDK's standard calls, over SSE (`DefaultChatTransport`) and over the live socket through a minimal
WebSocket `ChatTransport` written the standard way (tests/js/live_transport.mjs), in JSON frames and in the
seed's SSE framing.

The client answers with `addToolApprovalResponse` and `addToolOutput` only, and `sendAutomaticallyWhen`
sends. Browser tools run in the client: `change_bgm` as soon as its input is available (it is acknowledged:
the server answers it in the same reply, so the client's own result, set with `addToolOutput` as seed 001's
client does, is never sent on its own), `get_location` when the user approves it (its result goes with the
approval, in one message). Two
questions of one step are answered together, and also one at a time, one message per click: the seed's
`sendAutomaticallyWhen` (tests/js/seed_transport.mjs) without its wait for every answer.

Each scenario checks what a user of such a client would: the chunk sequence of every call (one input, at
most one question, one result, in that order), exactly one `[DONE]` per live turn, the requests it took,
that a denied or timed-out call never ran and that the reason reached the model, and the wallet.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from signoff.core.approval import State
from signoff.core.policy import Policy
from signoff.demo.tools import STARTING_BALANCE
from signoff.demo.walkthrough import demo_policy
from tests.chats import PLAYS, Site, serve_demo
from tests.jsclient import CLIENTS, assistant_messages, needs_node, run_scenario_async, tool_parts

WHERE = {"latitude": 35.68, "longitude": 139.76}
BROWSER = {
    "change_bgm": {"output": {"playing": True}, "approval": False},
    "get_location": {"output": WHERE, "approval": True},
}
DENY = "not this one"
DEADLINE = 0.5
PAY = "pay 50 USD to Hanako"
PAY_TWO = "pay 10 USD to Jiro and 20 USD to Saburo"
JIRO_PAID, SABURO_PAID = "Paid 10 USD to Jiro", "Paid 20 USD to Saburo"
JIRO_REFUSED, SABURO_REFUSED = "I did not pay 10 USD to Jiro", "I did not pay 20 USD to Saburo"
TRANSPORTS = ("sse", "live", "live-sse")


@dataclass(frozen=True)
class Scenario:
    text: str
    answers: list[tuple[bool, str]] = field(default_factory=list)
    """The user's answers, in the order of the questions (`process_payment` or `get_location`)."""
    said: list[str] = field(default_factory=list)
    balance: float = STARTING_BALANCE
    requests: int = 2
    """Chat requests over SSE, and messages over the socket: one more per answered step."""
    one_at_a_time: bool = False
    """Each answer goes alone, in the order of the questions, as soon as it is given."""


def pay(approved: bool, reason: str = "") -> tuple[bool, str]:
    return approved, reason


SCENARIOS = {
    "weather": Scenario("weather in Tokyo", said=["in Tokyo."], requests=1),
    "play": Scenario("play lofi beats", said=["Now playing lofi beats."], requests=1),
    "where-approved": Scenario("where am I", [pay(True)], ["You are at 35.68, 139.76."]),
    "where-denied": Scenario("where am I", [pay(False, DENY)], ["I did not look up your location", DENY]),
    "pay-approved": Scenario(PAY, [pay(True)], ["Paid 50 USD to Hanako; the balance is 950 USD."], 950),
    "pay-denied": Scenario(PAY, [pay(False, DENY)], ["I did not pay 50 USD to Hanako", DENY]),
    "two-approve-approve": Scenario(PAY_TWO, [pay(True), pay(True)], [JIRO_PAID, SABURO_PAID], 970),
    "two-approve-deny": Scenario(
        PAY_TWO, [pay(True), pay(False, DENY)], [JIRO_PAID, SABURO_REFUSED, DENY], 990
    ),
    "two-deny-approve": Scenario(
        PAY_TWO, [pay(False, DENY), pay(True)], [JIRO_REFUSED, DENY, SABURO_PAID], 980
    ),
    "two-deny-deny": Scenario(PAY_TWO, [pay(False, DENY), pay(False, DENY)], [JIRO_REFUSED, SABURO_REFUSED]),
    "two-approve-deny-one-at-a-time": Scenario(
        PAY_TWO, [pay(True), pay(False, DENY)], [JIRO_PAID, SABURO_REFUSED, DENY], 990, 3, one_at_a_time=True
    ),
    "two-deny-approve-one-at-a-time": Scenario(
        PAY_TWO, [pay(False, DENY), pay(True)], [JIRO_REFUSED, DENY, SABURO_PAID], 980, 3, one_at_a_time=True
    ),
}
TIMED_OUT = Scenario(PAY, said=["I did not pay 50 USD to Hanako", "no decision before the deadline"])


def steps(scenario: Scenario, transport: str) -> list[dict[str, Any]]:
    if not scenario.answers:
        return [{"send": scenario.text}]
    tool = "get_location" if scenario.text == "where am I" else "process_payment"
    if scenario.one_at_a_time:  # `nth`: the n-th call, whatever the state of the one answered before it
        clicks = [
            {"respond": [{"tool": tool, "nth": n, "approved": ok, **({"reason": why} if why else {})}]}
            for n, (ok, why) in enumerate(scenario.answers)
        ]
        return [{"send": scenario.text}, *clicks]
    respond = [
        {"tool": tool, "index": i, "approved": ok, **({"reason": why} if why else {})}
        for i, (ok, why) in enumerate(scenario.answers)
    ]
    return [{"send": scenario.text}, {"respond": respond}]


def timed_out_steps() -> list[dict[str, Any]]:
    """Nobody answers in time; the user approves after the deadline. Over SSE that late request is when
    the model hears of the deadline. Over the socket the turn went on without the client while its
    stream was paused, and the late answer's stream is the rest of that turn: the answer itself is not
    sent, since the turn it answers is over."""
    late = [{"tool": "process_payment", "index": 0, "approved": True}]
    return [{"send": PAY}, {"sleep": int(DEADLINE * 1000) + 700}, {"respond": late}]


# -- what went over the wire --------------------------------------------------------------------------------


def received(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    """Every chunk the client received, in order."""
    if "frames" in transcript:
        return [f["in"] for f in transcript["frames"] if "in" in f and isinstance(f["in"], dict)]
    return [c for request in transcript["requests"] for c in request["chunks"] if isinstance(c, dict)]


def sent_messages(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    if "frames" in transcript:
        return [f["out"] for f in transcript["frames"] if f.get("out", {}).get("type") == "message"]
    return [r["body"] for r in transcript["requests"]]


def per_call(chunks: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each call's chunks, by type; a question as `tool-approval-request:<approval id>`."""
    calls: dict[str, list[str]] = {}
    for chunk in chunks:
        if chunk["type"].startswith("tool-") and "toolCallId" in chunk:
            kind = chunk["type"]
            if kind == "tool-approval-request":
                kind += ":" + chunk["approvalId"]
            calls.setdefault(chunk["toolCallId"], []).append(kind)
    return calls


def check_call(kinds: list[str]) -> None:
    """One call's chunks over the socket: its input once, one question (asked again at each later pause
    while it waits, for a client answering a step's questions one at a time), one result after them."""
    announced = [k for k in kinds if k == "tool-input-available"]
    assert announced == ["tool-input-available"], kinds
    results = [k for k in kinds if k.startswith("tool-output")]
    assert len(results) == 1 and kinds[-1] == results[0], kinds
    questions = [k for k in kinds if k.startswith("tool-approval-request")]
    assert len(set(questions)) <= 1, kinds
    if questions:
        assert kinds.index("tool-input-available") < kinds.index(questions[0]), kinds


async def run(
    site: Site,
    client: str,
    transport: str,
    chat: str,
    scenario_steps: list[dict[str, Any]],
    answering: str = "standard",
) -> dict[str, Any]:
    base = f"http://{site.base}"
    scenario = {
        "client": client, "transport": transport, "api": f"{base}/api/chat", "base": base, "token": "t",
        "chatId": chat, "browser": BROWSER, "steps": scenario_steps, "timeoutMs": 15_000,
        "answering": answering, "reportStuck": True,
    }  # fmt: skip
    return await run_scenario_async(scenario)


async def check(
    site: Site, transcript: dict[str, Any], chat: str, scenario: Scenario, transport: str
) -> None:
    live = transport != "sse"
    chunks = received(transcript)
    why = f"{chat}: {' '.join(c['type'] for c in chunks)}"
    assert "stuck" not in transcript, f"{transcript.get('stuck')}; the chat is {transcript['status']}; {why}"
    assert transcript["status"] == "ready" and transcript["errors"] == [], f"{transcript['errors']}; {why}"
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    for sentence in scenario.said:
        assert sentence in text, (sentence, text)
    for kinds in per_call(chunks).values():
        check_call(kinds) if live else check_call_over_sse(kinds)
    assert len(sent_messages(transcript)) == scenario.requests, sent_messages(transcript)
    if live:
        frames = transcript["frames"]
        assert sum(f.get("in") == "[DONE]" for f in frames) == 1 and frames[-1].get("in") == "[DONE]"
        if transport == "live-sse":
            assert all(
                f["raw"].startswith("data: ") and f["raw"].endswith("\n\n") for f in frames if "in" in f
            )
    (message,) = assistant_messages(transcript)
    for part in tool_parts(message):
        assert part["state"] in ("output-available", "output-error", "output-denied"), part
    assert site.wallets.balances.get(chat, STARTING_BALANCE) == scenario.balance
    approvals = await site.ledger.approvals.query(chat_id=chat)
    approved = sum(ok for ok, _ in scenario.answers)
    assert len([a for a in approvals if a.state is State.CONSUMED]) == approved  # each ran once
    assert all(a.state in (State.CONSUMED, State.DENIED, State.EXPIRED) for a in approvals)


def check_call_over_sse(kinds: list[str]) -> None:
    """Over SSE a call is announced in the request that made it; its result may come in a later one, or
    not at all for a browser call: the client holds the result it sent."""
    assert kinds.count("tool-input-available") == 1, kinds
    assert len([k for k in kinds if k.startswith("tool-output")]) <= 1, kinds


@pytest.fixture
async def sites(runtime: str) -> AsyncIterator[tuple[Site, Site]]:
    """The demo, and the demo whose payments expire unanswered after `DEADLINE` seconds."""
    hurried = f'mode = "interactive"\n[[tools.process_payment]]\naction = "ask"\ndeadline = "{DEADLINE}s"\n'
    async for site in serve_demo(runtime, demo_policy()):
        async for late in serve_demo(runtime, Policy.from_toml(hurried + PLAYS)):
            yield site, late


NEWER = ("langgraph", "openai-agents")
"""The frameworks added last: the newest 6.x and 7.x clients, each over SSE and the socket."""
MATRIX = [
    *(pytest.param("pydantic-ai", c, t, id=f"pydantic-ai-{c}-{t}") for c in CLIENTS for t in TRANSPORTS),
    *(pytest.param("adk", "ai-7", t, id=f"adk-ai-7-{t}") for t in TRANSPORTS),
    *(
        pytest.param(r, c, t, id=f"{r}-{c}-{t}")
        for r in NEWER
        for c in ("ai-6", "ai-7")
        for t in ("sse", "live")
    ),
]
"""Every client on every transport over pydantic-ai, whose stream every framework shares; ADK with the
newest client on each transport; the newer frameworks with the newest 6.x and 7.x over SSE and the socket
(the socket's `sse` framing is the same chunks, framed as pydantic-ai's rows prove)."""


@needs_node
@pytest.mark.parametrize(("runtime", "client", "transport"), MATRIX)
async def test_the_seed_scenarios_with_standard_calls_only(
    sites: tuple[Site, Site], client: str, transport: str
) -> None:
    site, late = sites
    limit = asyncio.Semaphore(3)

    async def one(name: str, scenario: Scenario) -> None:
        async with limit:
            chat = f"{name}-{transport}"
            answering = "one-at-a-time" if scenario.one_at_a_time else "standard"
            transcript = await run(site, client, transport, chat, steps(scenario, transport), answering)
        await check(site, transcript, chat, scenario, transport)
        if name == "where-approved":  # the browser ran it with its approval, and the audit says so
            (approval,) = await site.ledger.approvals.query(chat_id=chat)
            audit = await site.ledger.audit.entries(0, 10_000)
            ran = [e.detail["why"] for e in audit if e.action == "run" and e.subject == approval.call.call_id]
            assert ran == ["the browser ran it with its approval, in one message"]

    async def timed_out() -> None:
        async with limit:
            transcript = await run(late, client, transport, "late", timed_out_steps())
        requests = 2 if transport == "sse" else 1  # over the socket the client only follows the turn
        await check(late, transcript, "late", replace(TIMED_OUT, requests=requests), transport)
        (approval,) = await late.ledger.approvals.query(chat_id="late")
        assert approval.state is State.EXPIRED

    await asyncio.gather(*(one(name, scenario) for name, scenario in SCENARIOS.items()), timed_out())
