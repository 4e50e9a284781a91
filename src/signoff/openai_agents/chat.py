"""An Agents SDK agent as a chat (see `integrations.framework.ChatDriver`): its history codec and its runs.

The ledger keeps the conversation as the SDK's own input items (`RunResult.to_input_list()`), a chat entry
each. A run that ends with interruptions adds one more entry, its `RunState` as the SDK serialises it
(`to_json`), so any worker resumes it: `RunState.from_json`, each interruption the ledger has an answer
for approved in the state (the gate, not that flag, rules on the call when its body runs), the browser's
results handed to the calls they answer, and the run streamed on. A call still waiting on a person stays
an interruption, and the run ends again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, FunctionTool, Runner, RunState

import signoff.integrations.framework as fw
from signoff.core.call import ToolCall
from signoff.core.wording import INTERRUPTED, WITHDRAWN
from signoff.gate import Gate
from signoff.ledger.records import StoredChat
from signoff.openai_agents import tools
from signoff.openai_agents.stream import AgentsTranslator, Finished
from signoff.protocol import ChatRequest, ToolOutput

Item = dict[str, Any]
ITEMS = fw.JsonMessages[Item](parse=json.loads, dump=lambda items: json.dumps(list(items)).encode())
Items = fw.History[Item]
PAUSED = "signoff.run_state"
"""The type of the entry that holds a paused run's `RunState`: never given to the model."""


def _paused(items: Sequence[Item]) -> Item | None:
    return items[-1] if items and items[-1].get("type") == PAUSED else None


def conversation(items: Sequence[Item]) -> list[Item]:
    """The items the model reads: without a paused run's state."""
    return list(items[:-1]) if _paused(items) else list(items)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content or () if isinstance(part, dict))


class OpenAIAgents:
    """The Agents SDK's part of a chat (a `integrations.framework.Framework`)."""

    cannot_regenerate = None
    keeps_history = True

    def __init__(self, agent: Agent[Any], gate: Gate) -> None:
        self.gate = gate
        self.gated = tools.Gated(gate)
        self.agent = self.gated.agent(agent)
        self.tools = {t.name: t for t in self.agent.tools if isinstance(t, FunctionTool)}
        self.browser_tools = tuple(
            fw.BrowserToolInfo(
                t.name, t.description, t.params_json_schema, isinstance(t, tools.AcknowledgedTool)
            )
            for t in agent.tools
            if isinstance(t, tools.BrowserTool | tools.AcknowledgedTool)
        )
        self.browser_names = frozenset(t.name for t in self.browser_tools if not t.acknowledged)

    async def read(
        self, chat_id: str, stored: StoredChat | None, state: fw.ChatState, *, begun: bool
    ) -> Items:
        return ITEMS.read(stored, state)

    def calls(self, history: Items) -> fw.Calls:
        items = conversation(history.messages)
        answered = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
        return fw.Calls(
            {
                i["call_id"]: i["name"]
                for i in items
                if i.get("type") == "function_call" and i["call_id"] not in answered
            }
        )

    def made(self, history: Items) -> Collection[str]:
        return {i["call_id"] for i in history.messages if i.get("type") == "function_call"}

    def transcript(self, history: Items) -> Iterable[fw.Entry]:
        return transcript(conversation(history.messages))

    async def start(self, chat_id: str, begun: fw.Begun, history: Items, request: ChatRequest) -> AgentsRun:
        items, owner = history.messages, begun.stored.owner or ""
        if begun.continues:
            if (paused := _paused(items)) is None:
                raise fw.OutOfTurn("messages", "this chat has no run waiting to go on")
            late = begun.state.browser_calls.items()
            expired = {c: ToolOutput(call_id=c, tool=t, error_text=begun.expired) for c, t in late}
            outputs = begun.outputs if begun.expired is None else expired
            browsing = tools.Browsing({c: fw.browser_result(o) for c, o in outputs.items()})
            return AgentsRun(self, items, paused["state"], owner, browsing)
        earlier = conversation(items)
        if begun.action is fw.Action.REGENERATE:
            if not (asked := [n for n, i in enumerate(earlier) if i.get("role") == "user"]):
                raise fw.OutOfTurn("trigger", "there is no earlier user message to regenerate a reply to")
            return AgentsRun(self, earlier[: asked[-1] + 1], None, owner)
        assert request.user_message is not None
        # the calls it moves on from: the model hears each task's news, and that the others were withdrawn
        withdrawn = {fw.MARK: "refused", "status": "cancelled", "message": f"cancelled: {WITHDRAWN}"}
        told = await fw.moved_on(self.gate, begun.state.tasks, self.calls(history).open, withdrawn)
        closed = [
            {"type": "function_call_output", "call_id": c, "output": fw.json_text(r)} for c, r in told.items()
        ]
        return AgentsRun(
            self, [*earlier, *closed, {"role": "user", "content": request.user_message.text}], None, owner
        )


