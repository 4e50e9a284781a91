"""A pydantic-ai agent as a chat (see `integrations.chat.driver`): its history codec and its runs.

The ledger keeps pydantic-ai's message history as the chat's entries, a message each, and the driver keeps
the one this worker saved last. A continuation is pydantic-ai's own: the deferred calls' results
(`DeferredToolResults`), the approvals among them always `True`, since the gate rules on each call from the
ledger, not from this flag.

Any agent is served as its author wrote it. A call that waits ends the run with `DeferredToolRequests`,
which pydantic-ai accepts only among the run's output types: each run is given the agent's own output
types with it (`run(output_type=…)`), so no author has to add it. An agent with a `deps_type` gets its deps
from the factory it is served with, or from `deps_type()` where that makes one; where neither can, serving
it is refused when it starts, never at its first approval.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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

from signoff.core.errors import SignoffError
from signoff.core.wording import WITHDRAWN
from signoff.gate import Gate
from signoff.integrations.framework import (
    Action,
    Begun,
    Calls,
    ChatDriver,
    ChatState,
    Ended,
    Entry,
    JsonMessages,
    OutOfTurn,
    Translator,
    Turn,
    task_news,
)
from signoff.integrations.framework import History as JsonHistory
from signoff.integrations.pydantic_ai.browser import browser_tools
from signoff.integrations.pydantic_ai.messages import open_calls, transcript
from signoff.integrations.pydantic_ai.stream import AgentTranslator
from signoff.integrations.pydantic_ai.toolset import TASK, Signoff
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, ToolOutput

MESSAGES = JsonMessages[ModelMessage](
    parse=lambda raw: ModelMessagesTypeAdapter.validate_json(raw),
    dump=lambda messages: ModelMessagesTypeAdapter.dump_json(list(messages)),
)
"""pydantic-ai's history as JSON (the adapter is read when called, so a test may watch it parse)."""


History = JsonHistory[ModelMessage]


Deps = Callable[[], Any]
"""What makes a run's deps: called once for each run of the agent."""


class CannotServe(SignoffError):
    """An agent that can't be served as it is, and what to give it."""


class PydanticAI:
    """pydantic-ai's part of a chat (a `integrations.chat.driver.Framework`)."""

    cannot_regenerate = None
    keeps_history = True

    def __init__(
        self, agent: AbstractAgent[Any, Any], gate: Gate, model: Model | str | None, deps: Deps | None = None
    ) -> None:
        self.agent, self.gate, self.model = agent, gate, model
        self.browser_tools = browser_tools(agent)
        self.output_type = _waiting_too(agent.output_type)
        self.deps = deps or _deps_of(agent)

    async def read(
        self, chat_id: str, stored: StoredChat | None, state: ChatState, *, begun: bool
    ) -> History:
        return MESSAGES.read(stored, state)

    def calls(self, history: History) -> Calls:
        """The calls of the last step with no result: read from its JSON, never parsing the history."""
        return Calls(open_calls(history.since(lambda m: isinstance(m, ModelResponse))))

    def made(self, history: History) -> Collection[str]:
        return {p.tool_call_id for m in history.messages for p in m.parts if isinstance(p, ToolCallPart)}

    def transcript(self, history: History) -> Iterable[Entry]:
        return transcript(history.messages)

    async def start(self, chat_id: str, begun: Begun, history: History, request: ChatRequest) -> AgentRun:
        state, messages = begun.state, history.messages
        results = DeferredToolResults(
            approvals=dict.fromkeys(state.approvals, True),  # the gate, not this flag, rules on each call
            calls={call_id: _result(output) for call_id, output in begun.outputs.items()},
        )
        news = await task_news(self.gate.ledger, state.tasks)  # how far each task got, or its result
        results.calls.update(news)
        if begun.expired is not None:
            results.calls = {call_id: ToolFailed(begun.expired) for call_id in state.browser_calls}
        run: dict[str, Any] = {"message_history": messages}
        match begun.action:
            case Action.REGENERATE:
                earlier, prompt = _before_last_prompt(messages)
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
        return AgentRun(self, run)


@dataclass
class AgentRun:
    """One reply's run of the agent: `arguments` are the history, and the prompt or the deferred calls'
    results."""

    framework: PydanticAI
    arguments: dict[str, Any]

    def translator(self, turn: Turn, message_id: str, continued: list[str], signing_key: bytes) -> Translator:
        return AgentTranslator(turn, message_id, continued, signing_key=signing_key)

    async def run(self, emit: Callable[[Any], None]) -> None:
        """The run with an event handler that hands each event on as it comes: `run_stream_events` would
        run it in a task of its own and pass each event through a stream, a task switch per event."""

        async def handle(_: object, events: AsyncIterable[AgentStreamEvent]) -> None:
            async for event in events:
                emit(event)

        framework = self.framework
        gated = [Signoff(framework.gate)]
        result = await framework.agent.run(
            **self.arguments, output_type=framework.output_type, deps=framework.deps(), capabilities=gated,
            model=framework.model, event_stream_handler=handle,
        )  # fmt: skip
        emit(AgentRunResultEvent(result))

    def parked(self, history: Sequence[object]) -> bytes:
        """The history up to the model's tool calls (what they wait on is read from the ledger)."""
        asked = [m for m in history if isinstance(m, ModelRequest | ModelResponse)]
        return ModelMessagesTypeAdapter.dump_json(asked)

    async def end(self, translator: Translator, history: History) -> Ended[History] | None:
        assert isinstance(translator, AgentTranslator)
        if (result := translator.result) is None:  # interrupted: the chat stays as it was saved
            return None
        output = result.output
        browser_open = False
        if isinstance(output, DeferredToolRequests):
            started = {c for c, m in output.metadata.items() if TASK in m}
            browser_open = any(c.tool_call_id not in started for c in output.calls)  # the browser's to run
        return Ended(history.after(result.all_messages()), browser_open)


class AgentChat(ChatDriver[History]):
    """Serve `agent` as a chat whose every tool call passes `gate`."""

    def __init__(
        self,
        agent: AbstractAgent[Any, Any],
        gate: Gate,
        *,
        model: Model | str | None = None,
        deps: Deps | None = None,
        signing_key: bytes = b"",
        browser_timeout: float = 120.0,
    ) -> None:
        """`deps` makes each run's deps, for an agent with a `deps_type`; raises `CannotServe` for an agent
        that needs deps none can make."""
        framework = PydanticAI(agent, gate, model, deps)
        super().__init__(framework, gate, signing_key=signing_key, browser_timeout=browser_timeout)


def _waiting_too(output_type: Any) -> Any:
    """The agent's output types with `DeferredToolRequests` among them, as a run that waits ends."""
    given = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
    return given if DeferredToolRequests in given else [*given, DeferredToolRequests]


def _deps_of(agent: AbstractAgent[Any, Any]) -> Deps:
    """What makes the deps of an agent served without a factory of its own: none, for an agent that takes
    none; else its `deps_type`, tried now, so an agent none can serve is refused before anything runs."""
    wanted = agent.deps_type
    if wanted in (type(None), object):
        return lambda: None
    try:
        wanted()
    except Exception as exc:
        name = getattr(wanted, "__name__", repr(wanted))
        raise CannotServe(
            f"the agent's deps_type {name} can't be made without arguments ({type(exc).__name__}: {exc}):"
            " give a function that makes its deps, create_app(…, deps=…) or --deps module:function"
        ) from None
    return wanted


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


__all__ = ["MESSAGES", "AgentChat", "History"]
