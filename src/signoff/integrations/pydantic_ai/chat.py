"""A pydantic-ai agent as a chat: one request in, one reply of chunks out, state kept in the ledger.

The server owns the conversation. The client's copy of it supplies only the new user message, approval
responses and browser tool outputs, each checked by `signoff.integrations.trust` before anything runs.
Everything else is read from the chat's stored state: pydantic-ai's own message history, the assistant
message a deferred reply continues, and the calls the chat is waiting on.

A reply is prepared in two halves. `prepare` checks and records everything the request claims, and fails
with a typed error before a byte is streamed; `AgentReply.run` then runs the agent and saves the new state.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolFailed
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResultEvent

from signoff.core.approval import Approval
from signoff.core.principal import Principal
from signoff.core.wording import WITHDRAWN
from signoff.gate import Gate, Wait
from signoff.integrations.chat import ChatView, Loaded, RunningReply, ServedChat
from signoff.integrations.machine import Action
from signoff.integrations.pydantic_ai.browser import browser_tools
from signoff.integrations.pydantic_ai.messages import open_calls, ui_messages
from signoff.integrations.pydantic_ai.stream import AgentTranslator
from signoff.integrations.pydantic_ai.toolset import TASK, Signoff
from signoff.integrations.state import (
    ChatState,
    encode_state,
    state_of,
    task_news,
)
from signoff.integrations.trust import OutOfTurn
from signoff.integrations.turn import Browser, Turn
from signoff.ledger.records import Entries, StoredChat
from signoff.protocol import ChatRequest, ToolOutput


@dataclass
class AgentReply(RunningReply[AgentTranslator]):
    """A checked request, ready to run. `message_id` is the assistant message it streams into."""

    chat: AgentChat
    chat_id: str
    wait: Wait
    stored: StoredChat
    message_id: str
    continued: list[str]
    """Earlier calls of the message being continued whose results this reply streams; the client already
    holds the outputs it sent itself, and a new message has no earlier calls."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """What the agent's run is given: the history, and the prompt or the deferred calls' results."""
    browser_due: float | None = None
    """Set once the reply is saved waiting on the browser: when its results are overdue."""
    begun: ChatState = field(default_factory=ChatState)
    """The chat as this reply began from."""
    history: History = field(default_factory=lambda: History([], []))
    """The history `begun` holds, and how much of it the ledger holds as the chat's entries."""
    browser: Browser | None = None
    """Set when the browser stays connected while the reply runs (the live socket)."""
    held: dict[str, ToolOutput] = field(default_factory=dict)
    """Browser outputs that came with their call's approval (see `Begun.held`)."""
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock)

    def translator_for(self, turn: Turn) -> AgentTranslator:
        return AgentTranslator(turn, self.message_id, self.continued, signing_key=self.chat.signing_key)

    async def run_turn(self, emit: Callable[[Any], None]) -> None:
        """The run with an event handler that hands each event on as it comes: `run_stream_events` would
        run it in a task of its own and pass each event through a stream, a task switch per event."""

        async def handle(_: object, events: AsyncIterable[AgentStreamEvent]) -> None:
            async for event in events:
                emit(event)

        gated = [Signoff(self.chat.gate)]
        agent, model = self.chat.agent, self.chat.model
        result = await agent.run(
            **self.arguments, capabilities=gated, model=model, event_stream_handler=handle
        )
        emit(AgentRunResultEvent(result))

    async def finish(self, translator: AgentTranslator) -> None:
        if translator.result is not None:  # None: interrupted, and the chat stays as it was saved
            await self._save(translator.result.all_messages(), translator.result.output)

    async def park(self, approval: Approval, messages: Sequence[object]) -> None:
        """Save the chat as a deferred reply would have left it at this call: the history up to the
        model's tool calls (what they wait on is read from the ledger). If this process dies while it
        blocks, the chat resumes on any worker like a deferred one, and the gate's single-use claim makes
        sure each approved call still runs once."""
        asked = [m for m in messages if isinstance(m, ModelRequest | ModelResponse)]
        async with self._saving:
            parked = ChatState(
                history=msgspec.Raw(ModelMessagesTypeAdapter.dump_json(asked)), assistant_id=self.message_id
            )
            begun = ChatState(assistant_id=self.begun.assistant_id, parked=parked)
            self.history = await self._store(begun, self.history)  # the history the reply began from

    async def _store(self, state: ChatState, history: History) -> History:
        """Save `state` with `history` as the chat's entries, writing only the entries the ledger lacks;
        the history as the ledger now holds it."""
        ledger = self.chat.gate.ledger
        entries = Entries(history.stored, history.dumped[history.stored :])
        self.stored = await ledger.chats.save(
            self.chat_id, encode_state(state), version=self.stored.version, entries=entries
        )
        return History(history.messages, history.dumped, len(history.dumped))

    async def _save(self, messages: list[ModelMessage], output: object) -> None:
        history = dump(self.history, messages)
        acknowledged = self.acknowledged(self.begun.acknowledged)
        state = ChatState(assistant_id=self.message_id, acknowledged=acknowledged)  # history: its entries
        if isinstance(output, DeferredToolRequests):
            started = {c for c, m in output.metadata.items() if TASK in m}
            if any(c.tool_call_id not in started for c in output.calls):  # the browser's to run
                self.browser_due = self.chat.gate.ledger.chats.clock() + self.chat.browser_timeout
        async with self._saving:
            history = await self._store(state, history)
        self.chat.histories.keep(self.chat_id, self.stored.version, history, state)


