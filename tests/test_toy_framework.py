"""A framework added as nothing but its own parts (issue 32): a toy agent, a scripted model that pays when
asked, served by the real server through the chat driver.

All the toy supplies is what `docs/architecture.md` says a framework supplies: a history codec, a run made
from the continuation input, a translator, and a tool hook that calls `gated_call`. The server, the
machine, the ledger's chat state, the trust checks and the single-use claim are the driver's; this test
shows they hold for a framework written in one file, by a person approving a payment and another asking
again with the same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

import signoff.integrations.framework as fw
from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.policy import Policy
from signoff.gate import Gate, Pending, Refused
from signoff.integrations.framework import (
    Action,
    Begun,
    BrowserToolInfo,
    Calls,
    ChatDriver,
    ChatState,
    Ended,
    GatedCall,
    History,
    JsonMessages,
    PartOutcome,
    Ran,
    Rejected,
    Translator,
    Turn,
    gated_call,
)
from signoff.ledger import MemoryLedger
from signoff.ledger.records import StoredChat
from signoff.protocol import (
    ChatRequest,
    Chunk,
    TextDelta,
    TextEnd,
    TextStart,
)
from signoff.server.app import Settings, create_app
from signoff.server.loading import AgentNotFound, chat_for, load_agent
from tests.chats import AUTH, TOKEN, answer, chunks, said, user
from tests.servers import in_loop

POLICY = Policy.from_dict({"tools": {"process_payment": [{"action": "ask", "description": "Pay {amount}"}]}})


# -- the toy framework: its agent, its history, its events ---------------------------------------------


@dataclass
class ToyAgent:
    """A scripted model: "pay N to NAME" makes one `process_payment` call; its result, or its refusal, is
    said back. `signoff_framework` is how the server finds the toy's part of a chat."""

    paid: list[tuple[int, str]] = field(default_factory=list)

    def signoff_framework(self, gate: Gate) -> Toy:
        return Toy(self, gate)


TOY = JsonMessages[dict[str, Any]](
    parse=json.loads, dump=lambda messages: json.dumps(list(messages)).encode()
)
ToyHistory = History[dict[str, Any]]


@dataclass(frozen=True)
class Said:
    text: str


@dataclass(frozen=True)
class Called:
    call: ToolCall


@dataclass(frozen=True)
class Returned:
    call_id: str
    result: Any
    refused: bool = False


class Toy:
    """The toy's part of a chat: its history codec (a JSON message per entry) and its runs."""

    browser_tools: tuple[BrowserToolInfo, ...] = ()
    cannot_regenerate = "the toy can't regenerate a reply"
    keeps_history = True

    def __init__(self, agent: ToyAgent, gate: Gate) -> None:
        self.agent, self.gate = agent, gate

    async def read(
        self, chat_id: str, stored: StoredChat | None, state: ChatState, *, begun: bool
    ) -> ToyHistory:
        return TOY.read(stored, state)

    def calls(self, history: ToyHistory) -> Calls:
        returned = {m["id"] for m in history.messages if m["kind"] == "result"}
        return Calls(
            {m["id"]: m["tool"] for m in history.messages if m["kind"] == "call" and m["id"] not in returned}
        )

    def made(self, history: ToyHistory) -> Collection[str]:
        return {m["id"] for m in history.messages if m["kind"] == "call"}

    def transcript(self, history: ToyHistory) -> Iterator[fw.Entry]:
        for m in history.messages:
            if m["kind"] == "user":
                yield fw.Prompt([m["text"]])
            elif m["kind"] == "call":
                yield fw.Step([ToolCall(m["id"], m["tool"], m["args"])])
            elif m["kind"] == "text":
                yield fw.Step([fw.Said(m["text"])])
            elif m["kind"] == "result":
                refused, output = m["refused"], {"output": m["result"]}
                yield fw.Result(m["id"], ("output-denied", {}) if refused else ("output-available", output))

    async def start(self, chat_id: str, begun: Begun, history: ToyHistory, request: ChatRequest) -> ToyRun:
        if begun.action in (Action.CONTINUE, Action.EXPIRE):
            return ToyRun(self, chat_id, history.messages, again=list(self.calls(history).open))
        assert request.user_message is not None
        return ToyRun(self, chat_id, history.messages, prompt=request.user_message.text)


