"""One process resuming a chat's paused Agents SDK run, as the peer bug did it: read the serialised
`RunState` from the chat store, `approve` its interruption itself, and run it on (see
tests/test_openai_agents.py, which starts two of these at once).

`python -m tests.openai_agents_resume LEDGER_URL CHAT_ID RAN_FILE BARRIER_DIR NAME`
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agents import Agent, Runner, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from signoff.core.policy import Policy
from signoff.gate import Gate
from signoff.ledger import open_ledger
from signoff.openai_agents import Gated
from signoff.openai_agents.chat import PAUSED

POLICY = Policy.from_dict({"tools": {"send_report": [{"action": "ask"}]}})


def report_agent(ran: Path, *steps: Any) -> Agent[Any]:
    """An agent whose one tool appends a line to `ran` each time its body runs."""

    @function_tool
    def send_report(destination: str) -> str:
        """Send the report."""
        with ran.open("a") as file:
            file.write(destination + "\n")
        return "sent"

    return Agent(name="Reports", tools=[send_report], model=ScriptedModel(steps))


def first_steps() -> list[Any]:
    return [[function_call("send_report", {"destination": "board"}, call_id="call-1")]]


async def main(url: str, chat_id: str, ran: Path, barrier: Path, name: str) -> None:
    async with open_ledger(url) as ledger:
        stored = await ledger.chats.load(chat_id)
        assert stored is not None
        paused = json.loads(stored.entries[-1])
        assert paused["type"] == PAUSED
        agent = Gated(Gate(ledger, POLICY), chat_id=chat_id).agent(
            report_agent(ran, [assistant_message("done")])
        )
        state = await RunState.from_json(agent, paused["state"])
        for item in state.get_interruptions():
            state.approve(item)  # what the peer's two workers each did
        (barrier / name).touch()
        while len(list(barrier.iterdir())) < 2:  # both resume together
            await asyncio.sleep(0.01)
        result = await Runner.run(agent, state)
        print(json.dumps({"name": name, "output": result.final_output}), flush=True)


if __name__ == "__main__":
    url, chat_id, ran, barrier, name = sys.argv[1:]
    asyncio.run(main(url, chat_id, Path(ran), Path(barrier), name))
