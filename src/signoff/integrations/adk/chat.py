"""An ADK agent as a chat: one request in, one reply of chunks out, over the user's own session service.

ADK keeps the conversation in its session service (in memory by default; any `BaseSessionService` the user
passes), one session per chat. The ledger keeps what signoff needs beside it: the calls the chat waits on
a person for with their ADK confirmation ids, the browser calls it waits on, and the assistant message a
continuation streams into. The client's copy of the conversation supplies only the new user message,
approval responses and browser results, each checked by `signoff.integrations.trust` first.

A continuation answers ADK in its own terms: a `FunctionResponse` to each `adk_request_confirmation`
(always `confirmed`, since the gate reads the ledger's decision, not this flag) and one per browser result.
ADK then resumes the same invocation and calls the plugin again for each original call.

A long-running call's news reaches the model the way ADK's own long-running tools expect: a later
response to the same call id. ADK shows the model only a call's latest response, in the place of its
first, so the next user message finds the task's status or result in the history.
"""

from __future__ import annotations

from collections.abc import Callable
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
from google.adk.sessions.session import Session
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.principal import Principal
from signoff.gate import Gate, Wait
from signoff.integrations.adk.messages import open_in, ui_messages
from signoff.integrations.adk.plugin import AcknowledgedTool, BrowserTool, SignoffPlugin, failure
from signoff.integrations.adk.stream import CONFIRMATION, AdkTranslator, End
from signoff.integrations.chat import BrowserToolInfo, ChatView, RunningReply, ServedChat
from signoff.integrations.state import ChatState, encode_state, load_state, task_news, withdraw
from signoff.integrations.trust import OutOfTurn
from signoff.integrations.turn import Browser, Turn
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, ToolOutput

INTERRUPTED = "the user interrupted the reply"
USER = "signoff"
"""The ADK user id every chat's session is filed under; the chat id is the session id."""


@dataclass
class AdkReply(RunningReply[AdkTranslator]):
    chat: AdkChat
    chat_id: str
    wait: Wait
    stored: StoredChat
    message_id: str
    continued_calls: dict[str, ToolCall]
    message: types.Content
    continued: list[str]
    tasks: dict[str, str]
    """The long-running calls of earlier replies whose news the model has not had yet."""
    news: list[types.FunctionResponse] = field(default_factory=list)
    """Those calls' statuses, for a reply to a new user message: each a later response to its call."""
    browser: Browser | None = None
    held: dict[str, ToolOutput] = field(default_factory=dict)
    """Browser outputs that came with their call's approval (see `Begun.held`)."""
    browser_due: float | None = None
    before: dict[str, str] = field(default_factory=dict)
    """The chat's acknowledged calls as it began (see `ChatState.acknowledged`)."""

    def translator_for(self, turn: Turn) -> AdkTranslator:
        browser_tools, signing_key = self.chat.browser_names, self.chat.signing_key
        continued = self.continued_calls
        return AdkTranslator(
            turn, self.message_id, continued=continued, browser_tools=browser_tools, signing_key=signing_key
        )

    async def finish(self, translator: AdkTranslator) -> None:
        if translator.ended:
            await self._save(translator)
        else:  # interrupted mid-wait: ADK cannot pick a blocked call up again, so its question ends
            asked = ChatState(approvals=translator.asking)
            await withdraw(self.chat.gate.ledger, asked, self.stored.owner or "", INTERRUPTED)

    async def run_turn(self, emit: Callable[[Event | End], None]) -> None:
        if self.news:  # seed 004: ADK puts a long-running call's latest response in its first one's place
            await self.chat._tell(self.chat_id, self.news)
        streaming = RunConfig(streaming_mode=StreamingMode.SSE)
        async for event in self.chat.runner.run_async(
            user_id=USER, session_id=self.chat_id, new_message=self.message, run_config=streaming
        ):
            emit(event)
        emit(End())

    async def _save(self, translator: AdkTranslator) -> None:
        events, acknowledged = await self.chat.events(self.chat_id), self.acknowledged(self.before)
        state = ChatState(events=events, assistant_id=self.message_id, acknowledged=acknowledged)
        ledger = self.chat.gate.ledger
        if translator.open_calls:
            self.browser_due = ledger.chats.clock() + self.chat.browser_timeout
        self.stored = await ledger.chats.save(self.chat_id, encode_state(state), version=self.stored.version)


