"""A LangGraph graph as a chat (see `integrations.chat.driver`): one request in, one reply of chunks out.

The graph's checkpointer keeps the conversation, a thread per chat (in memory when the graph has none),
and the ledger keeps what signoff needs beside it: the approvals, the calls the chat waits on, how many
messages the thread held when the last reply ended, and the assistant message a continuation streams
into. A continuation resumes the graph where it stopped: every interrupt it holds is resumed, with no
value anyone reads (the gate reads the ledger), and the browser results the server checked go to the
tools through the run (`middleware.Served`). A reply interrupted while a call blocks leaves the thread at
its last checkpoint, and the next continuation runs the waiting tools again from there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, StreamMode

from signoff.core.call import ToolCall
from signoff.core.errors import SignoffError
from signoff.core.wording import WITHDRAWN
from signoff.gate import Gate
from signoff.integrations.framework import (
    USAGE,
    Begun,
    BrowserToolInfo,
    Calls,
    ChatDriver,
    ChatState,
    Ended,
    Entry,
    PartOutcome,
    Prompt,
    Result,
    Said,
    Step,
    Translator,
    Turn,
    moved_on,
)
from signoff.langchain.middleware import Served, is_gated, kind, outcome, parameters, served
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, Chunk, ToolOutput

Graph = CompiledStateGraph[Any, Any, Any, Any]


class NotGated(SignoffError):
    """A graph whose tools would run without the gate: it is refused before it serves anything."""


@dataclass(frozen=True)
class Thread:
    """A chat's LangGraph thread as read: its messages."""

    messages: list[BaseMessage]

    def entries(self) -> tuple[None, Thread]:
        return None, self  # the checkpointer keeps the history

    def copy(self) -> Thread:
        return self


def tool_nodes(graph: Graph) -> list[ToolNode]:
    return [node.bound for node in graph.nodes.values() if isinstance(node.bound, ToolNode)]


class LangGraph:
    """LangGraph's part of a chat (a `integrations.chat.driver.Framework`), over the graph's checkpointer."""

    cannot_regenerate = "a LangGraph chat cannot regenerate a reply: its thread only grows"
    keeps_history = False

    def __init__(self, graph: Graph, gate: Gate) -> None:
        nodes = tool_nodes(graph)
        if not nodes or not all(is_gated(node) for node in nodes):
            raise NotGated(
                "the graph's tools would run ungated: give create_agent middleware=[SignoffMiddleware()],"
                " or build its tool node with signoff.langchain.tool_node"
            )
        self.graph = graph if graph.checkpointer else graph.copy(update={"checkpointer": InMemorySaver()})
        self.gate = gate
        tools = [tool for node in nodes for tool in node.tools_by_name.values()]
        self.browser_tools = tuple(
            BrowserToolInfo(t.name, t.description, parameters(t), kind(t) == "acknowledged")
            for t in tools
            if kind(t) in ("browser", "acknowledged")
        )
        self.browser_names = frozenset(t.name for t in self.browser_tools if not t.acknowledged)

    async def messages(self, chat_id: str) -> list[BaseMessage]:
        snapshot = await self.graph.aget_state(_config(chat_id))
        return list(snapshot.values.get("messages", [])) if isinstance(snapshot.values, dict) else []

    async def read(self, chat_id: str, stored: StoredChat | None, state: ChatState, *, begun: bool) -> Thread:
        """The thread's messages; with `begun`, those it held when the running reply began."""
        messages = await self.messages(chat_id)
        return Thread(messages[: state.events] if begun else messages)

    def calls(self, history: Thread) -> Calls:
        last = next((m for m in reversed(history.messages) if isinstance(m, AIMessage)), None)
        answered = {m.tool_call_id for m in history.messages if isinstance(m, ToolMessage)}
        calls = last.tool_calls if last is not None else []
        return Calls({c["id"]: c["name"] for c in calls if c["id"] and c["id"] not in answered})

    def made(self, history: Thread) -> Collection[str]:
        return _made(history.messages).keys()

    def transcript(self, history: Thread) -> Iterable[Entry]:
        return _transcript(history.messages)

    async def start(self, chat_id: str, begun: Begun, history: Thread, request: ChatRequest) -> LangGraphRun:
        """A continuation resumes the graph (every interrupt, or the tools left at the last checkpoint by
        a reply that stopped while one blocked); a user message is a new input, after a cancelled result
        for each call it leaves open, so the thread stays one a model takes."""
        state, made, owner = begun.state, _made(history.messages), begun.stored.owner or ""
        outputs = dict(begun.outputs)
        if begun.expired is not None:
            outputs = {
                c: ToolOutput(call_id=c, tool=t, error_text=begun.expired)
                for c, t in state.browser_calls.items()
            }
        continued = {c: made[c] for c in begun.continued if c in made}
        if begun.continues:
            snapshot = await self.graph.aget_state(_config(chat_id))
            waiting = {i.id: None for i in snapshot.interrupts}
            resume: Command[Any] | None = Command(resume=waiting) if waiting else None
            return LangGraphRun(self, chat_id, owner, resume, outputs, continued)
        assert request.user_message is not None  # each open call: its task's news, or that it was withdrawn
        cancelled = {"status": "cancelled", "message": f"cancelled by a new message: {WITHDRAWN}"}
        open_calls = self.calls(history).open
        told = await moved_on(self.gate, state.tasks, open_calls, cancelled)
        left = [ToolMessage(json.dumps(r), tool_call_id=c, name=open_calls[c]) for c, r in told.items()]
        given = {"messages": [*left, HumanMessage(request.user_message.text)]}
        return LangGraphRun(self, chat_id, owner, given, outputs, continued)


