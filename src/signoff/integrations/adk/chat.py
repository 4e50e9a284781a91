"""An ADK agent as a chat: one request in, one reply of chunks out, over the user's own session service.

ADK keeps the conversation in its session service (in memory by default; any `BaseSessionService` the user
passes), one session per chat. The ledger keeps what signoff needs beside it: the calls the chat waits on
a person for with their ADK confirmation ids, the browser calls it waits on, and the assistant message a
continuation streams into. The client's copy of the conversation supplies only the new user message,
approval responses and browser results, each checked by `signoff.integrations.chat.trust` first.

A continuation answers ADK in its own terms: a `FunctionResponse` to each `adk_request_confirmation`
(always `confirmed`, since the gate reads the ledger's decision, not this flag) and one per browser result.
ADK then resumes the same invocation and calls the plugin again for each original call.

A long-running call's news reaches the model the way ADK's own long-running tools expect: a later
response to the same call id. ADK shows the model only a call's latest response, in the place of its
first, so the next user message finds the task's status or result in the history.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents._streaming_mode import StreamingMode  # run_config's re-export is implicit
from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.invocation_context import new_invocation_context_id
from google.adk.agents.run_config import RunConfig
from google.adk.apps.app import App
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session as AdkSession
from google.genai import types

from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.wording import INTERRUPTED
from signoff.gate import Gate
from signoff.integrations.adk.messages import SessionCalls, open_in, transcript
from signoff.integrations.adk.plugin import AcknowledgedTool, BrowserTool, SignoffPlugin, failure, parameters
from signoff.integrations.adk.stream import CONFIRMATION, AdkTranslator, End
from signoff.integrations.framework import (
    Begun,
    BrowserToolInfo,
    Calls,
    ChatDriver,
    ChatState,
    Ended,
    Entry,
    OutOfTurn,
    Translator,
    Turn,
    task_news,
    withdraw,
)
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, ToolOutput

USER = "signoff"
"""The ADK user id every chat's session is filed under; the chat id is the session id."""


@dataclass(frozen=True)
class Session:
    """A chat's ADK session as read: its events, and what they leave open."""

    events: list[Event]
    calls: SessionCalls

    def entries(self) -> tuple[None, Session]:
        return None, self  # the session service keeps the history

    def copy(self) -> Session:
        return self


class Adk:
    """ADK's part of a chat (a `integrations.chat.driver.Framework`), over the user's own session service."""

    cannot_regenerate = "an ADK chat cannot regenerate a reply: its session only grows"
    keeps_history = False

    def __init__(self, agent: BaseAgent, gate: Gate, sessions: BaseSessionService, app_name: str) -> None:
        self.gate = gate
        self.app = App(name=app_name, root_agent=agent, plugins=[SignoffPlugin(gate)])
        self.runner = Runner(app=self.app, session_service=sessions, auto_create_session=True)
        self.browser_tools = tuple(
            BrowserToolInfo(
                tool.name,
                tool.description,
                parameters(tool) or {"type": "object"},
                isinstance(tool, AcknowledgedTool),
            )
            for tool in getattr(agent, "tools", ())
            if isinstance(tool, BrowserTool | AcknowledgedTool)
        )
        self.browser_names = frozenset(t.name for t in self.browser_tools if not t.acknowledged)

    async def read(
        self, chat_id: str, stored: StoredChat | None, state: ChatState, *, begun: bool
    ) -> Session:
        """The session's events; with `begun`, only those it held when the running reply began (ADK
        appends a running reply's events as they happen). The ledger's state holds only how many."""
        events = await self._events(chat_id)
        if begun:
            events = events[: state.events]
        return Session(events, open_in(events))

    def calls(self, history: Session) -> Calls:
        found = history.calls
        return Calls(found.calls, found.confirmations, found.told)

    def made(self, history: Session) -> Collection[str]:
        return history.calls.made.keys()

    def transcript(self, history: Session) -> Iterable[Entry]:
        return transcript(history.events)

    async def start(self, chat_id: str, begun: Begun, history: Session, request: ChatRequest) -> AdkRun:
        """ADK's own terms for the input: a continuation answers ADK's questions and the browser's calls
        (see `_answers`), and a user message is text, after any news of long-running calls."""
        ledger, state, made = self.gate.ledger, begun.state, history.calls.made
        outputs: dict[str, Any] = {c: _response(o) for c, o in begun.outputs.items()}
        if begun.expired is not None:
            outputs = {call_id: failure(begun.expired) for call_id in state.browser_calls}
        calls = {c: made[c] for c in begun.continued if c in made}
        owner = begun.stored.owner or ""
        if begun.continues:  # the tasks stay open until a user message brings their news
            settled = {
                c
                for c, a in state.approvals.items()
                if (await ledger.approvals.get(a)).state is not State.PENDING
            }
            if not (answers := _answers(state, outputs, settled)):
                raise OutOfTurn("messages", "this chat is not waiting on any approval or tool result")
            message = types.Content(role="user", parts=[types.Part(function_response=a) for a in answers])
            return AdkRun(self, chat_id, owner, calls, message)
        assert request.user_message is not None  # ADK drops calls left unanswered from the model's view
        message = types.Content(role="user", parts=[types.Part(text=request.user_message.text)])
        news = [
            types.FunctionResponse(name=made[c].tool, id=c, response=status)
            for c, status in (await task_news(ledger, state.tasks)).items()
            if c in made
        ]
        return AdkRun(self, chat_id, owner, calls, message, news)

    async def _session(self, chat_id: str) -> AdkSession | None:
        return await self.runner.session_service.get_session(
            app_name=self.app.name, user_id=USER, session_id=chat_id
        )

    async def _events(self, chat_id: str) -> list[Event]:
        session = await self._session(chat_id)
        return list(session.events) if session else []

    async def tell(self, chat_id: str, responses: list[types.FunctionResponse]) -> None:
        """Add later responses to earlier calls to the chat's session, as the user's own event: ADK will not
        take them in the same message as text (the one resumes an invocation, the other starts one)."""
        if (session := await self._session(chat_id)) is None:
            return
        parts = [types.Part(function_response=response) for response in responses]
        event = Event(
            author="user",
            invocation_id=new_invocation_context_id(),
            content=types.Content(role="user", parts=parts),
        )
        await self.runner.session_service.append_event(session, event)


