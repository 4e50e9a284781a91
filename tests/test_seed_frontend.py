"""The seed's own front end, unchanged, against signoff (issue 31). hironow/adk-stream-protocol's page takes
one backend URL and appends `/stream` for SSE and `/live` for its socket. tests/js/seed_transport.mjs behaves
as its `lib/bidi/` and `lib/sse/` do (a WebSocket opened with no protocols; frames that don't start with
`data: ` dropped; its stream ended only at `[DONE]` or at a `finish-step` after a `tool-approval-request`; its
`message` envelope and pings), and the real `ai` 6.0.25 it pins drives it.

The page answers as its tool card does: Approve and Deny with the card's own reasons, and get_location run in
the browser when it is approved, its output going with the approval in one message. It sends an answer as soon
as one question is answered ("one-at-a-time": one message per click, as against the seed's own backend,
which asks one question per step); `AS_IS` runs the seed's sendAutomaticallyWhen exactly as it is
written, which waits until every question of the message is answered. change_bgm it acts on when it sees the
call, and sends no result.

Each scenario checks what the seed's user would see: the chat ends ready with no error, one reply, one
`[DONE]` per socket turn (and per SSE request) with every chunk reaching the chat, the messages it took, the
model's words (each refusal's reason, once, with one full stop), and the wallet: a denied payment never ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from signoff.core.approval import State
from signoff.demo.script import sentence
from signoff.demo.tools import STARTING_BALANCE, get_weather
from signoff.demo.walkthrough import demo_policy
from tests.chats import Site, serve_demo
from tests.jsclient import assistant_messages, needs_node, run_scenario_async, tool_parts

pytestmark = [needs_node, pytest.mark.asyncio(loop_scope="module")]

SEED_CLIENT = "ai-6.0.25"
"""The `ai` the seed pins (its package.json); @ai-sdk/react 3.0.26 adds only React state on top."""
TRANSPORTS = ("seed-sse", "seed-live")
RUNTIMES = ("pydantic-ai", "adk")

APPROVED = "User approved the tool execution."
DENIED = "User denied the tool execution."
"""The reasons the seed's tool card answers with; the denial ends in a full stop of its own."""
WHERE = {"latitude": 35.68, "longitude": 139.76, "accuracy": 20, "timestamp": 1768750351872}
"""What the seed's get_location executor returns from navigator.geolocation."""
BROWSER = {
    "get_location": {"output": WHERE, "approval": True},
    "change_bgm": {"approval": False, "acknowledged": True},
}
PING_MS = 100
"""The seed pings every 2 s; more often here, so that every scenario sees pongs."""

PAY = "pay 50 USD to Hanako"
PAY_TWO = "pay 10 USD to Jiro and 20 USD to Saburo"
JIRO_PAID = "Paid 10 USD to Jiro; the balance is 990 USD."
SABURO_PAID_AFTER_JIRO = "Paid 20 USD to Saburo; the balance is 970 USD."
SABURO_PAID = "Paid 20 USD to Saburo; the balance is 980 USD."
JIRO_REFUSED = f"I did not pay 10 USD to Jiro: denied by the user: {DENIED}"
SABURO_REFUSED = f"I did not pay 20 USD to Saburo: denied by the user: {DENIED}"
HANAKO_PAID = "Paid 50 USD to Hanako; the balance is 950 USD."
HANAKO_REFUSED = f"I did not pay 50 USD to Hanako: denied by the user: {DENIED}"
HERE = "You are at 35.68, 139.76."
NOT_HERE = f"I did not look up your location: denied by the user: {DENIED}"
PLAYED = {"tool": "change_bgm", "input": {"track": "1"}}
TOKYO = sentence("get_weather", {"city": "Tokyo"}, get_weather("Tokyo"))


@dataclass(frozen=True)
class Seed:
    text: str
    answers: tuple[bool, ...] = ()
    """Approve or deny each question, in the order of the calls, one click at a time."""
    said: tuple[str, ...] = ()
    balance: float = STARTING_BALANCE
    messages: int = 1
    """What the page sends: the user's message, then one per answer (one for all, `AS_IS`)."""
    answering: str = "one-at-a-time"
    acted: tuple[dict[str, Any], ...] = ()
    """The browser calls the page acts on as it sees them."""