class AgentChat(ServedChat):
    """Serve `agent` as a chat whose every tool call passes `gate`."""

    def __init__(
        self,
        agent: AbstractAgent[Any, Any],
        gate: Gate,
        *,
        model: Model | str | None = None,
        signing_key: bytes = b"",
        browser_timeout: float = 120.0,
    ) -> None:
        super().__init__(gate, signing_key=signing_key, browser_timeout=browser_timeout)
        self.agent = agent
        self.model = model
        self.browser_tools = browser_tools(agent)
        self.check_acknowledged()
        self.histories = Histories()

    async def view(self, chat_id: str, *, begun: bool = False) -> ChatView:
        """The chat as stored after its last reply, or, with `begun`, as the running reply began."""
        loaded = await self.load(chat_id, begun=begun)
        state = loaded[1]
        approvals = await self.gate.ledger.approvals.query(chat_id=chat_id)
        messages = ui_messages(
            self.histories.read(chat_id, loaded).messages,
            assistant_id=state.assistant_id,
            approvals=approvals,
            asking=state.approvals,
            tasks=await task_news(self.gate.ledger, state.tasks),
        )
        return ChatView(messages, approvals)

    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> AgentReply:
        ledger = self.gate.ledger
        loaded = await self.load(request.chat_id)
        read = self.histories.read(request.chat_id, loaded)
        history = read.messages
        made = (  # read only to check browser results against: a long chat's answer need not walk it
            {p.tool_call_id for m in history for p in m.parts if isinstance(p, ToolCallPart)}
            if request.outputs
            else frozenset[str]()
        )
        begun = await self.begin(request, principal, loaded, made)
        state = begun.state
        results = DeferredToolResults(
            approvals=dict.fromkeys(state.approvals, True),  # the gate, not this flag, rules on each call
            calls={call_id: _result(output) for call_id, output in begun.outputs.items()},
        )
        results.calls.update(await task_news(ledger, state.tasks))  # how far each got, or its result
        if begun.expired is not None:
            results.calls = {call_id: ToolFailed(begun.expired) for call_id in state.browser_calls}
        run: dict[str, Any] = {"message_history": history}
        match begun.action:
            case Action.REGENERATE:
                earlier, prompt = _before_last_prompt(history)
                run = {"message_history": earlier, "user_prompt": prompt}
            case Action.SUPERSEDE:
                assert request.user_message is not None
                run["user_prompt"] = request.user_message.text
                cancelled = {"status": "cancelled", "message": f"cancelled by a new message: {WITHDRAWN}"}
                for call_id in state.browser_calls:
                    results.calls.setdefault(call_id, cancelled)
                run["deferred_tool_results"] = results
            case Action.RUN:
                assert request.user_message is not None
                run["user_prompt"] = request.user_message.text
            case Action.CONTINUE | Action.EXPIRE:
                run["deferred_tool_results"] = results
        message_id = begun.message_id()
        return AgentReply(
            self, request.chat_id, wait, begun.stored, message_id, begun.continued, run, begun=state,
            history=read, held=begun.held,
        )  # fmt: skip

    async def load(self, chat_id: str, *, begun: bool = False) -> tuple[StoredChat | None, ChatState]:
        """What the chat waits on is read from its history and the ledger: the calls of its last step with
        no result yet, each classified by `integrations.state.classify`, and its browser results due
        `browser_timeout` after the save that left them open. The stored state holds only the history
        and the assistant message.

        A chat this worker saved last is not read again: the ledger gives its version alone, and the
        state and history are the ones kept."""
        held = self.histories.held(chat_id)
        stored = await self.gate.ledger.chats.load(chat_id, held=held)
        kept = self.histories.at(chat_id, stored)
        if kept is None and stored is not None and stored.version == held:  # no longer kept: read it all
            stored = await self.gate.ledger.chats.load(chat_id)
        if kept is None:
            state = state_of(stored, begun=begun)
            last_step = bytes(state.history)
        else:  # kept as `_save` left it, which is also how its reply began and ended
            state, last_step = msgspec.structs.replace(kept.state), kept.last_step()
        state.tasks = await self.classify(chat_id, stored, state, open_calls(last_step))
        return stored, state