@dataclass
class AdkRun:
    """One reply's run of the agent: `message` is the new user message or the continuation's answers;
    `news`, for a user message, the statuses of long-running calls, each a later response to its call."""

    framework: Adk
    chat_id: str
    owner: str
    continued: dict[str, ToolCall]
    """The calls of the earlier request this reply continues."""
    message: types.Content
    news: list[types.FunctionResponse] = field(default_factory=list)

    def translator(self, turn: Turn, message_id: str, continued: list[str], signing_key: bytes) -> Translator:
        return AdkTranslator(
            turn, message_id, continued=self.continued, browser_tools=self.framework.browser_names,
            signing_key=signing_key,
        )  # fmt: skip

    async def run(self, emit: Callable[[Event | End], None]) -> None:
        if self.news:  # seed 004: ADK puts a long-running call's latest response in its first one's place
            await self.framework.tell(self.chat_id, self.news)
        streaming = RunConfig(streaming_mode=StreamingMode.SSE)
        async for event in self.framework.runner.run_async(
            user_id=USER, session_id=self.chat_id, new_message=self.message, run_config=streaming
        ):
            emit(event)
        emit(End())

    def parked(self, history: Sequence[object]) -> None:
        """ADK can't resume a run from a history: a blocking reply saves nothing while it waits."""

    async def end(self, translator: Translator, history: Session) -> Ended[Session] | None:
        assert isinstance(translator, AdkTranslator)
        if not translator.ended:  # interrupted mid-wait: ADK cannot pick a blocked call up again
            asked = ChatState(approvals=translator.asking)
            await withdraw(self.framework.gate.ledger, asked, self.owner, INTERRUPTED)
            return None
        events = len(await self.framework._events(self.chat_id))
        return Ended(history, bool(translator.open_calls), events)


class AdkChat(ChatDriver[Session]):
    """Serve an ADK `agent` as a chat whose every tool call passes `gate`.

    `session_service` keeps the conversations (one session per chat); every worker serving the same chats
    needs the same one, and the same `signing_key`.
    """

    def __init__(
        self,
        agent: BaseAgent,
        gate: Gate,
        *,
        session_service: BaseSessionService | None = None,
        app_name: str = "signoff",
        signing_key: bytes = b"",
        browser_timeout: float = 120.0,
    ) -> None:
        sessions = session_service or InMemorySessionService()
        self.adk = Adk(agent, gate, sessions, app_name)
        super().__init__(self.adk, gate, signing_key=signing_key, browser_timeout=browser_timeout)

    @property
    def runner(self) -> Runner:
        return self.adk.runner


def _answers(state: ChatState, outputs: dict[str, Any], settled: set[str]) -> list[types.FunctionResponse]:
    """ADK's own terms for a continuation: `confirmed` to the confirmation it asked for each call whose
    approval is settled (the gate reads the ledger's decision, not this flag), and each browser result as
    the call's response. A question still open keeps its confirmation open, so a later answer resumes it:
    several questions of one step may be answered one request at a time."""
    confirmed = {"confirmed": True}
    return [
        types.FunctionResponse(name=CONFIRMATION, id=state.confirmations[c], response=confirmed)
        for c in state.approvals
        if c in settled and state.confirmations.get(c)
    ] + [types.FunctionResponse(name=state.browser_calls[c], id=c, response=r) for c, r in outputs.items()]


def _response(output: ToolOutput) -> dict[str, Any]:
    """A browser result as ADK's function response: a dict, with an error the model sees as one."""
    if output.error_text is not None:
        return failure(output.error_text)
    return output.output if isinstance(output.output, dict) else {"result": output.output}


__all__ = ["AdkChat"]
