"""What every framework's chat shares: the checked start of a request, the run of a reply, and what the server
needs of a chat (its state between requests is `integrations.state`).

A framework's chat (`AgentChat` for pydantic-ai, `AdkChat` for Google ADK) prepares a `Reply` from a
checked request and runs it, pushing chunks; the server's transports (SSE, the live socket) need nothing
else.
"""

from __future__ import annotations

import abc
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from signoff.core.approval import Approval
from signoff.core.errors import SignoffError
from signoff.core.principal import Principal
from signoff.gate import Gate, Wait
from signoff.integrations.acknowledged import Acknowledgments, check, record_acted
from signoff.integrations.machine import (
    REFUSALS,
    Action,
    Open,
    Request,
    next_action,
    request_of,
    streams_into_open_message,
)
from signoff.integrations.state import (
    ChatState,
    claim,
    classify,
    expire_overdue,
    load_state,
    owner_principal,
    withdraw,
)
from signoff.integrations.stream import Relay, Translator, drive
from signoff.integrations.trust import (
    OutOfTurn,
    accept_outputs,
    accept_responses,
    ran_with_approval,
    replayed,
)
from signoff.integrations.turn import Answered, Browser, Turn
from signoff.integrations.ui import UIMessage
from signoff.ledger.base import Ledger
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, Chunk, Error, Start, ToolOutput

T = TypeVar("T", bound=Translator)
Loaded = tuple[StoredChat | None, ChatState]
"""A chat as read: its stored record (None for a new chat) and its state, with what it waits on."""


@dataclass(frozen=True)
class ChatView:
    """A chat as a page loads it: its messages in UI form, and every approval it asked for."""

    messages: list[UIMessage]
    approvals: list[Approval]


class RunningReply(abc.ABC, Generic[T]):
    """A checked request, ready to run, and what a transport may do with it while it runs. `translator`
    is set once it runs. Every framework runs a reply the same way: a turn whose sink relays the gate's
    news beside the framework's events, translated into chunks, and the chat saved at the end; the
    framework supplies its translator, its events and its save."""

    chat_id: str
    wait: Wait
    stored: StoredChat
    message_id: str
    browser: Browser | None
    held: dict[str, ToolOutput]
    """Browser outputs that came with their call's approval (see `Begun.held`)."""
    chat: ServedChat
    translator: T | None = None
    acknowledgments: Acknowledgments | None = None
    """The results of acknowledged calls this reply sent, once it runs."""
    turn: Turn | None = None
    """The reply's turn, once it runs."""
    _relay: Relay | None = None
    continued: list[str]
    """The earlier calls this reply continues: it streams their results into the open message."""

    @abc.abstractmethod
    def translator_for(self, turn: Turn) -> T: ...

    @abc.abstractmethod
    async def run_turn(self, emit: Callable[[Any], None]) -> None:
        """Run the framework's turn, handing each of its events to `emit` as it happens."""

    @abc.abstractmethod
    async def finish(self, translator: T) -> None:
        """Save the chat as the run left it (an interrupted run leaves it as last saved)."""

    async def park(self, approval: Approval, history: Sequence[object]) -> None:
        """Save the chat as waiting on `approval` before a blocking wait, where the framework can resume
        a run from its history; by default it can't, and nothing is saved."""

    async def run(self, push: Callable[[Chunk], None]) -> None:
        """Run the reply to its end, handing each chunk to `push` the moment it is made (see `Relay`); a
        failure ends it with an `error` chunk."""
        acknowledgments = self.acknowledgments = Acknowledgments(self.chat.acknowledged_names)

        def pushed(chunk: Chunk) -> None:
            acknowledgments.note(chunk)
            push(chunk)

        relay = self._relay = Relay(pushed if acknowledgments.tools else push, park=self.park)
        owner = self.stored.owner or ""
        turn = Turn(self.chat_id, self.wait, relay, requester=owner, browser=self.browser, held=self.held)
        self.turn = turn
        translator = self.translator = self.translator_for(turn)
        push(Start(message_id=self.message_id))
        try:
            await drive(self.run_turn, translator, relay)
            await self.finish(translator)
        except SignoffError as exc:
            push(Error(error_text=str(exc)))
        except Exception as exc:  # a model or tool failure ends this reply, not the server
            push(Error(error_text=f"the agent run failed: {type(exc).__name__}: {exc}"))

    def acknowledged(self, before: Mapping[str, str]) -> dict[str, str]:
        """The chat's acknowledged calls (see `ChatState.acknowledged`) as the client holds them after
        this reply, from `before`, as the chat was when it began."""
        sent = self.acknowledgments.results if self.acknowledgments else {}
        return {**before, **sent}

    async def record_acted(self, ledger: Ledger, principal: Principal, outputs: Sequence[ToolOutput]) -> None:
        """Audit what the browser reported of its own on this reply's acknowledged calls, as it runs."""
        if self.acknowledgments is not None:
            await record_acted(ledger, self.chat_id, principal, self.acknowledgments.results, outputs)

    def interrupt(self) -> None:
        """Stop the run where it is; the reply ends with `abort`, and a call waiting on a person stays
        pending, so the chat goes on from its last save."""
        if self.translator is not None:
            self.translator.interrupt()

    def asking(self) -> dict[str, str]:
        """The calls this reply asked a person about so far: call id to approval id."""
        return {c: a.id for c, a in self.translator.asked.items()} if self.translator else {}

    def unresolved(self) -> dict[str, str]:
        """The calls of the streamed message with no result yet: call id to tool name (where known)."""
        return dict(self.translator.unresolved) if self.translator else dict.fromkeys(self.continued, "")

    def answered(self, accepted: bool, calls: Collection[str] = ()) -> None:
        """A client answered `calls` of this reply on the live socket (see `Translator.pause`)."""
        if self._relay is not None:
            self._relay.emit(Answered(accepted, frozenset(calls)))

    def visible(self) -> set[str]:
        """The calls of the message this reply streams: its own and the earlier ones it continues."""
        return set(self.translator.visible) if self.translator else set(self.continued)