@dataclass
class ToyRun:
    toy: Toy
    chat_id: str
    messages: list[dict[str, Any]]
    prompt: str | None = None
    again: list[str] = field(default_factory=list)

    def translator(self, turn: Turn, message_id: str, continued: list[str], signing_key: bytes) -> Translator:
        return ToyTranslator(turn, message_id, continued, signing_key=signing_key)

    async def run(self, emit: Callable[[Any], None]) -> None:
        """The model's step, and each call through `gated_call`, the toy's whole tool hook."""
        calls = {m["id"]: m for m in self.messages if m["kind"] == "call"}
        todo = [ToolCall(c, calls[c]["tool"], calls[c]["args"]) for c in self.again]
        if self.prompt is not None:
            self.messages.append({"kind": "user", "text": self.prompt})
            if found := re.fullmatch(r"pay (\d+) to (\w+)", self.prompt):
                args = {"amount": int(found[1]), "recipient": found[2]}
                call = ToolCall(f"call-{len(self.messages)}", "process_payment", args)
                self.messages.append({"kind": "call", "id": call.call_id, "tool": call.tool, "args": args})
                emit(Called(call))
                todo.append(call)
        for call in todo:

            async def pay(args: dict[str, Any]) -> str:
                self.toy.agent.paid.append((args["amount"], args["recipient"]))
                return f"paid {args['amount']} to {args['recipient']}"

            gated = GatedCall(call, pay)
            match await gated_call(self.toy.gate, gated, chat_id=self.chat_id, wait="deferred"):
                case Pending():
                    return  # the run ends with the call open: the person answers in the next request
                case Ran(value):
                    self._said(emit, Returned(call.call_id, value), f"Done: {value}.")
                case Refused() as refusal:
                    self._said(emit, Returned(call.call_id, refusal.reason, True), "Not paid.")
                case Rejected(reason):
                    self._said(emit, Returned(call.call_id, reason, True), f"Not paid: {reason}.")

    def _said(self, emit: Callable[[Any], None], returned: Returned, text: str) -> None:
        result = {
            "kind": "result",
            "id": returned.call_id,
            "result": returned.result,
            "refused": returned.refused,
        }
        self.messages += [result, {"kind": "text", "text": text}]
        emit(returned)
        emit(Said(text))

    def parked(self, history: Sequence[object]) -> None:
        return None

    async def end(self, translator: Translator, history: ToyHistory) -> Ended[ToyHistory]:
        return Ended(history.after(self.messages))


class ToyTranslator(Translator):
    def translate(self, item: Any) -> list[Chunk]:
        match item:
            case Called(call):
                return self.called(call)
            case Returned(call_id, result, refused):
                denied: PartOutcome = "output-denied", {}
                return self.returned(call_id, denied if refused else ("output-available", {"output": result}))
            case Said(text):
                return [*self.open_step(), TextStart(id="t"), TextDelta(id="t", delta=text), TextEnd(id="t")]
        return []


# -- the toy served ------------------------------------------------------------------------------------


@pytest.fixture
async def served() -> AsyncIterator[tuple[httpx.AsyncClient, ToyAgent, MemoryLedger]]:
    agent, ledger = ToyAgent(), MemoryLedger()
    await ledger.start()
    app = create_app(agent, ledger, Settings(token=TOKEN, anonymous=True), policy=POLICY)
    async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=20) as client:
        yield client, agent, ledger
    await ledger.close()


async def ask(client: httpx.AsyncClient, chat: str, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A first message of a new chat, and the chunks of its reply."""
    first = user(chat, text)
    return first, chunks((await client.post("/api/chat", json=first)).text)


async def test_a_toy_framework_asks_runs_once_and_reloads_through_the_driver(
    served: tuple[httpx.AsyncClient, ToyAgent, MemoryLedger],
) -> None:
    client, agent, ledger = served
    first, asked = await ask(client, "toy", "pay 30 to Alice")
    assert [c["type"] for c in asked if c["type"].startswith("tool-")] == [
        "tool-input-start", "tool-input-available", "tool-approval-request",
    ]  # fmt: skip
    assert agent.paid == []
    approved = answer(first, asked, [(True, "ok")])
    reply = await client.post("/api/chat", json=approved)
    assert said(reply.text) == "Done: paid 30 to Alice." and agent.paid == [(30, "Alice")]
    [approval] = await ledger.approvals.query(chat_id="toy")
    assert approval.state is State.CONSUMED

    again = await client.post("/api/chat", json=approved)  # the same answer, replayed
    assert again.status_code == 409 and agent.paid == [(30, "Alice")]

    view = (await client.get("/api/chat/toy")).json()
    parts = [p for m in view["messages"] for p in m["parts"]]
    assert [p["state"] for p in parts if p["type"] == "tool-process_payment"] == ["output-available"]
    assert [p["text"] for p in parts if p["type"] == "text"] == ["pay 30 to Alice", "Done: paid 30 to Alice."]


async def test_a_toy_framework_gets_the_machines_refusals_and_the_chats_owner(
    served: tuple[httpx.AsyncClient, ToyAgent, MemoryLedger],
) -> None:
    client, agent, _ = served
    first, asked = await ask(client, "toy2", "pay 5 to Bob")
    regenerate = {**first, "trigger": "regenerate-message"}
    refused = await client.post("/api/chat", json=regenerate)
    assert refused.status_code == 409 and "can't regenerate" in refused.text
    denied = await client.post("/api/chat", json=answer(first, asked, [(False, "no")]))
    assert said(denied.text) == "Not paid." and agent.paid == []
    stranger = await client.post("/api/chat", json=user("toy2", "pay 9 to Eve"), headers=AUTH)
    assert stranger.status_code == 404 and agent.paid == []


TOY_AGENT = ToyAgent()


def test_the_cli_finds_a_toy_agent_and_serves_it_through_the_driver() -> None:
    """`signoff serve --agent module:attribute` takes any agent with `signoff_framework(gate)`."""
    agent = load_agent("tests.test_toy_framework:TOY_AGENT")
    assert agent is TOY_AGENT
    gate = Gate(MemoryLedger(), POLICY)
    chat = chat_for(agent, gate, model=None, signing_key=b"k", browser_timeout=1.0)
    assert isinstance(chat, ChatDriver) and isinstance(chat.framework, Toy) and chat.gate is gate
    with pytest.raises(AgentNotFound, match="--model"):
        chat_for(agent, gate, model="openai:gpt-5.2", signing_key=b"k", browser_timeout=1.0)