class AdkChat(ServedChat):
    """Serve an ADK `agent` as a chat whose every tool call passes `gate`.

    `session_service` keeps the conversations (one session per chat); every worker serving the same chats
    needs the same one, and the same `signing_key`.
    """

    cannot_regenerate = "an ADK chat cannot regenerate a reply: its session only grows"

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
        super().__init__(gate, signing_key=signing_key, browser_timeout=browser_timeout)
        self.app = App(name=app_name, root_agent=agent, plugins=[SignoffPlugin(gate)])
        sessions = session_service or InMemorySessionService()
        self.runner = Runner(app=self.app, session_service=sessions, auto_create_session=True)
        self.browser_tools = tuple(
            BrowserToolInfo(
                tool.name, tool.description, _parameters(tool), isinstance(tool, AcknowledgedTool)
            )
            for tool in getattr(agent, "tools", ())
            if isinstance(tool, BrowserTool | AcknowledgedTool)
        )
        self.check_acknowledged()

    async def _session(self, chat_id: str) -> Session | None:
        return await self.runner.session_service.get_session(
            app_name=self.app.name, user_id=USER, session_id=chat_id
        )

    async def _session_events(self, chat_id: str) -> list[Event]:
        session = await self._session(chat_id)
        return list(session.events) if session else []

    async def _tell(self, chat_id: str, responses: list[types.FunctionResponse]) -> None:
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

    async def events(self, chat_id: str) -> int:
        return len(await self._session_events(chat_id))

    async def load(self, chat_id: str, *, begun: bool = False) -> tuple[StoredChat | None, ChatState]:
        """What the chat waits on is read from its session and the ledger: the calls with no result yet,
        each classified by `integrations.state.classify`, ADK's unanswered confirmations, and the
        long-running calls whose news the model has not had. The stored state holds only how many events
        the session held when the last reply ended and the assistant message."""
        stored, state, _, _ = await self._read(chat_id, begun=begun)
        return stored, state

    async def _read(
        self, chat_id: str, *, begun: bool = False
    ) -> tuple[StoredChat | None, ChatState, list[Event], dict[str, ToolCall]]:
        """`load`, with the session's events it read and every call they hold, by id."""
        ledger = self.gate.ledger
        stored, state = await load_state(ledger, chat_id)
        events = await self._session_events(chat_id)
        if begun:  # ADK appends a running reply's events as they happen
            events = events[: state.events]
        found = open_in(events)
        await self.classify(chat_id, stored, state, found.calls)
        state.confirmations = {c: found.confirmations[c] for c in state.approvals if c in found.confirmations}
        started = (
            {t.call.call_id: t.id for t in await ledger.tasks.query(chat_id=chat_id)} if found.made else {}
        )
        state.tasks = {c: t for c, t in started.items() if c in found.made and c not in found.told}
        return stored, state, events, found.made

    async def view(self, chat_id: str, *, begun: bool = False) -> ChatView:
        """The chat as stored after its last reply, or, with `begun`, as the running reply began (ADK
        appends a running reply's events as they happen, so those are cut off)."""
        _, state, events, _ = await self._read(chat_id, begun=begun)
        ledger = self.gate.ledger
        approvals = await ledger.approvals.query(chat_id=chat_id)
        messages = ui_messages(
            events,
            assistant_id=state.assistant_id,
            approvals=approvals,
            asking=state.approvals,
            tasks=await task_news(ledger, state.tasks),
        )
        return ChatView(messages, approvals)

    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> AdkReply:
        ledger, chat_id = self.gate.ledger, request.chat_id
        stored, state, _, made = await self._read(chat_id)
        begun = await self.begin(request, principal, (stored, state), made)
        state = begun.state
        outputs: dict[str, Any] = {c: _response(o) for c, o in begun.outputs.items()}
        if begun.expired is not None:
            outputs = {call_id: failure(begun.expired) for call_id in state.browser_calls}
        message_id, continued = begun.message_id(), begun.continued
        calls = {c: made[c] for c in continued if c in made}
        if begun.continues:  # the tasks stay open until a user message brings their news
            settled = {
                c
                for c, a in state.approvals.items()
                if (await ledger.approvals.get(a)).state is not State.PENDING
            }
            if not (answers := _answers(state, outputs, settled)):
                raise OutOfTurn("messages", "this chat is not waiting on any approval or tool result")
            message = types.Content(role="user", parts=[types.Part(function_response=a) for a in answers])
            tasks = state.tasks
            return AdkReply(
                self,
                chat_id,
                wait,
                begun.stored,
                message_id,
                calls,
                message,
                continued,
                tasks,
                held=begun.held,
                before=state.acknowledged,
            )
        assert request.user_message is not None  # ADK drops calls left unanswered from the model's view
        message = types.Content(role="user", parts=[types.Part(text=request.user_message.text)])
        news = [
            types.FunctionResponse(name=made[c].tool, id=c, response=status)
            for c, status in (await task_news(ledger, state.tasks)).items()
            if c in made
        ]
        return AdkReply(
            self, chat_id, wait, begun.stored, message_id, calls, message, continued, {}, news,
            before=state.acknowledged,
        )  # fmt: skip


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


def _parameters(tool: FunctionTool) -> dict[str, Any]:
    declared = tool._get_declaration()  # ADK's own hook for a tool's declaration
    schema = declared.parameters_json_schema if declared is not None else None
    return schema if isinstance(schema, dict) else {"type": "object"}


def _response(output: ToolOutput) -> dict[str, Any]:
    """A browser result as ADK's function response: a dict, with an error the model sees as one."""
    if output.error_text is not None:
        return failure(output.error_text)
    return output.output if isinstance(output.output, dict) else {"result": output.output}


__all__ = ["AdkChat", "AdkReply"]