class Reply(Protocol):
    chat_id: str
    browser: Browser | None
    browser_due: float | None
    """Set once the reply is saved waiting on the browser: when its results are overdue."""

    turn: Turn | None
    held: dict[str, ToolOutput]

    async def run(self, push: Callable[[Chunk], None]) -> None: ...
    def interrupt(self) -> None: ...
    def asking(self) -> dict[str, str]: ...
    def visible(self) -> set[str]: ...
    def unresolved(self) -> dict[str, str]: ...
    def answered(self, accepted: bool, calls: Collection[str] = ()) -> None: ...
    async def record_acted(
        self, ledger: Ledger, principal: Principal, outputs: Sequence[ToolOutput]
    ) -> None: ...


@dataclass(frozen=True)
class BrowserToolInfo:
    """A tool the browser runs (seed 001), as the agent declares it: the page runs the ones it knows by
    name, and answers any other with an error, never a hang. An `acknowledged` one the server answers at
    once, and the browser acts on its call as it sees it (see `integrations.acknowledged`)."""

    name: str
    description: str
    parameters: dict[str, Any]
    acknowledged: bool = False


@dataclass
class Begun:
    """A request checked against its chat, its decisions and browser results recorded, and the machine's
    action chosen: what an adapter needs to build the run."""

    stored: StoredChat
    state: ChatState
    action: Action
    outputs: dict[str, ToolOutput]
    """The browser results accepted for the calls the chat waits on ({} once they are overdue)."""
    expired: str | None = None
    """Why the browser's calls failed, when they were overdue: the model is told so."""
    held: dict[str, ToolOutput] = field(default_factory=dict)
    """Browser outputs that came with their approval in one message: each call's run takes its own."""

    @property
    def continues(self) -> bool:
        return streams_into_open_message(self.action)

    @property
    def continued(self) -> list[str]:
        """The earlier calls whose results the reply streams (the client holds the outputs it sent)."""
        if not self.continues:
            return []
        state = self.state
        return [*state.approvals, *(c for c in state.browser_calls if c not in self.outputs)]

    def message_id(self) -> str:
        """The assistant message the reply streams into: the open one it continues, or a new one."""
        return (self.state.assistant_id if self.continues else None) or "msg_" + secrets.token_urlsafe(12)


async def begin(
    ledger: Ledger,
    request: ChatRequest,
    principal: Principal,
    loaded: Loaded,
    *,
    signing_key: bytes,
    browser_timeout: float,
    made: Collection[str],
    browser_tools: Collection[str],
    cannot_regenerate: str | None = None,
) -> Begun:
    """The I/O before the machine's step and the step itself, the same for every framework: given the
    chat as `loaded`, claim it for `principal`, record the approval responses and take the browser
    results (`made`: the ids of the calls the chat's history holds), expire overdue browser calls, and
    choose the action; a request the machine refuses raises `OutOfTurn`, and one that supersedes or
    regenerates what is open withdraws it. A framework that can't regenerate a reply says why in
    `cannot_regenerate`, and such a request is refused before anything is recorded."""
    chat_id, (stored, state) = request.chat_id, loaded
    if cannot_regenerate is not None and request_of(request) is Request.REGENERATE:
        raise OutOfTurn("trigger", cannot_regenerate)
    stored = await claim(ledger, chat_id, stored, principal)
    decided = await accept_responses(
        ledger, chat_id, state.approvals, request.approvals, principal, signing_key, browser_tools
    )
    if request.approvals and not decided and not request.outputs and request_of(request) is Request.ANSWERS:
        raise await replayed(ledger, chat_id, request.approvals, principal)
    held, given = await ran_with_approval(ledger, chat_id, principal, decided, request.outputs, browser_tools)
    outputs = await accept_outputs(
        ledger, chat_id, principal, state.browser_calls, made, state.approvals, given
    )
    waits = _waits(state, ledger.chats.clock())
    action = next_action(waits, request_of(request))
    if action is Action.REFUSE:
        raise OutOfTurn("messages", REFUSALS[waits.waits])
    await record_acted(ledger, chat_id, principal, state.acknowledged, given)  # saved with the reply
    begun = Begun(stored, state, action, outputs, held=held)
    if waits.overdue:  # a late output is not used: the deadline is the deadline
        begun.outputs = {}
        begun.expired = await expire_overdue(ledger, chat_id, state.browser_calls, browser_timeout)
    if action in (Action.SUPERSEDE, Action.REGENERATE):
        await withdraw(ledger, state, principal.id)
    return begun


