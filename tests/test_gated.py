"""The one gated-call path every framework adapter maps from, and the sink a turn's news goes through."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import CombinedToolset, ExternalToolset, FunctionToolset
from pydantic_ai.usage import RunUsage

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.policy import Policy
from signoff.core.task import Task
from signoff.gate import Gate, Pending, Refused
from signoff.integrations.chat.turn import (
    Asked,
    Browser,
    GateEvent,
    Handed,
    Progressed,
    Turn,
    Withheld,
    current_turn,
    in_browser,
)
from signoff.integrations.gated import GatedCall, Ran, gated_call
from signoff.integrations.pydantic_ai.toolset import (
    BrowserToolset,
    SignoffToolset,
    is_check_task,
)
from signoff.ledger import MemoryLedger
from signoff.protocol import ToolOutput

PAY = {"amount": 50, "to": "Hanako"}
CALL = ToolCall("c1", "pay", PAY)


class Recorder:
    """A sink that keeps what it is given, to check what a transport would have heard and in what order."""

    def __init__(self) -> None:
        self.events: list[GateEvent] = []
        self.parked: list[tuple[str, int]] = []

    def emit(self, event: GateEvent) -> None:
        self.events.append(event)

    async def park(self, approval: Approval, history: Sequence[object]) -> None:
        self.parked.append((approval.id, len(history)))


def policy(action: str) -> Policy:
    return Policy.from_dict({"tools": {"pay": [{"action": action}]}})


async def paid(args: dict[str, Any]) -> dict[str, Any]:
    return {"paid": args["amount"]}


async def test_an_allowed_call_comes_back_as_ran() -> None:
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy("allow"))
        result = await gated_call(gate, GatedCall(CALL, paid), chat_id="chat", wait="deferred")
        assert result == Ran({"paid": 50})


async def test_an_approved_call_runs_once_and_its_replay_hears_what_came_of_it() -> None:
    """The same call again (a continuation that replays it) finds its claim taken: it is told the result
    the first run recorded, and the tool does not run again."""
    ran: list[dict[str, Any]] = []

    async def body(args: dict[str, Any]) -> str:
        ran.append(args)
        return "paid"

    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy("ask"))
        held = await gated_call(gate, GatedCall(CALL, body), chat_id="chat", wait="deferred")
        assert isinstance(held, Pending) and ran == []
        await ledger.approvals.decide(held.approval.id, Decision.approve("bob"))
        assert await gated_call(gate, GatedCall(CALL, body), chat_id="chat", wait="deferred") == Ran("paid")
        again = await gated_call(gate, GatedCall(CALL, body), chat_id="chat", wait="deferred")
        assert again == Ran("paid") and ran == [PAY]


async def test_a_deferred_ask_is_held_and_its_question_goes_through_the_turns_sink() -> None:
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy("ask"))
        sink = Recorder()
        token = current_turn.set(Turn(chat_id="chat", wait="deferred", sink=sink, requester="alice"))
        try:
            gated = GatedCall(ToolCall("c1", "pay", PAY), paid, history=["m1", "m2"])
            result = await gated_call(gate, gated, chat_id="ignored", wait="blocking")
        finally:
            current_turn.reset(token)
        assert isinstance(result, Pending) and result.approval.chat_id == "chat"
        assert result.approval.requester == "alice"
        assert sink.events == [Asked(result.approval)] and sink.parked == []  # deferred: nothing to park


async def test_a_blocking_wait_parks_the_chat_with_its_history_before_it_waits() -> None:
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy("ask"))
        sink = Recorder()
        token = current_turn.set(Turn(chat_id="chat", wait="blocking", sink=sink))
        try:
            gated = GatedCall(ToolCall("c1", "pay", PAY), paid, history=["m1", "m2"])
            running = asyncio.create_task(gated_call(gate, gated, chat_id="chat", wait="blocking"))
            while not sink.parked:
                await asyncio.sleep(0.001)
            [asked] = sink.events
            assert isinstance(asked, Asked) and sink.parked == [(asked.approval.id, 2)]
            await ledger.approvals.decide(asked.approval.id, Decision.deny("bob", reason="not today"))
            result = await running
        finally:
            current_turn.reset(token)
        assert isinstance(result, Refused) and result.reason == "not today"


async def test_a_denied_call_is_withheld_and_never_runs() -> None:
    ran: list[dict[str, Any]] = []

    async def body(args: dict[str, Any]) -> None:
        ran.append(args)

    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy("deny"))
        result = await gated_call(
            gate, GatedCall(ToolCall("c1", "pay", PAY), body), chat_id="chat", wait="deferred"
        )
        assert isinstance(result, Refused) and ran == []


async def test_a_long_running_call_starts_a_task_the_turn_follows_through_its_sink() -> None:
    release = asyncio.Event()

    async def slow(args: dict[str, Any]) -> str:
        await release.wait()
        return "done"

    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy("allow"))
        sink = Recorder()
        turn = Turn(chat_id="chat", wait="deferred", sink=sink)
        token = current_turn.set(turn)
        try:
            gated = GatedCall(ToolCall("c1", "pay", PAY), slow, long_running=True)
            result = await gated_call(gate, gated, chat_id="chat", wait="deferred")
            assert isinstance(result, Task) and turn.long_running == {"c1": result.id}
            release.set()
            while not any(isinstance(e, Progressed) and e.task.state.finished for e in sink.events):
                await asyncio.sleep(0.001)
        finally:
            turn.stop_following()
            current_turn.reset(token)
        assert isinstance(sink.events[0], Progressed) and sink.events[0].task.id == result.id


async def test_a_connected_browser_is_handed_the_call_through_the_sink_before_its_result_is_awaited() -> None:
    sink = Recorder()
    browser = Browser(timeout=5)
    call = ToolCall("c1", "get_location", {})
    running = asyncio.create_task(browser.run(call, sink))
    while not sink.events:
        await asyncio.sleep(0.001)
    assert sink.events == [Handed(call)] and browser.awaited == {"c1": "get_location"}
    browser.deliver({"c1": ToolOutput(call_id="c1", tool="get_location", output={"city": "Tokyo"})})
    assert (await running).output == {"city": "Tokyo"} and browser.awaited == {}


async def test_a_result_the_browser_sent_before_its_call_was_handed_over_is_taken_and_audited() -> None:
    """The live socket holds a result that came before its call was handed over (`Browser.deliver` gives
    it back); the call's run takes it instead of handing the call over, and the audit says how it came. A
    call the gate refuses never uses it, and that is audited too."""
    browser = Browser(timeout=5)
    played = ToolOutput(call_id="c1", tool="change_bgm", output={"playing": True})
    assert browser.deliver({"c1": played}) == {"c1": played}  # nobody awaits it yet
    async with MemoryLedger() as ledger:
        gate = Gate(
            ledger,
            Policy.from_dict({"tools": {"change_bgm": [{"action": "allow"}], "pay": [{"action": "deny"}]}}),
        )
        sink = Recorder()
        turn = Turn(chat_id="chat", wait="blocking", sink=sink, requester="alice", browser=browser)
        turn.early = {"c1": played, "c2": ToolOutput(call_id="c2", tool="pay", output={"paid": 50})}

        async def in_the_browser(args: dict[str, Any]) -> Any:
            output = await in_browser(gate, ToolCall("c1", "change_bgm", args))
            return output.output if output else None

        token = current_turn.set(turn)
        try:
            ran = await gated_call(
                gate,
                GatedCall(ToolCall("c1", "change_bgm", {}), in_the_browser),
                chat_id="chat",
                wait="blocking",
            )
            refused = await gated_call(
                gate, GatedCall(ToolCall("c2", "pay", PAY), paid), chat_id="chat", wait="blocking"
            )
        finally:
            current_turn.reset(token)
        assert ran == Ran({"playing": True})  # never handed over; the refused call's result is known now
        assert sink.events == [Withheld(ToolCall("c2", "pay", PAY))]
        assert isinstance(refused, Refused) and turn.early == {}
        audit = {(e.action, e.subject): e.detail["why"] for e in await ledger.audit.entries(0, 100)}
        assert audit[("run", "c1")] == "the browser ran it as soon as it was announced"
        assert audit[("refuse", "c2")].startswith("the browser's output is not used: the call was denied")


def _tools() -> FunctionToolset[None]:
    tools = FunctionToolset[None]()

    @tools.tool_plain(metadata={"signoff": "long-running"})
    async def export_report(name: str) -> str:
        """Export a report."""
        return name

    @tools.tool_plain
    async def quick(name: str) -> str:
        """Answer at once."""
        return name

    return tools


async def test_the_browser_wrapper_alone_makes_external_tools_callable() -> None:
    external = ExternalToolset[None]([ToolDefinition(name="get_location", kind="external")])
    async with MemoryLedger() as ledger:
        wrapped = BrowserToolset(external, gate=Gate(ledger))
        tools = await wrapped.get_tools(_context(Agent(TestModel())))
    assert tools["get_location"].tool_def.kind == "function"


async def test_the_gate_wrapper_alone_does_what_all_three_do() -> None:
    """One wrapper for the gate, the browser and long-running tools: pydantic-ai copies each wrapper of a
    run's toolset at every run and step, so signoff adds one, whatever it wraps."""
    external = ExternalToolset[None]([ToolDefinition(name="get_location", kind="external")])
    async with MemoryLedger() as ledger:
        gated = SignoffToolset(CombinedToolset([_tools(), external]), gate=Gate(ledger))
        tools = await gated.get_tools(_context(Agent(TestModel())))
        again = gated.visit_and_replace(lambda t: t)
    assert set(tools) == {"export_report", "quick", "check_task", "get_location"}
    assert "NOTE" in (tools["export_report"].tool_def.description or "")
    assert "NOTE" not in (tools["quick"].tool_def.description or "")
    assert tools["get_location"].tool_def.kind == "function" and is_check_task(tools["check_task"])
    assert not is_check_task(tools["quick"])
    assert isinstance(again, SignoffToolset) and isinstance(again.wrapped, CombinedToolset)


def _context(agent: Agent[None, Any]) -> Any:
    return RunContext(deps=None, model=agent.model, usage=RunUsage())  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_turn() -> None:
    assert current_turn.get() is None