@dataclass
class AgentsRun:
    """One reply's run: `items` are the conversation it starts from (a paused run's included), `paused`
    the `RunState` it resumes, if it resumes one."""

    framework: OpenAIAgents
    items: list[Item]
    paused: dict[str, Any] | None
    owner: str
    browsing: tools.Browsing = field(default_factory=tools.Browsing)

    def translator(
        self, turn: fw.Turn, message_id: str, continued: list[str], signing_key: bytes
    ) -> fw.Translator:
        handed = self.browsing.handed
        return AgentsTranslator(turn, message_id, continued, handed=handed, signing_key=signing_key)

    async def run(self, emit: Callable[[Any], None]) -> None:
        framework = self.framework
        tools.browsing.set(self.browsing)
        if self.paused is None:
            given: list[Any] = conversation(self.items)  # the SDK's input items, as it listed them
            result = Runner.run_streamed(framework.agent, given)
        else:
            state = await framework.gated.resume(await RunState.from_json(framework.agent, self.paused))
            result = Runner.run_streamed(framework.agent, state)
        async for event in result.stream_events():
            emit(event)
        emit(Finished(result))

    def parked(self, history: Sequence[object]) -> None:
        """A blocking call waits inside its tool's body: the SDK can't resume a run from there."""

    async def end(self, translator: fw.Translator, history: Items) -> fw.Ended[Items] | None:
        assert isinstance(translator, AgentsTranslator)
        if (result := translator.result) is None:  # interrupted: a call blocked in its body can't go on
            asked = fw.ChatState(approvals={c: a.id for c, a in translator.asked.items()})
            await fw.withdraw(self.framework.gate.ledger, asked, self.owner, INTERRUPTED)
            return None
        ran = conversation(self.items)
        added: list[Any] = result.to_input_list()[len(ran) :]
        while not result.interruptions and _told_task(added, translator.turn.long_running):
            added.pop()  # a step of tasks ended the run (`tools.on_tasks`): its calls wait on them
        items = [*ran, *added]
        if result.interruptions:
            items.append({"type": PAUSED, "state": result.to_state().to_json()})
        browser = self.framework.browser_names
        return fw.Ended(history.after(items), any(i.name in browser for i in result.interruptions))


def _told_task(items: Sequence[Item], started: Collection[str]) -> bool:
    return any(i.get("type") == "function_call_output" and i["call_id"] in started for i in items[-1:])


def transcript(items: Sequence[Item]) -> Iterator[fw.Entry]:
    """The conversation in the words `integrations.chat.ui` renders: the model's consecutive items are a
    step."""
    step: list[fw.Said | ToolCall] = []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "function_call":
            step.append(ToolCall(item["call_id"], item["name"], fw.json_arguments(item.get("arguments"))))
            continue
        if kind == "message" and role == "assistant":
            step.append(fw.Said(_text(item.get("content"))))
            continue
        if kind == "reasoning":
            step += [fw.Said(str(s.get("text", "")), reasoning=True) for s in item.get("summary", ())]
            continue
        if step:
            yield fw.Step(step)
            step = []
        if kind == "function_call_output":
            yield fw.Result(item["call_id"], fw.json_outcome(item.get("output")))
        elif role == "user":
            yield fw.Prompt([_text(item.get("content"))])
    if step:
        yield fw.Step(step)


class OpenAIAgentsChat(fw.ChatDriver[Items]):
    """Serve an Agents SDK `agent` as a chat whose every function tool passes `gate`."""

    def __init__(
        self, agent: Agent[Any], gate: Gate, *, signing_key: bytes = b"", browser_timeout: float = 120.0
    ) -> None:
        super().__init__(
            OpenAIAgents(agent, gate), gate, signing_key=signing_key, browser_timeout=browser_timeout
        )


__all__ = ["OpenAIAgentsChat", "conversation", "transcript"]
