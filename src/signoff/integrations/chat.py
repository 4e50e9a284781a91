"""What every framework's chat shares: the state kept between requests, and what the server needs of it.

A framework's chat (`AgentChat` for pydantic-ai, `AdkChat` for Google ADK) prepares a `Reply` from a
checked request and runs it as chunks; the server's transports (SSE, the live socket) need nothing else.
"""

from __future__ import annotations

import abc
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from signoff.core.approval import Approval
from signoff.core.errors import IllegalTransition, NotFound, StaleChat
from signoff.core.principal import ANONYMOUS, Principal
from signoff.gate import Gate, Wait
from signoff.integrations.machine import (
    REFUSALS,
    Action,
    Open,
    Request,
    next_action,
    request_of,
    streams_into_open_message,
)
from signoff.integrations.stream import Translator
from signoff.integrations.trust import Untrusted, accept_outputs, accept_responses
from signoff.integrations.turn import Browser
from signoff.integrations.ui import UIMessage
from signoff.ledger.base import Ledger
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, Chunk, ToolOutput

SUPERSEDED = "the user sent a new message instead"


class ChatState(msgspec.Struct, kw_only=True):
    """What the server remembers of a chat between requests."""

    history: msgspec.Raw = msgspec.Raw(b"[]")
    """The framework's own message history, where the framework keeps none itself (pydantic-ai)."""
    events: int = 0
    """How many events the framework's own session held when the last reply ended (ADK)."""
    assistant_id: str | None = None
    """The assistant message a deferred reply left open; its continuation streams into the same id."""
    approvals: dict[str, str] = {}
    """Calls waiting on a person: call id to approval id."""
    confirmations: dict[str, str] = {}
    """The framework's own id for each question it asked (ADK's confirmation calls), by call id."""
    browser_calls: dict[str, str] = msgspec.field(default_factory=dict, name="frontend")
    """Calls waiting on the browser for a result: call id to tool name. (Stored under the word the
    first chats were saved with, as is `browser_due`, so every saved chat still loads.)"""
    browser_due: float | None = msgspec.field(default=None, name="frontend_due")
    """When the browser's results are overdue: after it, those calls end as errors the model sees."""
    tasks: dict[str, str] = {}
    """Long-running calls the run ended on, whose result the model has not seen: call id to task id."""
    parked: ChatState | None = None
    """The chat as a blocking reply left it while it waits on a person. The fields above stay as the
    reply began, which the worker streaming it shows; every other reader, and a continuation on any
    worker after that one died, goes on from here."""

    def latest(self) -> ChatState:
        return self.parked or self

    def overdue(self, now: float) -> bool:
        return bool(self.browser_calls) and self.browser_due is not None and now >= self.browser_due


_decode_state = msgspec.json.Decoder(ChatState).decode
encode_state = msgspec.json.Encoder().encode


async def load_state(
    ledger: Ledger, chat_id: str, *, begun: bool = False
) -> tuple[StoredChat | None, ChatState]:
    """The chat's stored record and its latest state, or the state its running reply began from (an
    unknown chat is an empty one)."""
    stored = await ledger.load_chat(chat_id)
    state = _decode_state(stored.state) if stored else ChatState()
    return stored, state if begun else state.latest()


def owner_of(stored: StoredChat | None) -> str | None:
    """The id of the principal a chat belongs to; None while nobody has started it. A chat stored before
    chats had owners belongs to whoever sends no credential, as it did then."""
    return None if stored is None else stored.owner or ANONYMOUS.id


async def check_owner(ledger: Ledger, chat_id: str, stored: StoredChat | None, principal: Principal) -> None:
    """Raise `Untrusted` (404, audited) unless `principal` owns the chat or nobody does yet: to anyone
    else, another's chat is as unknown as a missing one."""
    owner = owner_of(stored)
    if owner is not None and owner != principal.id:
        why = "the chat belongs to another principal"
        await ledger.record("refuse", chat_id, principal.id, why=why, via=principal.via)
        raise Untrusted(404, "id", f"no chat {chat_id}")


async def claim(ledger: Ledger, chat_id: str, stored: StoredChat | None, principal: Principal) -> StoredChat:
    """The chat's record, started for `principal` if it is new; raises `Untrusted` if it is another's.

    A new chat is saved at once, before anything runs in it, so that of two principals racing to start
    the same chat id exactly one gets it."""
    await check_owner(ledger, chat_id, stored, principal)
    if stored is not None:
        return stored
    try:
        return await ledger.save_chat(chat_id, encode_state(ChatState()), version=0, owner=principal.id)
    except StaleChat:
        raise Untrusted(409, "id", f"chat {chat_id} was started by another request meanwhile") from None


def owner_principal(stored: StoredChat | None) -> Principal:
    """The chat's owner, for what the server does in its name on its own initiative."""
    return Principal(id=owner_of(stored) or ANONYMOUS.id)


async def withdraw(ledger: Ledger, state: ChatState, actor: str, why: str = SUPERSEDED) -> None:
    """Cancel the chat's open approvals in `actor`'s name; one decided meanwhile (or asked by the agent's
    own tools, with no ledger record) is left as it is."""
    for approval_id in filter(None, state.approvals.values()):
        with contextlib.suppress(NotFound, IllegalTransition):
            await ledger.cancel(approval_id, actor, why)


