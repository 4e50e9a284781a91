"""One approved payment on the OpenAI Agents SDK, signoff's gate against the SDK's own human-in-the-loop
flow, on the same scripted model (`signoff.demo.openai_agents.GrammarModel`, the SDK's `ScriptedModel`).

A flow: run the agent on the user's message, stop at the interruption, approve it, run the `RunState` on,
and read the model's reply. The peer approves with `RunState.approve` and nothing else; signoff's
approval is a decision recorded in the ledger (memory, or a SQLite file), ruled on by the gate, claimed
once before the tool's body and audited. Both in this process, so the ratio is the gate's cost alone.

    .venv/bin/python bench/flows.py openai-agents --flows 300
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p != HERE]  # bench/mcp.py would stand in for the SDK's `mcp`
import mcp  # noqa: E402, F401

sys.path.insert(0, HERE)
from agents import Agent, Runner, function_tool  # noqa: E402
from langgraph_flows import Flow, line, timed  # noqa: E402

from signoff.core.decision import Decision  # noqa: E402
from signoff.core.policy import Policy  # noqa: E402
from signoff.demo.openai_agents import GrammarModel  # noqa: E402
from signoff.gate import Gate  # noqa: E402
from signoff.ledger import Ledger, MemoryLedger, SqliteLedger  # noqa: E402
from signoff.openai_agents import Gated  # noqa: E402

PAY = "pay 50 USD to Hanako"
POLICY = Policy.from_dict({"tools": {"process_payment": [{"action": "ask"}]}})


def process_payment(amount: int, currency: str, recipient: str) -> str:
    """Pay `amount` of `currency` to `recipient` (as JSON, which the scripted model reads on both stacks)."""
    paid = {"amount": amount, "currency": currency, "recipient": recipient, "balance": 1000 - amount}
    return json.dumps(paid)


def agent() -> Agent[Any]:
    pay = function_tool(process_payment, needs_approval=True)
    return Agent(name="payer", model=GrammarModel(), tools=[pay])


def peer_flow() -> Flow:
    payer = agent()

    async def flow(n: int) -> None:
        state = (await Runner.run(payer, PAY)).to_state()
        for item in state.get_interruptions():
            state.approve(item)
        assert str((await Runner.run(payer, state)).final_output).startswith("Paid 50 USD")

    return flow


def signoff_flow(ledger: Ledger) -> Flow:
    gate = Gate(ledger, POLICY)

    async def flow(n: int) -> None:
        gated = Gated(gate, chat_id=f"c-{n}", wait="deferred")
        payer = gated.agent(agent())
        state = (await Runner.run(payer, PAY)).to_state()
        (asked,) = await ledger.approvals.query(chat_id=f"c-{n}")
        await ledger.approvals.decide(asked.id, Decision.approve("bench"), policy=POLICY)
        done = await Runner.run(payer, await gated.resume(state))
        assert str(done.final_output).startswith("Paid 50 USD"), done.final_output

    return flow


async def bench(flows: int) -> None:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # neither stack exports traces here
    peer = await timed(peer_flow(), flows)
    mean = sum(peer) / len(peer)
    print(line("agents SDK HITL (peer)", peer))
    async with MemoryLedger() as memory:
        print(line("signoff gate, memory ledger", await timed(signoff_flow(memory), flows), mean))
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as where:
        async with SqliteLedger(Path(where) / "ledger.db") as sqlite:
            print(line("signoff gate, sqlite ledger", await timed(signoff_flow(sqlite), flows), mean))


def main(flows: int) -> int:
    asyncio.run(bench(flows))
    return 0
