"""A pydantic-ai agent as a chat: one request in, one reply of chunks out, state kept in the ledger.

The server owns the conversation. The client's copy of it supplies only the new user message, approval
responses and frontend tool outputs, each checked by `signoff.integrations.trust` before anything runs.
Everything else is read from the chat's stored state: pydantic-ai's own message history, the assistant
message a deferred reply continues, and the calls the chat is waiting on.

A reply is prepared in two halves. `prepare` checks and records everything the request claims, and fails
with a typed error before a byte is streamed; `Reply.chunks` then runs the agent and saves the new state.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolFailed
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model

from signoff.core.approval import Approval
from signoff.core.errors import IllegalTransition, NotFound, SignoffError
from signoff.gate import Gate, Wait
from signoff.integrations.pydantic_ai.messages import UIMessage, ui_messages
from signoff.integrations.pydantic_ai.stream import Translator
from signoff.integrations.pydantic_ai.toolset import Signoff
from signoff.integrations.stream import translate
from signoff.integrations.trust import Untrusted, accept_outputs, accept_responses, chat_actor
from signoff.integrations.turn import Browser, Turn
from signoff.ledger.base import StoredChat
from signoff.protocol import ChatRequest, Chunk, Error, Start, ToolOutput

SUPERSEDED = "the user sent a new message instead"


class ChatState(msgspec.Struct, kw_only=True):
    """What the server remembers of a chat between requests."""

    history: msgspec.Raw = msgspec.Raw(b"[]")
    assistant_id: str | None = None
    """The assistant message a deferred reply left open; its continuation streams into the same id."""
    approvals: dict[str, str] = {}
    """Calls waiting on a person: call id to approval id."""
    frontend: dict[str, str] = {}
    """Calls waiting on the browser for a result: call id to tool name."""
    frontend_due: float | None = None
    """When the browser's results are overdue: after it, those calls end as errors the model sees."""
    parked: ChatState | None = None
    """The chat as a blocking reply left it while it waits on a person (see `Reply._park`). The fields
    above stay as the reply began, which the worker streaming it shows; every other reader, and a
    continuation on any worker after that one died, goes on from here."""

    def latest(self) -> ChatState:
        return self.parked or self

    def overdue(self, now: float) -> bool:
        return bool(self.frontend) and self.frontend_due is not None and now >= self.frontend_due


@dataclass(frozen=True)
class ChatView:
    """A chat as a page loads it: its messages in UI form, and every approval it asked for."""

    messages: list[UIMessage]
    approvals: list[Approval]


_decode_state = msgspec.json.Decoder(ChatState).decode
_encode = msgspec.json.Encoder().encode


