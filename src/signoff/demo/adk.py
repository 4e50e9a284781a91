"""The demo on Google ADK: the scripted model as an ADK `BaseLlm`, and the same four tools.

The model follows the demo grammar (`script.plan`, `script.sentence`) exactly as the pydantic-ai one does,
so every test and scenario runs on both frameworks. It names its own call ids: ADK keeps those end to end,
where the ids it would assign itself are hidden from the model. It speaks of every result that came since
it last spoke: on ADK, a long-running call's news is a result of its own just before the user's message.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from signoff.demo.agent import INSTRUCTIONS
from signoff.demo.script import HELP, plan, sentence
from signoff.demo.tools import Wallets, change_bgm, export_report, get_weather
from signoff.integrations.adk.plugin import (
    acknowledged_tool,
    browser_tool,
    check_task_tool,
    failure_of,
    long_running_tool,
)
from signoff.integrations.chat.turn import current_turn


class ScriptedLlm(BaseLlm):
    model: str = "signoff-scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents
        last = contents[-1] if contents else types.Content(role="user", parts=[])
        prompt = " ".join(p.text for p in last.parts or [] if p.text) if last.role == "user" else ""
        since = itertools.takewhile(lambda content: content.role != "model", reversed(contents))
        results = [
            p.function_response for c in reversed(list(since)) for p in c.parts or [] if p.function_response
        ]
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=sum(len(str(c.parts)) for c in contents) // 4,
            candidates_token_count=0,
        )
        if prompt and (calls := plan(prompt)):
            reply = [
                types.Part(
                    function_call=types.FunctionCall(id="call_" + secrets.token_hex(8), name=t, args=a)
                )
                for t, a in calls
            ]
            yield _final(reply, usage)
            return
        text = " ".join(_sentence(r, _args_of(contents, r.id)) for r in results)
        text = text or HELP
        if stream:
            first, *rest = text.split(" ")  # word by word, so clients see real streaming
            for word in [first, *(" " + w for w in rest)]:
                yield LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text=word)]), partial=True
                )
        yield _final([types.Part(text=text)], usage)


def _sentence(result: types.FunctionResponse, args: dict[str, Any]) -> str:
    """ADK hands a failed browser tool over as `{"error": ...}`, the way signoff's plugin reports it."""
    response = result.response or {}
    error = failure_of(response)
    return sentence(result.name or "the tool", args, response, failed=None if error is None else f"{error}.")


def _final(parts: list[types.Part], usage: types.GenerateContentResponseUsageMetadata) -> LlmResponse:
    usage.candidates_token_count = len(str(parts)) // 4
    usage.total_token_count = (usage.prompt_token_count or 0) + usage.candidates_token_count
    return LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage, partial=False)


def _args_of(contents: list[types.Content], call_id: str | None) -> dict[str, Any]:
    for content in contents:
        for part in content.parts or []:
            if (call := part.function_call) is not None and call.id == call_id:
                return dict(call.args or {})
    return {}


def get_location() -> dict[str, Any]:
    """The user's current location, from their browser."""
    raise NotImplementedError  # the browser runs it


def demo_adk_agent(model: str | None = None, wallets: Wallets | None = None) -> LlmAgent:
    """`model` is any model string ADK takes (a Gemini name, or LiteLLM's); without one the scripted
    offline model answers."""
    wallets = wallets or Wallets()

    def process_payment(amount: float, currency: str, recipient: str) -> dict[str, Any]:
        """Pay `amount` of `currency` to `recipient` from the user's wallet."""
        turn = current_turn.get()
        return wallets.pay(turn.chat_id if turn else "default", amount, currency, recipient)

    return LlmAgent(
        name="signoff_demo",
        model=model or ScriptedLlm(),
        instruction=INSTRUCTIONS,
        tools=[
            FunctionTool(process_payment),
            FunctionTool(get_weather),
            browser_tool(get_location),
            acknowledged_tool(change_bgm),
            long_running_tool(export_report),
            check_task_tool(),
        ],
    )
