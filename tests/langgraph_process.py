"""One process of a LangGraph agent behind signoff's middleware, for tests/test_langgraph.py: it starts a
payment or resumes the thread, with a real checkpointer (SQLite or PostgreSQL) and a SQLite ledger.

`python -m tests.langgraph_process start|resume|replay LEDGER CHECKPOINTS THREAD PAID [CHECKPOINT]`.
`start` prints the interrupt's approval id and the checkpoint it stopped at, then waits to be killed;
`resume` resumes the thread with a payload saying "approve"; `replay` resumes from the given checkpoint
again. Each payment the tool makes is a line in PAID.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from signoff.core.policy import Policy
from signoff.demo.langgraph import ScriptedChatModel
from signoff.gate import Gate
from signoff.langchain import SignoffMiddleware
from signoff.ledger import SqliteLedger

POLICY = Policy.from_dict({"tools": {"process_payment": [{"action": "ask", "description": "Pay {amount}"}]}})


@asynccontextmanager
async def checkpoints(where: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if where.startswith("postgresql://"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(where) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(where) as saver:
            yield saver


async def main(step: str, ledger_path: str, where: str, thread: str, paid: str, at: str = "") -> None:
    def process_payment(amount: int, currency: str, recipient: str) -> dict[str, Any]:
        """Pay `amount` of `currency` to `recipient`."""
        with Path(paid).open("a") as out:
            out.write(f"{amount} {currency} {recipient}\n")
        return {"amount": amount, "currency": currency, "recipient": recipient, "balance": 1000 - amount}

    async with SqliteLedger(Path(ledger_path)) as ledger, checkpoints(where) as saver:
        gate = Gate(ledger, POLICY)
        agent = create_agent(
            ScriptedChatModel(),
            [StructuredTool.from_function(process_payment)],
            middleware=[SignoffMiddleware(gate)],
            checkpointer=saver,
        )
        config: dict[str, Any] = {"configurable": {"thread_id": thread}}
        if step == "start":
            result = await agent.ainvoke({"messages": [HumanMessage("pay 50 USD to Hanako")]}, config)
            (asked,) = result["__interrupt__"]
            state = await agent.aget_state(config)
            stopped = state.config["configurable"]["checkpoint_id"]
            print(
                json.dumps({"approval": asked.value["signoff"]["approval_id"], "checkpoint": stopped}),
                flush=True,
            )
            await asyncio.Event().wait()  # killed here, between the interrupt and the decision
        if step == "replay":
            config["configurable"]["checkpoint_id"] = at
        result = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        print(json.dumps({"said": str(result["messages"][-1].text)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