@dataclass
class Reply:
    """A checked request, ready to run. `message_id` is the assistant message it streams into."""

    chat: AgentChat
    chat_id: str
    wait: Wait
    stored: StoredChat | None
    message_id: str
    visible: list[str]
    """Earlier calls of the message being continued whose results this reply streams; the client already
    holds the outputs it sent itself, and a new message has no earlier calls."""
    run: dict[str, Any] = field(default_factory=dict)
    frontend_due: float | None = None
    """Set once the reply is saved waiting on the browser: when its results are overdue."""
    begun: ChatState = field(default_factory=ChatState)
    """The chat as this reply began from."""
    parked: dict[str, str] = field(default_factory=dict)
    """The calls this reply is blocked on, call id to approval id, as saved for another worker."""
    browser: Browser | None = None
    """Set when the browser stays connected while the reply runs (the live socket)."""
    translator: Translator | None = None
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def chunks(self) -> AsyncIterator[Chunk]:
        turn = Turn(chat_id=self.chat_id, wait=self.wait, parked=self._park, browser=self.browser)
        translator = Translator(turn, self.message_id, self.visible, signing_key=self.chat.signing_key)
        self.translator = translator
        yield Start(message_id=self.message_id)
        try:
            async for chunk in translate(lambda: _events(self.chat, self.run), translator):
                yield chunk
            if translator.result is not None:  # None: interrupted, and the chat stays as it was saved
                await self._save(translator.result.all_messages(), translator.result.output)
        except SignoffError as exc:
            yield Error(error_text=str(exc))
        except Exception as exc:  # a model or tool failure ends this reply, not the server
            yield Error(error_text=f"the agent run failed: {type(exc).__name__}: {exc}")

    def interrupt(self) -> None:
        """Stop the run where it is; the reply ends with `abort`, and a call waiting on a person stays
        pending, so the chat goes on from its last save."""
        if self.translator is not None:
            self.translator.interrupt()

    def asking(self) -> dict[str, str]:
        """The calls this reply asked a person about so far: call id to approval id."""
        return dict(self.translator.asked) if self.translator else {}

    def shown(self) -> set[str]:
        """The calls of the message this reply streams: its own and the earlier ones it continues."""
        return set(self.translator.visible) if self.translator else set(self.visible)

    async def _park(self, approval: Approval, messages: Sequence[object]) -> None:
        """Save the chat as a deferred reply would have left it at this call: the history up to the
        model's tool calls and the approvals they wait on. If this process dies while it blocks, the
        chat resumes on any worker like a deferred one, and the gate's single-use claim makes sure each
        approved call still runs once."""
        history = [m for m in messages if isinstance(m, ModelRequest | ModelResponse)]
        async with self._saving:
            self.parked[approval.call.call_id] = approval.id
            parked = ChatState(
                history=msgspec.Raw(ModelMessagesTypeAdapter.dump_json(history)),
                assistant_id=self.message_id,
                approvals=dict(self.parked),
            )
            await self._store(msgspec.structs.replace(self.begun, parked=parked))

    async def _store(self, state: ChatState) -> None:
        version = self.stored.version if self.stored else 0
        self.stored = await self.chat.gate.ledger.save_chat(self.chat_id, _encode(state), version=version)

    async def _save(self, messages: list[ModelMessage], output: object) -> None:
        state = ChatState(
            history=msgspec.Raw(ModelMessagesTypeAdapter.dump_json(messages)), assistant_id=self.message_id
        )
        if isinstance(output, DeferredToolRequests):
            state.approvals = {
                c.tool_call_id: output.metadata.get(c.tool_call_id, {}).get("approval_id", "")
                for c in output.approvals
            }
            state.frontend = {c.tool_call_id: c.tool_name for c in output.calls}
        if state.frontend:
            self.frontend_due = self.chat.gate.ledger.clock() + self.chat.frontend_timeout
            state.frontend_due = self.frontend_due
        async with self._saving:
            await self._store(state)


async def _events(chat: AgentChat, run: dict[str, Any]) -> AsyncIterator[Any]:
    gated = [Signoff(chat.gate)]
    async with chat.agent.run_stream_events(**run, capabilities=gated, model=chat.model) as events:
        async for event in events:
            yield event


