"""A chat's stored pydantic-ai history as AI SDK UI messages, for a page that loads or reloads a chat.

The server is the authority on the conversation, so a reloaded page takes its messages from here, not
from its own storage (see `signoff.integrations.ui` for the tool parts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponsePart,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import to_jsonable_python

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.integrations.pydantic_ai.toolset import refused
from signoff.integrations.state import ChatState
from signoff.integrations.ui import PartOutcome, Transcript, UIMessage, tool_part


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


def ui_messages(
    history: list[ModelMessage],
    state: ChatState,
    approvals: Iterable[Approval],
    tasks: Mapping[str, object] = {},
) -> list[UIMessage]:
    """The chat's history as the page shows it: `state` says which calls wait on a person (its
    `approvals`) and the id the last assistant message streamed under (a continuation streams into it, so
    the page must hold it by that id). `tasks` holds the status of each long-running call the run ended
    on. Any other call with no result yet waits on the browser."""
    results = {
        part.tool_call_id: part
        for message in history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    }
    parts = _Parts(results, {a.call.call_id: a for a in approvals}, state.approvals, tasks)
    transcript = Transcript()
    for message in history:
        if isinstance(message, ModelRequest):
            if prompts := [p for p in message.parts if isinstance(p, UserPromptPart)]:
                transcript.user([{"type": "text", "text": t} for p in prompts for t in _texts(p)])
        elif step := [ui for part in message.parts if (ui := parts.of(part)) is not None]:
            transcript.step(step)
    return transcript.done(state.assistant_id)


def _texts(prompt: UserPromptPart) -> list[str]:
    content = prompt.content
    return [content] if isinstance(content, str) else [c for c in content if isinstance(c, str)]


class _Parts:
    def __init__(
        self,
        results: Mapping[str, ToolReturnPart | RetryPromptPart],
        approvals: Mapping[str, Approval],
        asking: Mapping[str, str],
        tasks: Mapping[str, object],
    ) -> None:
        self.results = results
        self.approvals = approvals
        self.asking = asking
        self.tasks = tasks

    def of(self, part: ModelResponsePart) -> UIMessage | None:
        if isinstance(part, TextPart):
            return {"type": "text", "text": part.content, "state": "done"}
        if isinstance(part, ThinkingPart):
            return {"type": "reasoning", "text": part.content, "state": "done"}
        if isinstance(part, ToolCallPart):
            return self._tool(part)
        return None

    def _tool(self, part: ToolCallPart) -> UIMessage:
        call = ToolCall(part.tool_call_id, part.tool_name, part.args_as_dict())
        result = self.results.get(part.tool_call_id)
        shown: PartOutcome | None = outcome(result) if result else None
        if result is None and part.tool_call_id in self.tasks:
            shown = "output-available", {"output": self.tasks[part.tool_call_id]}
        return tool_part(call, shown, self.approvals, self.asking)


__all__ = ["PartOutcome", "UIMessage", "outcome", "ui_messages"]


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
