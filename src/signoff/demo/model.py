"""The scripted model: a pydantic-ai model that follows the demo grammar (`script.plan`), offline.

It is a real `FunctionModel`, so everything around it (the agent loop, deferred tools, streaming) is
pydantic-ai's own code path, the same one a hosted model takes. After tool results it answers with one
short sentence per result, quoting the reason of any refusal, so tests can check what the model was told.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from signoff.demo.script import HELP, plan, sentence


def scripted_model() -> FunctionModel:
    return FunctionModel(_reply, stream_function=_stream, model_name="signoff-scripted")


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=_parts(messages))


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    for index, part in enumerate(_parts(messages)):
        if isinstance(part, TextPart):
            first, *rest = part.content.split(" ")  # word by word, so clients see real streaming
            yield first
            for word in rest:
                yield " " + word
        elif isinstance(part, ToolCallPart):
            yield {
                index: DeltaToolCall(
                    name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id
                )
            }


def _parts(messages: list[ModelMessage]) -> list[TextPart | ToolCallPart]:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    results = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_name]
    prompt = " ".join(
        p.content for p in last.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    )
    sentences = [_sentence(part, _args_of(messages, part.tool_call_id)) for part in results]
    if prompt and not (calls := plan(prompt)):
        sentences.append(HELP)
    elif prompt:
        return [ToolCallPart(tool, args, "call_" + secrets.token_hex(8)) for tool, args in calls]
    return [TextPart(" ".join(sentences) or HELP)]


def _args_of(messages: Iterable[ModelMessage], call_id: str) -> dict[str, Any]:
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                return part.args_as_dict()
    return {}


def _sentence(part: ToolReturnPart | RetryPromptPart, args: dict[str, Any]) -> str:
    tool = part.tool_name or "the tool"
    if isinstance(part, RetryPromptPart):
        return sentence(tool, args, None, failed=part.model_response())
    failed = str(part.content) + "." if part.outcome == "failed" else None
    return sentence(tool, args, part.content, failed=failed)
