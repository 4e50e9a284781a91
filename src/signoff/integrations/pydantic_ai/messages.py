"""A chat's stored pydantic-ai history read two ways: told in signoff's words, for a page that loads or
reloads the chat (the server is the authority on the conversation, and `integrations.chat.ui` renders it), and
for the calls it leaves open, without parsing it.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import to_jsonable_python

from signoff.core.call import ToolCall
from signoff.integrations.framework import Entry, PartOutcome, Prompt, Result, Said, Step
from signoff.integrations.pydantic_ai.toolset import refused


def outcome(result: ToolReturnPart | RetryPromptPart) -> PartOutcome:
    """What a call's result is to the client, the UI part's state and its fields: one answer for the live
    stream and for a chat rebuilt later, so a reload shows what the stream showed."""
    if isinstance(result, RetryPromptPart):
        return "output-error", {"errorText": result.model_response()}
    if refused(result):
        return "output-denied", {}
    if result.outcome == "failed":
        return "output-error", {"errorText": str(result.content)}
    return "output-available", {"output": to_jsonable_python(result.content)}


def transcript(history: list[ModelMessage]) -> Iterator[Entry]:
    """The history in the words `integrations.chat.ui` renders."""
    for message in history:
        if isinstance(message, ModelResponse):
            yield Step([said for part in message.parts if (said := _said(part)) is not None])
            continue
        if prompts := [p for p in message.parts if isinstance(p, UserPromptPart)]:
            yield Prompt([t for p in prompts for t in _texts(p)])
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                yield Result(part.tool_call_id, outcome(part))


def _said(part: ModelResponsePart) -> Said | ToolCall | None:
    match part:
        case TextPart(content=text):
            return Said(text)
        case ThinkingPart(content=text):
            return Said(text, reasoning=True)
        case ToolCallPart():
            return ToolCall(part.tool_call_id, part.tool_name, part.args_as_dict())
    return None


def _texts(prompt: UserPromptPart) -> list[str]:
    content = prompt.content
    return [content] if isinstance(content, str) else [c for c in content if isinstance(c, str)]


__all__ = ["outcome", "transcript"]


class _Part(msgspec.Struct):
    part_kind: str = ""
    tool_call_id: str = ""
    tool_name: str = ""


class _Message(msgspec.Struct):
    kind: str
    parts: list[_Part]


_decode_history = msgspec.json.Decoder(list[_Message]).decode


def open_calls(history: bytes) -> dict[str, str]:
    """The calls of the last model response in a stored history with no result yet (call id to tool
    name): what the chat may wait on. Read with a decoder that takes only the parts' kinds and ids, so
    asking costs a fraction of validating the history."""
    messages = _decode_history(history)
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].kind == "response"), None)
    if last is None:
        return {}
    answered = {p.tool_call_id for m in messages[last + 1 :] for p in m.parts if p.part_kind in _RESULTS}
    calls = (p for p in messages[last].parts if p.part_kind == "tool-call")
    return {p.tool_call_id: p.tool_name for p in calls if p.tool_call_id not in answered}


_RESULTS = frozenset({"tool-return", "retry-prompt"})
