"""The demo on the OpenAI Agents SDK: the scripted model as the SDK's own `ScriptedModel`, and the same tools.

The model follows the demo grammar (`script.plan`, `script.sentence`) exactly as the pydantic-ai one does,
so every test and scenario runs on each framework. Each model call is answered from what the call holds:
a user's message gets the calls the grammar makes of it, and tool results since the model last spoke get
one sentence each.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from agents import Agent, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from signoff.demo.agent import INSTRUCTIONS
from signoff.demo.script import HELP, plan, sentence
from signoff.demo.tools import Wallets, change_bgm, export_report, get_weather
from signoff.integrations.framework import current_turn
from signoff.openai_agents import CHECK_TASK, acknowledged_tool, browser_tool


class GrammarModel(ScriptedModel):
    """A `ScriptedModel` whose script never runs out: each call's step is the grammar's answer to it."""

    async def _next_resolved_step(self, call: ModelCall) -> ModelStep:
        self._calls[:] = self._calls[-1:]  # a served demo answers for ever: keep only the call in hand
        self.enqueue(ModelStep.respond(_reply))
        return await super()._next_resolved_step(call)


def _reply(call: ModelCall) -> list[Any]:
    items: list[dict[str, Any]] = [dict(i) for i in call.input] if isinstance(call.input, list) else []
    last = items[-1] if items else {"role": "user", "content": call.input}
    prompt = last.get("content") if last.get("role") == "user" else None
    if isinstance(prompt, str) and (calls := plan(prompt)):
        return [function_call(t, a, call_id="call_" + secrets.token_hex(8)) for t, a in calls]
    made = {i["call_id"]: i for i in items if i.get("type") == "function_call"}
    spoke = max((n for n, i in enumerate(items) if i.get("role") == "assistant"), default=-1)
    results = [i for i in items[spoke + 1 :] if i.get("type") == "function_call_output"]
    said = [_sentence(made.get(r["call_id"], {}), r.get("output")) for r in results]
    text = " ".join([*said, HELP] if isinstance(prompt, str) else said)  # results before a prompt: news
    return [assistant_message(text or HELP, item_id="msg_" + secrets.token_hex(8))]


def _sentence(call: dict[str, Any], output: Any) -> str:
    try:
        result = json.loads(output) if isinstance(output, str) else output
    except ValueError:
        result = output
    args = json.loads(call.get("arguments") or "{}")
    failed = f"{result['error']}." if isinstance(result, dict) and set(result) == {"error"} else None
    return sentence(call.get("name", "the tool"), args, result, failed=failed)


def get_location() -> dict[str, Any]:
    """The user's current location, from their browser."""
    raise NotImplementedError  # the browser runs it


def demo_openai_agent(model: str | None = None, wallets: Wallets | None = None) -> Agent[Any]:
    """`model` is any model name the SDK takes; without one the scripted offline model answers."""
    wallets = wallets or Wallets()

    def process_payment(amount: float, currency: str, recipient: str) -> dict[str, Any]:
        """Pay `amount` of `currency` to `recipient` from the user's wallet."""
        turn = current_turn.get()
        return wallets.pay(turn.chat_id if turn else "default", amount, currency, recipient)

    return Agent(
        name="signoff_demo",
        instructions=INSTRUCTIONS,
        model=model or GrammarModel(),
        tools=[
            function_tool(process_payment),
            function_tool(get_weather),
            browser_tool(get_location),
            acknowledged_tool(change_bgm),
            function_tool(export_report),
            CHECK_TASK,
        ],
    )
