"""The native toolset and the run driver, with a real pydantic-ai agent and no server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from signoff import Decision, Gate, MemoryLedger, Policy, ToolCall
from signoff.integrations.chat.stream import Relay, Translator, drive
from signoff.integrations.chat.turn import Asked, Discard, Turn
from signoff.integrations.pydantic_ai.stream import AgentTranslator
from signoff.protocol import Chunk
from signoff.pydantic_ai import Signoff, SignoffToolset

PAY = {"amount": 50, "recipient": "Hanako"}


async def plan(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """Pay once; after the result, repeat what the tool said."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        yield " ".join(json.dumps(p.content, sort_keys=True) for p in returns)
        return
    yield {0: DeltaToolCall(name="pay", json_args=json.dumps(PAY), tool_call_id="call_1")}


def paying_agent(paid: list[dict[str, Any]]) -> Agent[None, Any]:
    agent = Agent(FunctionModel(stream_function=plan), output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def pay(amount: int, recipient: str) -> dict[str, Any]:
        paid.append({"amount": amount, "recipient": recipient})
        return {"paid": amount}

    return agent


async def run(agent: Agent[None, Any], gate: Gate, **kwargs: Any) -> Any:
    async with agent.run_stream_events(capabilities=[Signoff(gate, chat_id="c1")], **kwargs) as events:
        async for event in events:
            last = event
    return last.result  # type: ignore[attr-defined]


async def test_a_refusal_reaches_the_model_as_a_result_not_an_exception() -> None:
    paid: list[dict[str, Any]] = []
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, Policy(), approvers=[lambda approval: Decision.deny("bob", "over budget")])
        result = await run(paying_agent(paid), gate, user_prompt="pay")
    assert paid == []
    assert json.loads(result.output) == {
        "by": "bob",
        "message": "denied by bob: over budget",
        "reason": "over budget",
        "status": "denied",
    }


async def test_deferred_ends_the_run_and_the_resume_runs_the_approved_call_once() -> None:
    paid: list[dict[str, Any]] = []
    agent = paying_agent(paid)
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, Policy())
        deferred = Signoff(gate, chat_id="c1", wait="deferred")
        async with agent.run_stream_events("pay", capabilities=[deferred]) as events:
            async for event in events:
                first = event
        requests = first.result.output  # type: ignore[attr-defined]
        assert isinstance(requests, DeferredToolRequests) and paid == []
        approval_id = requests.metadata["call_1"]["approval_id"]
        await ledger.approvals.decide(approval_id, Decision.approve("alice"))
        results = DeferredToolResults(approvals={"call_1": True})
        history = first.result.all_messages()  # type: ignore[attr-defined]
        for _ in range(2):  # the second resume replays the same call: the claim is taken, its result told
            async with agent.run_stream_events(
                message_history=history, deferred_tool_results=results, capabilities=[deferred]
            ) as events:
                async for event in events:
                    last = event
            output = last.result.output  # type: ignore[attr-defined]
        assert paid == [PAY]
        assert "paid" in output, "the second resume hears the result the first recorded"
        assert (await ledger.approvals.get(approval_id)).state == "consumed"


async def test_an_edit_runs_with_the_edited_args_and_a_bad_edit_runs_nothing() -> None:
    """An edit the tool can't take is refused when it is made (the tool's JSON Schema), and the approval
    stays pending: here until its deadline, since the only approver keeps sending it."""
    paid: list[dict[str, Any]] = []
    edit = Decision.edit({"amount": 5, "recipient": "Hanako"}, "alice")
    bad = Decision.edit({"amount": "lots", "recipient": "Hanako"}, "alice")
    outputs, refusals = [], []
    policy = Policy.from_dict({"tools": {"pay": [{"action": "ask", "deadline": 0.5}]}})
    for decision in (edit, bad):
        async with MemoryLedger() as ledger:
            gate = Gate(ledger, policy, approvers=[lambda a, decision=decision: decision])
            outputs.append((await run(paying_agent(paid), gate, user_prompt="pay")).output)
            refusals += [
                e.detail["error"] for e in await ledger.audit.entries() if e.action == "approver-failed"
            ]
    assert paid == [{"amount": 5, "recipient": "Hanako"}]
    assert "no decision before the deadline" in outputs[1]
    assert refusals == ["the edited arguments do not fit pay: amount: 'lots' is not of type 'integer'"]


