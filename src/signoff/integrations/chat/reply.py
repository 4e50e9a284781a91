"""What the server needs of a chat, and the checked start of every request (its state between requests is
`integrations.chat.state`).

A chat (`integrations.chat.driver.ChatDriver`, over pydantic-ai's `AgentChat` or ADK's `AdkChat`) prepares a
`Reply` from a checked request and runs it, pushing chunks; the server's transports (SSE, the live socket)
need nothing else. `begin` is the I/O before the machine's step and the step itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from signoff.core.approval import Approval
from signoff.core.principal import Principal
from signoff.gate import Gate, Wait
from signoff.integrations.chat.answers import take_answers
from signoff.integrations.chat.machine import (
    REFUSALS,
    Action,
    Open,
    Request,
    next_action,
    request_of,
    streams_into_open_message,
)
from signoff.integrations.chat.state import (
    ChatState,
    claim,
    expire_overdue,
    withdraw,
)
from signoff.integrations.chat.trust import OutOfTurn, replayed
from signoff.integrations.chat.ui import UIMessage
from signoff.ledger.base import Ledger
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, Chunk, ToolOutput


@dataclass(frozen=True)
class ChatView:
    """A chat as a page loads it: its messages in UI form, and every approval it asked for."""

    messages: list[UIMessage]
    approvals: list[Approval]


class Reply(Protocol):
    """A checked request, ready to run, as the server's transports use it (`driver.DrivenReply`)."""

    chat_id: str

    async def run(self, push: Callable[[Chunk], None]) -> None: ...
    def live(self) -> None: ...
    def browser_due(self) -> float | None: ...
    async def answer(self, request: ChatRequest, principal: Principal) -> None: ...
    def interrupt(self) -> None: ...
    def asking(self, *, still: bool = False) -> dict[str, str]: ...
    def unresolved(self) -> dict[str, str]: ...
    def answered(self, accepted: bool, calls: Collection[str] = ()) -> None: ...
    def visible(self) -> set[str]: ...


@dataclass(frozen=True)
class BrowserToolInfo:
    """A tool the browser runs (seed 001), as the agent declares it: the page runs the ones it knows by
    name, and answers any other with an error, never a hang. An `acknowledged` one the server answers at
    once, and the browser acts on its call as it sees it (see `integrations.chat.acknowledged`)."""

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
    stored: StoredChat | None,
    state: ChatState,
    *,
    signing_key: bytes,
    browser_timeout: float,
    made: Collection[str],
    browser_tools: Collection[str],
    cannot_regenerate: str | None = None,
) -> Begun:
    """The I/O before the machine's step and the step itself, the same for every framework: given the
    chat as read (`stored`, None for a new chat, and its `state`, with what it waits on), claim it for
    `principal`, record the approval responses and take the browser results (`made`: the ids of the
    calls the chat's history holds), expire overdue browser calls, and choose the action; a request the
    machine refuses raises `OutOfTurn`, and one that supersedes or regenerates what is open withdraws it.
    A framework that can't regenerate a reply says why in
    `cannot_regenerate`, and such a request is refused before anything is recorded."""
    chat_id = request.chat_id
    if cannot_regenerate is not None and request_of(request) is Request.REGENERATE:
        raise OutOfTurn("trigger", cannot_regenerate)
    stored = await claim(ledger, chat_id, stored, principal)
    waits = waits_of(state, ledger.chats.clock())
    action = next_action(waits, request_of(request))

    async def decided(approvals: Sequence[Approval]) -> tuple[Mapping[str, str], Collection[str]]:
        if (
            request.approvals
            and not approvals
            and not request.outputs
            and request_of(request) is Request.ANSWERS
        ):
            raise await replayed(ledger, chat_id, request.approvals, principal)
        return state.browser_calls, state.approvals

    def checked() -> None:
        if action is Action.REFUSE:
            raise OutOfTurn("messages", REFUSALS[waits.waits])

    taken = await take_answers(  # the acknowledged results it updates are saved with the reply
        ledger, request, principal, state.approvals, made=made, acknowledged=state.acknowledged,
        decided=decided, checked=checked, signing_key=signing_key, browser_tools=browser_tools,
    )  # fmt: skip
    begun = Begun(stored, state, action, taken.outputs, held=taken.held)
    if waits.overdue:  # a late output is not used: the deadline is the deadline
        begun.outputs = {}
        begun.expired = await expire_overdue(ledger, chat_id, state.browser_calls, browser_timeout)
    if action in (Action.SUPERSEDE, Action.REGENERATE):
        await withdraw(ledger, state, principal.id)
    return begun


def waits_of(state: ChatState, now: float) -> Open:
    """What the chat waits on now, as the machine reads it."""
    return Open(bool(state.approvals), bool(state.browser_calls), state.overdue(now), bool(state.tasks))


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
    async def answer(self, request: ChatRequest, principal: Principal) -> None: ...