def _config(chat_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": chat_id}}


MODES: list[StreamMode] = ["messages", "updates"]
"""The model's text as it streams, and each node's messages as it ends."""


class End:
    """The graph's stream ended (it has no event of its own for that)."""


@dataclass
class LangGraphRun:
    """One reply's run of the graph: `given` is its input (a new message, or how to resume it)."""

    framework: LangGraph
    chat_id: str
    owner: str
    given: Any
    outputs: dict[str, ToolOutput]
    continued: dict[str, ToolCall] = field(default_factory=dict)

    def translator(self, turn: Turn, message_id: str, continued: list[str], signing_key: bytes) -> Translator:
        browser = self.framework.browser_names
        return GraphTranslator(turn, message_id, self.continued, browser, signing_key=signing_key)

    async def run(self, emit: Callable[[Any], None]) -> None:
        served.set(Served(self.framework.gate, self.outputs))  # this run's task, and the tools' it spawns
        graph, config = self.framework.graph, _config(self.chat_id)
        async for item in graph.astream(self.given, config, stream_mode=MODES):
            emit(item)
        emit(End())

    def parked(self, history: object) -> None:
        """The checkpointer keeps the graph as the blocking call found it: nothing to save here."""

    async def end(self, translator: Translator, history: Thread) -> Ended[Thread] | None:
        assert isinstance(translator, GraphTranslator)
        if not translator.ended:  # interrupted: the thread resumes from its last checkpoint
            return None
        messages = await self.framework.messages(self.chat_id)
        return Ended(Thread(messages), bool(translator.open_calls), len(messages))


class GraphTranslator(Translator):
    """The graph's stream (`messages` and `updates` modes) as chunks: text as the model streams it, the
    calls of each model message, each tool's result, and the calls left to the browser at the end."""

    def __init__(
        self, turn: Turn, message_id: str, continued: dict[str, ToolCall], browser: frozenset[str], *,
        signing_key: bytes = b"",
    ) -> None:  # fmt: skip
        super().__init__(turn, message_id, continued, signing_key=signing_key)
        self.calls, self.browser_tools = dict(continued), browser
        self.answered: set[str] = set()
        self.handed_over: set[str] = set()
        self.usage: dict[str, int] = {}
        self.ended = False

    @property
    def asking(self) -> dict[str, str]:
        settled = self.answered | self.handed_over
        return {c: a.id for c, a in self.asked.items() if c not in settled}

    @property
    def open_calls(self) -> dict[str, ToolCall]:
        """Browser calls left to the browser: made or continued here, with no result, asking nobody."""
        left = self.answered | self.asking.keys()
        return {
            c: call for c, call in self.calls.items() if call.tool in self.browser_tools and c not in left
        }

    def translate(self, item: Any) -> list[Chunk]:
        match item:
            case End():
                self.ended = True
                waiting = bool(self.asking or self.open_calls)
                return self.finish(self.open_calls.values(), waiting=waiting, usage=self.usage)
            case "messages", (AIMessageChunk() as chunk, _) if str(chunk.text):
                chunks = self.open_step()
                if "text" not in self.writing.open:
                    chunks += self.writing.start("text")
                return chunks + self.writing.delta("text", str(chunk.text))
            case "updates", dict(update) if not update.get("__metadata__", {}).get("cached"):
                return [c for value in update.values() for c in self._update(value)]
        return []

    def _update(self, value: Any) -> list[Chunk]:
        if isinstance(value, tuple):  # the interrupts: a browser call's says it waits on the browser
            self.handed_over |= {
                i.value["signoff"]["browser"] for i in value if "browser" in i.value.get("signoff", {})
            }
        news = value.get("messages", []) if isinstance(value, dict) else []
        return [c for message in news for c in self._message(message)]

    def _message(self, message: Any) -> list[Chunk]:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in self.answered:
                return []
            self.answered.add(message.tool_call_id)
            return self.returned(message.tool_call_id, outcome(message))
        if not isinstance(message, AIMessage):
            return []
        for key, value in (message.usage_metadata or {}).items():
            if key in USAGE and isinstance(value, int):
                self.usage[USAGE[key]] = self.usage.get(USAGE[key], 0) + value
        chunks = self.open_step() if str(message.text) or message.tool_calls else []
        if str(message.text) and "text" not in self.writing.open:  # not streamed: said whole
            chunks += self.writing.start("text", str(message.text))
        chunks += self.writing.end("text")
        for made in message.tool_calls:
            call = self.calls[made["id"] or ""] = ToolCall(made["id"] or "", made["name"], made["args"])
            chunks += self.called(call)
        return chunks


def _made(messages: Iterable[BaseMessage]) -> dict[str, ToolCall]:
    return {
        c["id"]: ToolCall(c["id"], c["name"], c["args"])
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"]
    }


def _transcript(messages: Iterable[BaseMessage]) -> Iterator[Entry]:
    """The thread in the words `integrations.chat.ui` renders."""
    for message in messages:
        if isinstance(message, HumanMessage):
            yield Prompt([str(message.text)])
        elif isinstance(message, AIMessage):
            said: list[Said | ToolCall] = [Said(str(message.text))] if str(message.text) else []
            yield Step([*said, *(ToolCall(c["id"] or "", c["name"], c["args"]) for c in message.tool_calls)])
        elif isinstance(message, ToolMessage):
            result: PartOutcome = outcome(message)
            yield Result(message.tool_call_id, result)


class LangGraphChat(ChatDriver[Thread]):
    """Serve a compiled LangGraph graph (a `create_agent` agent with `SignoffMiddleware`, or a graph whose
    tool node is `signoff.langchain.tool_node`) as chats whose every tool call passes `gate`. Its
    checkpointer keeps the threads: every worker serving the same chats needs the same one, and the
    same `signing_key`."""

    def __init__(
        self, graph: Graph, gate: Gate, *, signing_key: bytes = b"", browser_timeout: float = 120.0
    ) -> None:
        self.langgraph = LangGraph(graph, gate)
        super().__init__(self.langgraph, gate, signing_key=signing_key, browser_timeout=browser_timeout)


__all__ = ["LangGraphChat", "NotGated"]