def _waits(state: ChatState, now: float) -> Open:
    return Open(bool(state.approvals), bool(state.browser_calls), state.overdue(now), bool(state.tasks))


class ServedChat(abc.ABC):
    """What every framework's chat does the same way around its own `prepare`.

    `signing_key` signs approval requests for the clients that echo signatures back; every worker serving
    the same chats needs the same key. A browser call whose result takes longer than `browser_timeout`
    seconds fails, and the model is told so."""

    browser_tools: tuple[BrowserToolInfo, ...] = ()
    cannot_regenerate: str | None = None
    """Why the framework can't run a reply again from the last user message, if it can't."""

    def __init__(self, gate: Gate, *, signing_key: bytes = b"", browser_timeout: float = 120.0) -> None:
        self.gate = gate
        self.signing_key = signing_key
        self.browser_timeout = browser_timeout

    @abc.abstractmethod
    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> Reply:
        """Check the request against the chat's state and record its decisions, as `principal`, who must
        own the chat (or start it); raises `Untrusted`."""

    @property
    def browser_names(self) -> frozenset[str]:
        """The browser tools whose result the chat waits for."""
        return frozenset(tool.name for tool in self.browser_tools if not tool.acknowledged)

    @property
    def acknowledged_names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.browser_tools if tool.acknowledged)

    def check_acknowledged(self) -> None:
        """Refuse a policy that could ask about an acknowledged tool (see `integrations.acknowledged`)."""
        check(self.gate.policy, self.acknowledged_names)

    async def load(self, chat_id: str, *, begun: bool = False) -> tuple[StoredChat | None, ChatState]:
        """The chat's stored record and its state (see `integrations.state.load_state`), with what it waits
        on as its framework reads it."""
        return await load_state(self.gate.ledger, chat_id, begun=begun)

    async def classify(
        self, chat_id: str, stored: StoredChat | None, state: ChatState, open_calls: Mapping[str, str]
    ) -> dict[str, str]:
        """Fill in what `state` waits on from its open calls (see `integrations.state.classify`), its browser
        results due `browser_timeout` after the save that left them open; the calls' tasks."""
        found = await classify(self.gate.ledger, chat_id, open_calls, self.browser_names)
        state.approvals, state.browser_calls, tasks = found
        if state.browser_calls and stored is not None:
            state.browser_due = stored.updated_at + self.browser_timeout
        return tasks

    async def begin(
        self, request: ChatRequest, principal: Principal, loaded: Loaded, made: Collection[str]
    ) -> Begun:
        """`begin` with this chat's ledger and settings, for the chat as `loaded` (`made`: the ids of the
        calls its history holds)."""
        ledger, key, timeout = self.gate.ledger, self.signing_key, self.browser_timeout
        return await begin(
            ledger, request, principal, loaded, signing_key=key, browser_timeout=timeout, made=made,
            browser_tools=self.browser_names, cannot_regenerate=self.cannot_regenerate,
        )  # fmt: skip

    async def waiting(self, chat_id: str) -> dict[str, str]:
        """The calls the chat waits on a person for: call id to approval id."""
        _, state = await self.load(chat_id)
        return state.approvals

    async def prepare_overdue(self, chat_id: str, wait: Wait) -> Reply | None:
        """The reply that tells the model its browser calls got no result in time, started by the server
        itself; None when the machine has nothing for it to do (the chat moved on meanwhile)."""
        stored, state = await self.load(chat_id)
        if next_action(_waits(state, self.gate.ledger.chats.clock()), Request.OVERDUE) is Action.IGNORE:
            return None
        request = ChatRequest(chat_id=chat_id, trigger="submit-message")
        return await self.prepare(request, wait, owner_principal(stored))


class Chat(Protocol):
    """A framework's agent served as chats."""

    gate: Gate
    signing_key: bytes
    browser_timeout: float
    browser_tools: tuple[BrowserToolInfo, ...]

    @property
    def browser_names(self) -> frozenset[str]: ...

    async def view(self, chat_id: str, *, begun: bool = False) -> ChatView: ...
    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> Reply: ...
    async def prepare_overdue(self, chat_id: str, wait: Wait) -> Reply | None: ...
    async def waiting(self, chat_id: str) -> dict[str, str]: ...
