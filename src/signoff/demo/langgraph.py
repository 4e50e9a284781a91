"""The demo on LangChain v1 / LangGraph: the scripted model as a `BaseChatModel`, the same tools, and
`create_agent` with signoff's middleware.

The model follows the demo grammar (`script.plan`, `script.sentence`) exactly as the pydantic-ai one does,
so every test and scenario runs on each framework: after tool results it says one sentence per result,
quoting the reason of a refusal. It streams its text word by word, as a hosted model would.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from signoff.demo.agent import INSTRUCTIONS
from signoff.demo.script import HELP, plan, sentence
from signoff.demo.tools import Wallets, change_bgm, export_report, get_weather
from signoff.integrations.chat.turn import current_turn
from signoff.langchain import (
    SignoffMiddleware,
    acknowledged_tool,
    browser_tool,
    check_task_tool,
    long_running_tool,
)


class ScriptedChatModel(BaseChatModel):
    """The demo grammar as a LangChain chat model, offline."""

    @property
    def _llm_type(self) -> str:
        return "signoff-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self  # it knows the demo's tools by name

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=_reply(messages))])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        reply = _reply(messages)
        if reply.tool_calls:
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_calls=reply.tool_calls))
            return
        first, *rest = str(reply.text).split(" ")  # word by word, so clients see real streaming
        for word in [first, *(" " + w for w in rest)]:
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._stream(messages):
            yield chunk


def _reply(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1] if messages else HumanMessage("")
    prompt = isinstance(last, HumanMessage)
    if prompt and (calls := plan(str(last.text))):
        made = [{"name": t, "args": a, "id": "call_" + secrets.token_hex(8)} for t, a in calls]
        return AIMessage("", tool_calls=made)
    since: list[ToolMessage] = []  # the results since it last spoke; before a prompt, a task's news
    for message in reversed(messages[:-1] if prompt else messages):
        if not isinstance(message, ToolMessage):
            break
        since.insert(0, message)
    args_of = {c["id"]: c["args"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    said = [_sentence(r, args_of.get(r.tool_call_id, {})) for r in since]
    return AIMessage(" ".join([*said, HELP] if prompt else said) or HELP)


def _sentence(result: ToolMessage, args: dict[str, Any]) -> str:
    try:
        content: Any = json.loads(str(result.text))
    except ValueError:
        content = str(result.text)
    failed = f"{result.text!s}." if result.status == "error" and not isinstance(content, dict) else None
    return sentence(result.name or "the tool", args, content, failed=failed)


def get_location() -> dict[str, Any]:
    """The user's current location, from their browser."""
    raise NotImplementedError  # the browser runs it


def demo_langgraph_agent(model: str | None = None, wallets: Wallets | None = None) -> Any:
    """`model` is any model string `init_chat_model` takes; without one the scripted model answers."""
    wallets = wallets or Wallets()

    def process_payment(amount: float, currency: str, recipient: str) -> dict[str, Any]:
        """Pay `amount` of `currency` to `recipient` from the user's wallet."""
        turn = current_turn.get()
        return wallets.pay(turn.chat_id if turn else "default", amount, currency, recipient)

    return create_agent(
        init_chat_model(model) if model else ScriptedChatModel(),
        [
            StructuredTool.from_function(process_payment),
            StructuredTool.from_function(get_weather),
            browser_tool(get_location),
            acknowledged_tool(change_bgm),
            long_running_tool(export_report),
            check_task_tool(),
        ],
        system_prompt=INSTRUCTIONS,
        middleware=[SignoffMiddleware()],
        checkpointer=InMemorySaver(),
        name="signoff-demo",
    )