async def test_the_toolset_wraps_one_toolset_explicitly() -> None:
    paid: list[dict[str, Any]] = []
    inner = paying_agent(paid)
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, Policy.from_toml('[[tools.pay]]\naction = "deny"\n'))
        toolsets = [SignoffToolset(t, gate=gate) for t in inner.toolsets]
        agent = Agent(FunctionModel(stream_function=plan), toolsets=toolsets)
        async with agent.run_stream_events("pay") as events:
            async for event in events:
                last = event
    assert paid == [] and "denied by" in last.result.output  # type: ignore[attr-defined]


@pytest.mark.parametrize("wait", ["deferred", "blocking"])
async def test_the_driver_asks_inside_the_step_and_resolves_before_the_next(wait: str) -> None:
    paid: list[dict[str, Any]] = []
    agent = paying_agent(paid)
    async with MemoryLedger() as ledger:
        gate = Gate(
            ledger, Policy(), approvers=[lambda a: Decision.approve("alice")] if wait == "blocking" else []
        )
        chunks: list[Chunk] = []
        relay = Relay(chunks.append)
        turn = Turn(chat_id="c1", wait=wait, sink=relay)  # type: ignore[arg-type]

        async def run(emit: Callable[[Any], None]) -> None:
            async for event in _events(agent, gate, user_prompt="pay"):
                emit(event)

        await drive(run, AgentTranslator(turn, "m1"), relay)
        kinds = [type(c).__name__ for c in chunks]
    asked = ["StartStep", "ToolInputStart", "ToolInputAvailable", "ToolApprovalRequest"]
    if wait == "deferred":
        assert kinds == [*asked, "FinishStep", "Finish"]
    else:
        assert kinds[:4] == asked and kinds[4:7] == ["ToolOutputAvailable", "FinishStep", "StartStep"]
        assert kinds[-3:] == ["TextEnd", "FinishStep", "Finish"] and paid == [PAY]


async def test_a_translator_that_fails_stops_the_run_and_not_the_sender_of_the_event() -> None:
    """Events are translated where they happen: in a tool reporting the gate's news, say. A translator's
    bug must not fail that tool: the run is stopped where it is, and the reply ends with the error."""

    class Broken(Translator):
        def translate(self, item: Any) -> list[Chunk]:
            raise ValueError("a bug")

    chunks: list[Chunk] = []
    relay = Relay(chunks.append)
    turn = Turn(chat_id="c1", wait="deferred", sink=relay)  # type: ignore[arg-type]
    stopped = asyncio.Event()

    async def run(emit: Callable[[Any], None]) -> None:
        emit("an event")  # returns: the failure is the run's, not this caller's
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()

    with pytest.raises(ValueError, match="a bug"):
        await asyncio.wait_for(drive(run, Broken(turn, "m1"), relay), 5)
    assert stopped.is_set() and chunks == []


async def test_the_driver_sends_nothing_for_calls_outside_the_streamed_message() -> None:
    translator = AgentTranslator(
        Turn(chat_id="c1", wait="deferred", sink=Discard()), "m1", visible=["call_1"]
    )
    async with MemoryLedger() as ledger:
        elsewhere = await ledger.approvals.open(
            ToolCall("call_2", "pay", PAY), chat_id="c1", description="", rule="r"
        )
        here = await ledger.approvals.open(
            ToolCall("call_1", "pay", PAY), chat_id="c1", description="", rule="r"
        )
    assert translator.feed(Asked(elsewhere)) == []
    assert [type(c).__name__ for c in translator.feed(Asked(here))] == ["ToolApprovalRequest"]


async def _events(agent: Agent[None, Any], gate: Gate, **kwargs: Any) -> AsyncIterator[Any]:
    async with agent.run_stream_events(capabilities=[Signoff(gate)], **kwargs) as events:
        async for event in events:
            yield event
