"""A pydantic-ai run as UI message stream chunks (`signoff.integrations.chat.stream.drive` drives it).

`Translator` is sans-I/O (an item in, chunks out) and keeps the stream rules of docs/design.md:
- a step opens at the first part of a model response and closes before the next response or at the end;
- tool results of a resumed run come out before any step opens;
- no chunk is sent for a call that is not part of the message being streamed, which the client would
  reject ("no tool invocation found").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.run import AgentRunResult, AgentRunResultEvent

from signoff.core.call import ToolCall
from signoff.integrations.framework import Translator, Turn
from signoff.integrations.pydantic_ai.messages import outcome
from signoff.protocol import (
    Chunk,
    ToolInputAvailable,
    ToolInputDelta,
)


class AgentTranslator(Translator):
    def __init__(
        self, turn: Turn, message_id: str, visible: Iterable[str] = (), *, signing_key: bytes = b""
    ) -> None:
        super().__init__(turn, message_id, visible, signing_key=signing_key)
        self.tool_ids: dict[int, str] = {}
        self.result: AgentRunResult[Any] | None = None

    def translate(self, item: AgentStreamEvent | AgentRunResultEvent[Any]) -> list[Chunk]:
        match item:
            case PartStartEvent():
                return [*self.open_step(), *self._start(item)]
            case PartDeltaEvent():
                return self._delta(item)
            case PartEndEvent():
                return self._end(item)
            case FunctionToolCallEvent():
                self.responding = False
            case FunctionToolResultEvent(part=part):
                return self.returned(part.tool_call_id, outcome(part))
            case AgentRunResultEvent():
                self.result = item.result
                if not isinstance(output := item.result.output, DeferredToolRequests):
                    return self.finish((), waiting=False)
                left = (ToolCall(c.tool_call_id, c.tool_name, c.args_as_dict()) for c in output.calls)
                return self.finish(left, waiting=True)
        return []

    def open_step(self) -> list[Chunk]:
        opened = super().open_step()
        if opened:  # part indexes count from 0 again in each model response
            self.writing.open, self.tool_ids = {}, {}
        return opened

    def _start(self, event: PartStartEvent) -> list[Chunk]:
        match event.part:
            case TextPart(content=text) | ThinkingPart(content=text) as part:
                return self.writing.start(event.index, text, reasoning=isinstance(part, ThinkingPart))
            case ToolCallPart(tool_call_id=call_id, tool_name=tool):
                self.tool_ids[event.index] = call_id
                return [self.announce(call_id, tool)]
        return []

    def _delta(self, event: PartDeltaEvent) -> list[Chunk]:
        match event.delta:
            case TextPartDelta(content_delta=text) | ThinkingPartDelta(content_delta=str(text)):
                return self.writing.delta(event.index, text)
            case ToolCallPartDelta(args_delta=str(args)) if call_id := self.tool_ids.get(event.index):
                return [ToolInputDelta(tool_call_id=call_id, input_text_delta=args)]
        return []

    def _end(self, event: PartEndEvent) -> list[Chunk]:
        if isinstance(part := event.part, ToolCallPart):
            call_id, tool = part.tool_call_id, part.tool_name
            return [ToolInputAvailable(tool_call_id=call_id, tool_name=tool, input=part.args_as_dict())]
        return self.writing.end(event.index)
