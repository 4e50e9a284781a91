"""One approved payment on LangChain v1, signoff's middleware against LangChain's own
`HumanInTheLoopMiddleware`, on the same scripted model (`signoff.demo.langgraph.ScriptedChatModel`).

A flow is what a LangGraph app does for one approved payment: invoke with the user's message, stop at
the interrupt, record the approval, resume with `Command(resume=…)`, and read the model's reply. Both run
in this process, on `create_agent` with an `InMemorySaver`, the same tool and model; the only difference
is the middleware. The peer's approval is the resume payload itself; signoff's is a decision recorded in
the ledger (memory, or a SQLite file: `synchronous="normal"`), ruled on by the gate, claimed once and
audited, while the payload decides nothing.

    .venv/bin/python bench/flows.py langgraph --flows 300
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff.core.decision import Decision
from signoff.core.policy import Policy
from signoff.demo.langgraph import ScriptedChatModel
from signoff.gate import Gate
from signoff.langchain import SignoffMiddleware
from signoff.ledger import Ledger, MemoryLedger, SqliteLedger

PAY = "pay 50 USD to Hanako"
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})
POLICY = Policy.from_dict({"tools": {"process_payment": [{"action": "ask"}]}})
Flow = Callable[[int], Awaitable[None]]


def process_payment(amount: int, currency: str, recipient: str) -> dict[str, Any]:
    """Pay `amount` of `currency` to `recipient`."""
    return {"amount": amount, "currency": currency, "recipient": recipient, "balance": 1000 - amount}


def agent(middleware: AgentMiddleware) -> Any:
    tool = StructuredTool.from_function(process_payment)
    return create_agent(ScriptedChatModel(), [tool], middleware=[middleware], checkpointer=InMemorySaver())


def peer_flow() -> Flow:
    graph = agent(HumanInTheLoopMiddleware(interrupt_on={"process_payment": True}))

    async def flow(n: int) -> None:
        config = {"configurable": {"thread_id": f"peer-{n}"}}
        assert "__interrupt__" in await graph.ainvoke({"messages": [HumanMessage(PAY)]}, config)
        done = await graph.ainvoke(APPROVE, config)
        assert str(done["messages"][-1].text).startswith("Paid 50 USD"), done["messages"][-1]

    return flow


def signoff_flow(ledger: Ledger) -> Flow:
    gate = Gate(ledger, POLICY)
    graph = agent(SignoffMiddleware(gate))

    async def flow(n: int) -> None:
        config = {"configurable": {"thread_id": f"signoff-{n}"}}
        (asked,) = (await graph.ainvoke({"messages": [HumanMessage(PAY)]}, config))["__interrupt__"]
        await ledger.approvals.decide(asked.value["signoff"]["approval_id"], Decision.approve("bench"))
        done = await graph.ainvoke(APPROVE, config)
        assert str(done["messages"][-1].text).startswith("Paid 50 USD"), done["messages"][-1]

    return flow


async def timed(flow: Flow, flows: int) -> list[float]:
    for n in range(min(20, flows)):  # warm-up: imports, caches, the first compile of each path
        await flow(-1 - n)
    took = []
    for n in range(flows):
        start = time.perf_counter()
        await flow(n)
        took.append(time.perf_counter() - start)
    return took


def line(name: str, took: list[float], peer: float | None = None) -> str:
    mean = statistics.fmean(took)
    p99 = sorted(took)[max(0, int(len(took) * 0.99) - 1)]
    ratio = f"  {mean / peer:.2f}x the peer's time" if peer else ""
    return f"{name:34} {1 / mean:7.0f} flows/s  mean {mean * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms{ratio}"


async def bench(flows: int) -> None:
    peer = await timed(peer_flow(), flows)
    mean = statistics.fmean(peer)
    print(line("langgraph HITL middleware (peer)", peer))
    async with MemoryLedger() as memory:
        print(line("signoff middleware, memory ledger", await timed(signoff_flow(memory), flows), mean))
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as where:
        async with SqliteLedger(Path(where) / "ledger.db") as sqlite:
            print(line("signoff middleware, sqlite ledger", await timed(signoff_flow(sqlite), flows), mean))


def main(flows: int) -> int:
    asyncio.run(bench(flows))
    return 0