AS_IS = "seed"
SCENARIOS = {
    "pay-approved": Seed(PAY, (True,), (HANAKO_PAID,), 950, 2),
    "pay-denied": Seed(PAY, (False,), (HANAKO_REFUSED,), messages=2),
    "two-approve-approve": Seed(PAY_TWO, (True, True), (JIRO_PAID, SABURO_PAID_AFTER_JIRO), 970, 3),
    "two-approve-deny": Seed(PAY_TWO, (True, False), (JIRO_PAID, SABURO_REFUSED), 990, 3),
    "two-deny-approve": Seed(PAY_TWO, (False, True), (JIRO_REFUSED, SABURO_PAID), 980, 3),
    "two-deny-deny": Seed(PAY_TWO, (False, False), (JIRO_REFUSED, SABURO_REFUSED), messages=3),
    "two-approve-deny-together": Seed(PAY_TWO, (True, False), (JIRO_PAID, SABURO_REFUSED), 990, 2, AS_IS),
    "two-deny-approve-together": Seed(PAY_TWO, (False, True), (JIRO_REFUSED, SABURO_PAID), 980, 2, AS_IS),
    "where-approved": Seed("where am I", (True,), (HERE,), messages=2),
    "where-denied": Seed("where am I", (False,), (NOT_HERE,), messages=2),
    "play": Seed("play 1", said=("Now playing 1.",), acted=(PLAYED,)),
    "weather": Seed("weather in Tokyo", said=(TOKYO,)),
}


def steps(seed: Seed) -> list[dict[str, Any]]:
    tool = "get_location" if seed.text == "where am I" else "process_payment"
    clicks = [
        {"respond": [{"tool": tool, "nth": n, "approved": ok, "reason": APPROVED if ok else DENIED}]}
        for n, ok in enumerate(seed.answers)
    ]
    return [{"send": seed.text}, *clicks]


async def run(site: Site, transport: str, chat: str, seed: Seed) -> dict[str, Any]:
    base = f"http://{site.base}"
    scenario = {
        "client": SEED_CLIENT, "transport": transport, "answering": seed.answering, "api": f"{base}/stream",
        "base": base, "token": "t", "chatId": chat, "browser": BROWSER, "steps": steps(seed),
        "pingMs": PING_MS, "timeoutMs": 8_000, "reportStuck": True,
    }  # fmt: skip
    return await run_scenario_async(scenario)


# -- what went over the wire --------------------------------------------------------------------------------