@dataclass(frozen=True, slots=True)
class History:
    """A chat's history, parsed, and each message's own JSON as saved."""

    messages: list[ModelMessage]
    dumped: list[bytes]
    stored: int = 0
    """How many of its first messages the ledger holds as the chat's entries, byte for byte."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A chat as this worker saved it last: its history, and its state without the history."""

    version: int
    history: History
    state: ChatState

    def last_step(self) -> bytes:
        """The history from its last model response on, as JSON: all that `open_calls` reads."""
        messages = self.history.messages
        last = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], ModelResponse)), 0
        )
        return saved(History(messages[last:], self.history.dumped[last:]))


class Histories:
    """The chats this process saved last, by chat and stored version, so the chat's next request here
    neither reads nor parses its history again, nor dumps it whole to save: a request costs what is new,
    however long the chat. A chat another worker saved since has another version, and is read from its
    record. At most `size` chats are kept, the most recently used."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[str, Kept] = OrderedDict()

    def keep(self, chat_id: str, version: int, history: History, state: ChatState) -> None:
        self._kept[chat_id] = Kept(version, history, state)
        self._kept.move_to_end(chat_id)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def held(self, chat_id: str) -> int | None:
        """The version of the chat kept here, if any."""
        kept = self._kept.get(chat_id)
        return None if kept is None else kept.version

    def at(self, chat_id: str, stored: StoredChat | None) -> Kept | None:
        """The chat as kept, when `stored` is the version kept."""
        kept = self._kept.get(chat_id)
        if stored is None or kept is None or kept.version != stored.version:
            return None
        self._kept.move_to_end(chat_id)
        return kept

    def read(self, chat_id: str, loaded: Loaded) -> History:
        """The chat's history as `loaded`: kept, when it is the version kept (its list a copy: a run
        appends to the list it is given), else parsed from the state, each message's JSON cut from it."""
        stored, state = loaded
        kept = self.at(chat_id, stored)
        if kept is not None:
            return History(list(kept.history.messages), kept.history.dumped, kept.history.stored)
        raw = bytes(state.history)
        dumped = [bytes(piece) for piece in _split(raw)]
        held = 0  # a parked history, or one saved before entries, may start with the entries or not
        for entry, stored_entry in zip(dumped, stored.entries if stored else (), strict=False):
            if entry != stored_entry:
                break
            held += 1
        return History(ModelMessagesTypeAdapter.validate_json(raw), dumped, held)


def dump(before: History, messages: list[ModelMessage]) -> History:
    """`messages` with each one's JSON: the messages the run kept from `before` (the very objects, a prefix
    of them: a run appends, a regenerated reply drops the end first) keep the JSON they were saved as, and
    the others are dumped together, in one call, and cut apart; `saved` joins them into what dumping the
    whole list gives."""
    kept, known = 0, min(len(before.dumped), len(messages))
    while kept < known and messages[kept] is before.messages[kept]:
        kept += 1
    rest = messages[kept:]
    new = [bytes(raw) for raw in _split(ModelMessagesTypeAdapter.dump_json(rest))] if rest else []
    return History(messages, [*before.dumped[:kept], *new], min(kept, before.stored))


_split = msgspec.json.Decoder(list[msgspec.Raw]).decode
"""A JSON array's elements, each as its own JSON, without parsing them."""


def saved(history: History) -> bytes:
    return b"[" + b",".join(history.dumped) + b"]"


def _result(output: ToolOutput) -> Any:
    """A browser tool's output as pydantic-ai's result for the deferred call: an error the model sees as
    a failed call, not as a value."""
    return ToolFailed(output.error_text) if output.error_text is not None else output.output


def _before_last_prompt(history: list[ModelMessage]) -> tuple[list[ModelMessage], str]:
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ModelRequest):
            prompts = [p.content for p in message.parts if isinstance(p, UserPromptPart)]
            if prompts and isinstance(prompts[-1], str):
                return history[:index], prompts[-1]
    raise OutOfTurn("trigger", "there is no earlier user message to regenerate a reply to")


__all__ = ["AgentChat", "AgentReply"]