async def expire_overdue(ledger: Ledger, chat_id: str, calls: dict[str, str], allowed: float) -> str:
    """Audit the browser calls that got no result within `allowed` seconds; the reason the model is told."""
    why = f"the browser returned no result within {allowed:g} s"
    for call_id, tool in calls.items():
        await ledger.record("expire", call_id, "signoff:server", chat=chat_id, tool=tool, why=why)
    return why


async def task_news(ledger: Ledger, tasks: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each long-running call's task status as it is now, in seed 004's format: call id to status."""
    return {call_id: (await ledger.get_task(task_id)).status() for call_id, task_id in tasks.items()}


@dataclass(frozen=True)
class ChatView:
    """A chat as a page loads it: its messages in UI form, and every approval it asked for."""

    messages: list[UIMessage]
    approvals: list[Approval]


class RunningReply:
    """What a transport may do with a reply while it runs; `translator` is set once it does."""

    translator: Translator | None = None
    continued: list[str]
    """The earlier calls this reply continues: it streams their results into the open message."""

    def interrupt(self) -> None:
        """Stop the run where it is; the reply ends with `abort`, and a call waiting on a person stays
        pending, so the chat goes on from its last save."""
        if self.translator is not None:
            self.translator.interrupt()

    def asking(self) -> dict[str, str]:
        """The calls this reply asked a person about so far: call id to approval id."""
        return dict(self.translator.asked) if self.translator else {}

    def visible(self) -> set[str]:
        """The calls of the message this reply streams: its own and the earlier ones it continues."""
        return set(self.translator.visible) if self.translator else set(self.continued)


class Reply(Protocol):
    chat_id: str
    browser: Browser | None
    browser_due: float | None
    """Set once the reply is saved waiting on the browser: when its results are overdue."""

    def chunks(self) -> AsyncIterator[Chunk]: ...
    def interrupt(self) -> None: ...
    def asking(self) -> dict[str, str]: ...
    def visible(self) -> set[str]: ...


@dataclass(frozen=True)
class BrowserToolInfo:
    """A tool the browser runs (seed 001), as the agent declares it: the page runs the ones it knows by
    name, and answers any other with an error, never a hang."""

    name: str
    description: str
    parameters: dict[str, Any]


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
    *,
    signing_key: bytes,
    browser_timeout: float,
    made: Callable[[ChatState], Awaitable[Collection[str]]],
) -> Begun:
    """The I/O before the machine's step and the step itself, the same for every framework: load the
    chat, claim it for `principal`, record the approval responses and take the browser results (`made`:
    the ids of the calls the chat's history holds), expire overdue browser calls, and choose the
    action; a request the machine refuses raises `Untrusted` (409), and one that supersedes what is open
    withdraws it."""
    chat_id = request.chat_id
    stored, state = await load_state(ledger, chat_id)
    stored = await claim(ledger, chat_id, stored, principal)
    await accept_responses(ledger, chat_id, state.approvals, request.approvals, principal, signing_key)
    outputs = await accept_outputs(
        ledger, chat_id, principal, state.browser_calls, await made(state), state.approvals, request.outputs
    )
    now = ledger.clock()
    waits = Open(bool(state.approvals), bool(state.browser_calls), state.overdue(now), bool(state.tasks))
    action = next_action(waits, request_of(request))
    if action is Action.REFUSE:
        raise Untrusted(409, "messages", REFUSALS[waits.waits])
    begun = Begun(stored, state, action, outputs)
    if waits.overdue:  # a late output is not used: the deadline is the deadline
        begun.outputs = {}
        begun.expired = await expire_overdue(ledger, chat_id, state.browser_calls, browser_timeout)
    if action is Action.SUPERSEDE:
        await withdraw(ledger, state, principal.id)
    return begun


class ServedChat(abc.ABC):
    """What every framework's chat does the same way around its own `prepare`."""

    gate: Gate

    @abc.abstractmethod
    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> Reply:
        """Check the request against the chat's state and record its decisions, as `principal`, who must
        own the chat (or start it); raises `Untrusted`."""

    async def waiting(self, chat_id: str) -> dict[str, str]:
        """The calls the chat waits on a person for, as last saved: call id to approval id."""
        _, state = await load_state(self.gate.ledger, chat_id)
        return state.approvals

    async def prepare_overdue(self, chat_id: str, wait: Wait) -> Reply | None:
        """The reply that tells the model its browser calls got no result in time, started by the server
        itself; None when the machine has nothing for it to do (the chat moved on meanwhile)."""
        stored, state = await load_state(self.gate.ledger, chat_id)
        waits = Open(browser=bool(state.browser_calls), overdue=state.overdue(self.gate.ledger.clock()))
        if next_action(waits, Request.OVERDUE) is Action.IGNORE:
            return None
        request = ChatRequest(chat_id=chat_id, trigger="submit-message")
        return await self.prepare(request, wait, owner_principal(stored))


class Chat(Protocol):
    """A framework's agent served as chats."""

    gate: Gate
    signing_key: bytes
    browser_timeout: float
    browser_tools: tuple[BrowserToolInfo, ...]

    async def view(self, chat_id: str, *, begun: bool = False) -> ChatView: ...
    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> Reply: ...
    async def prepare_overdue(self, chat_id: str, wait: Wait) -> Reply | None: ...
    async def waiting(self, chat_id: str) -> dict[str, str]: ...