def received(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    """Every chunk the page received, in order (over the socket, whether or not its stream was still open)."""
    if "frames" in transcript:
        return [f["in"] for f in transcript["frames"] if isinstance(f.get("in"), dict)]
    return [c for request in transcript["requests"] for c in request["chunks"] if isinstance(c, dict)]


def sent(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    if "frames" in transcript:
        return [f["out"] for f in transcript["frames"] if f.get("out", {}).get("type") == "message"]
    return [r["body"] for r in transcript["requests"]]


def flow(transcript: dict[str, Any]) -> str:
    """The chunk types as they came, `|` at each `[DONE]`, for failure messages."""
    if "frames" in transcript:
        items = [f["in"] for f in transcript["frames"] if "in" in f]
    else:
        items = [item for r in transcript["requests"] for item in [*r["chunks"], "[DONE]"]]
    return " ".join("|" if i == "[DONE]" else i["type"] if isinstance(i, dict) else repr(i) for i in items)


def answered(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The answers a sent message carries: its last message's parts in `approval-responded`, and a location
    the browser ran with its approval (approve-and-run). The rest echo calls the server already resolved."""
    parts = tool_parts(message["messages"][-1])
    ran = [p for p in parts if p["type"] == "tool-get_location" and "approval" in p and "output" in p]
    return [p for p in parts if p["state"] == "approval-responded"] + ran


async def check(site: Site, transcript: dict[str, Any], chat: str, seed: Seed, transport: str) -> None:
    chunks = received(transcript)
    why = f"{chat}: {flow(transcript)}"
    assert "stuck" not in transcript, f"{transcript.get('stuck')}; the chat is {transcript['status']}; {why}"
    errors = [c.get("errorText") for c in chunks if c["type"] == "error"]
    assert errors == [] and transcript["errors"] == [], f"{errors} {transcript['errors']}; {why}"
    assert transcript["status"] == "ready", f"the chat is {transcript['status']}; {why}"

    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    for words in seed.said:
        assert text.count(words) == 1, f"{words!r} not once in {text!r}; {why}"
    assert ".." not in text, text

    messages = sent(transcript)
    assert len(messages) == seed.messages, f"{len(messages)} messages; {why}"
    if seed.answering == "one-at-a-time":  # one click, one message: each answer went alone
        assert [len(answered(m)) for m in messages[1:]] == [1] * len(seed.answers), why
    if transport == "seed-live":
        check_socket(transcript, chat, why)
    else:
        for request in transcript["requests"]:
            assert request["url"].endswith("/stream") and request["status"] == 200, request["url"]
            assert request["done"] == 1 and request["doneLast"], why

    (message,) = assistant_messages(transcript)  # one reply
    parts = tool_parts(message)
    for part in parts:
        assert part["state"] in ("output-available", "output-denied"), (part, why)
    assert [{"tool": a["tool"], "input": a["input"]} for a in transcript["acted"]] == list(seed.acted)

    assert site.wallets.balances.get(chat, STARTING_BALANCE) == seed.balance
    approvals = sorted(await site.ledger.approvals.query(chat_id=chat), key=lambda a: a.created_at)
    assert len(approvals) == len(seed.answers), approvals
    by_call = {p["toolCallId"]: p for p in parts}
    for approval in approvals:
        part = by_call[approval.call.call_id]
        if approval.state is State.CONSUMED:  # it ran, once
            assert part["state"] == "output-available", part
        else:  # a denial never runs, and its reason is the card's
            assert approval.state is State.DENIED and approval.reason == DENIED, approval
            assert part["state"] == "output-denied" and "output" not in part, part
    assert sum(a.state is State.CONSUMED for a in approvals) == sum(seed.answers)


def check_socket(transcript: dict[str, Any], chat: str, why: str) -> None:
    """One `[DONE]` for the turn, last; every chunk framed as the seed reads it and reaching its chat; every
    pong echoing a ping; the socket open throughout."""
    frames = transcript["frames"]
    incoming = [f for f in frames if "in" in f]
    assert [f["in"] for f in incoming].count("[DONE]") == 1 and incoming[-1]["in"] == "[DONE]", why
    assert all(f["raw"].startswith("data: ") and f["raw"].endswith("\n\n") for f in incoming), why
    late = [f["in"] for f in incoming if not f["delivered"]]
    assert late == [], (late, why)  # chunks that came after the seed's stream had ended are lost to the page
    assert [f["dropped"] for f in frames if "dropped" in f] == [], why
    assert [f for f in frames if "closed" in f] == [], why
    for envelope in (f["out"] for f in frames if "out" in f):
        assert envelope["version"] == "1.0" and isinstance(envelope["timestamp"], int), envelope
    pings = [f["out"]["timestamp"] for f in frames if f.get("out", {}).get("type") == "ping"]
    pongs = [f for f in frames if "pong" in f]
    assert all(f["pong"] in pings and not f["raw"].startswith("data: ") for f in pongs), (pings, pongs)
    assert len(pongs) >= len(pings) - 1, (chat, pings, pongs)


# -- the runs ---------------------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=RUNTIMES)
async def site(request: pytest.FixtureRequest) -> AsyncIterator[Site]:
    async for served in serve_demo(request.param, demo_policy()):
        yield served


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def transcripts(site: Site) -> dict[tuple[str, str], dict[str, Any]]:
    """Every scenario on both routes, four pages at a time, against one demo server."""
    limit = asyncio.Semaphore(4)

    async def one(transport: str, name: str) -> tuple[tuple[str, str], dict[str, Any]]:
        async with limit:
            return (transport, name), await run(site, transport, f"{name}-{transport}", SCENARIOS[name])

    return dict(await asyncio.gather(*(one(t, n) for t in TRANSPORTS for n in SCENARIOS)))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("name", SCENARIOS)
async def test_the_seed_front_end(
    site: Site, transcripts: dict[tuple[str, str], dict[str, Any]], transport: str, name: str
) -> None:
    chat = f"{name}-{transport}"
    transcript = transcripts[transport, name]
    await check(site, transcript, chat, SCENARIOS[name], transport)
    if name == "where-approved":  # approve-and-run: the approval and the location in one message
        (answer,) = answered(sent(transcript)[1])
        assert answer["approval"]["approved"] is True and answer["output"] == WHERE, answer
        (approval,) = await site.ledger.approvals.query(chat_id=chat)
        audit = await site.ledger.audit.entries(0, 10_000)
        ran = [e.detail["why"] for e in audit if e.action == "run" and e.subject == approval.call.call_id]
        assert ran == ["the browser ran it with its approval, in one message"]