class AgentChat:
    """Serve `agent` as a chat whose every tool call passes `gate`.

    `signing_key` signs approval requests for the clients that echo signatures back; every worker
    serving the same chats needs the same key.
    """

    def __init__(
        self,
        agent: AbstractAgent[Any, Any],
        gate: Gate,
        *,
        model: Model | str | None = None,
        signing_key: bytes = b"",
        frontend_timeout: float = 120.0,
    ) -> None:
        self.agent = agent
        self.gate = gate
        self.model = model
        self.signing_key = signing_key
        self.frontend_timeout = frontend_timeout

    async def view(self, chat_id: str, *, begun: bool = False) -> ChatView:
        """The chat as stored after its last reply, or, with `begun`, as the running reply began."""
        _, state = await self._load(chat_id, begun=begun)
        approvals = await self.gate.ledger.approvals(chat_id=chat_id)
        messages = ui_messages(
            ModelMessagesTypeAdapter.validate_json(bytes(state.history)),
            assistant_id=state.assistant_id,
            approvals=approvals,
            asking=state.approvals,
        )
        return ChatView(messages, approvals)

    async def waiting(self, chat_id: str) -> dict[str, str]:
        """The calls the chat waits on a person for, as last saved: call id to approval id."""
        _, state = await self._load(chat_id)
        return state.approvals

    async def prepare_overdue(self, chat_id: str, wait: Wait) -> Reply | None:
        """The reply that tells the model its browser calls got no result in time, started by the server
        itself; None when the chat no longer waits on overdue calls."""
        _, state = await self._load(chat_id)
        if not state.overdue(self.gate.ledger.clock()):
            return None
        return await self.prepare(ChatRequest(chat_id=chat_id, trigger="submit-message"), wait)

    async def prepare(self, request: ChatRequest, wait: Wait) -> Reply:
        """Check the request against the chat's state and record its decisions; raises `Untrusted`."""
        ledger = self.gate.ledger
        stored, state = await self._load(request.chat_id)
        begun = state
        history = ModelMessagesTypeAdapter.validate_json(bytes(state.history))
        made = {p.tool_call_id for m in history for p in m.parts if isinstance(p, ToolCallPart)}
        await accept_responses(ledger, request.chat_id, state.approvals, request.approvals, self.signing_key)
        outputs = accept_outputs(state.frontend, made, request.outputs)
        results = DeferredToolResults(
            approvals=dict.fromkeys(state.approvals, True),  # the gate, not this flag, rules on each call
            calls={call_id: _result(output) for call_id, output in outputs.items()},
        )
        if state.overdue(ledger.clock()):
            outputs = {}  # a late output is not used: the deadline is the deadline
            results.calls = await self._overdue(request.chat_id, state.frontend)
        run: dict[str, Any] = {"message_history": history}
        if request.trigger == "regenerate-message":
            history, prompt = _before_last_prompt(history)
            run = {"message_history": history, "user_prompt": prompt}
            await self._withdraw(request.chat_id, state)
            state = ChatState(history=state.history)
        elif request.user_message is not None:
            run["user_prompt"] = request.user_message.text
            if state.approvals or state.frontend:  # the user moved on: the open calls end as cancelled
                await self._withdraw(request.chat_id, state)
                cancelled = {"status": "cancelled", "message": SUPERSEDED}
                for call_id in state.frontend:
                    results.calls.setdefault(call_id, cancelled)
                run["deferred_tool_results"] = results
        elif state.approvals or state.frontend:
            run["deferred_tool_results"] = results
        else:
            raise Untrusted(409, "messages", "this chat is not waiting on any approval or tool result")
        continues = request.user_message is None and request.trigger != "regenerate-message"
        message_id = (state.assistant_id if continues else None) or "msg_" + secrets.token_urlsafe(12)
        visible = [*state.approvals, *(c for c in state.frontend if c not in outputs)] if continues else []
        return Reply(self, request.chat_id, wait, stored, message_id, visible, run, begun=begun)

    async def _load(self, chat_id: str, *, begun: bool = False) -> tuple[StoredChat | None, ChatState]:
        """The chat's stored record and its latest state, or the state its running reply began from
        (an unknown chat is an empty one)."""
        stored = await self.gate.ledger.load_chat(chat_id)
        state = _decode_state(stored.state) if stored else ChatState()
        return stored, state if begun else state.latest()

    async def _overdue(self, chat_id: str, frontend: dict[str, str]) -> dict[str, Any]:
        why = f"the browser returned no result within {self.frontend_timeout:g} s"
        for call_id, tool in frontend.items():
            await self.gate.ledger.record(
                "expire", call_id, "signoff:server", chat=chat_id, tool=tool, why=why
            )
        return {call_id: ToolFailed(why) for call_id in frontend}

    async def _withdraw(self, chat_id: str, state: ChatState) -> None:
        """Cancel the chat's open approvals; one decided meanwhile (or asked by the agent's own tools,
        with no ledger record) is left as it is."""
        for approval_id in filter(None, state.approvals.values()):
            with contextlib.suppress(NotFound, IllegalTransition):
                await self.gate.ledger.cancel(approval_id, chat_actor(chat_id), SUPERSEDED)


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
    raise Untrusted(409, "trigger", "there is no earlier user message to regenerate a reply to")


__all__ = ["AgentChat", "ChatState", "ChatView", "Reply"]
