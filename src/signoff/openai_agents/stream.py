"""An Agents SDK streamed run as UI message stream chunks (`integrations.framework.drive` drives it).

Text and tool inputs come from the model's raw response events, as they stream; a tool's result from the
run's `tool_output` item; the end from the run's result (`Finished`), whose interruptions are the calls
the chat now waits on. Steps, questions and the browser's hand-overs are the shared `Translator`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from agents import RunItemStreamEvent, RunResultStreaming
from agents.items import ToolCallOutputItem
from agents.stream_events import RawResponsesStreamEvent
from openai.types import responses as oa

import signoff.integrations.framework as fw
from signoff.core.call import ToolCall
from signoff.protocol import Chunk, ToolInputAvailable, ToolInputDelta


@dataclass(frozen=True)
class Finished:
    """The run ended: its result holds the interruptions it ended with."""

    result: RunResultStreaming


class AgentsTranslator(fw.Translator):
    def __init__(
        self,
        turn: fw.Turn,
        message_id: str,
        visible: Iterable[str],
        *,
        handed: Collection[str],
        signing_key: bytes,
    ) -> None:
        super().__init__(turn, message_id, visible, signing_key=signing_key)
        self.handed = handed
        """The browser calls the run handed over (see `Translator.handover`)."""
        self.calls: dict[str, str] = {}
        """The model's items that are calls, by item id: their call ids."""
        self.result: RunResultStreaming | None = None

    def translate(self, item: Any) -> list[Chunk]:
        match item:
            case RawResponsesStreamEvent(data=event):
                return self._raw(event)
            case RunItemStreamEvent(name="tool_output", item=ToolCallOutputItem() as told):
                return self.returned(str(told.call_id), fw.json_outcome(told.output))
            case Finished(result):
                self.result = result
                left = [
                    ToolCall(i.call_id or "", i.name or "", fw.json_arguments(i.arguments))
                    for i in result.interruptions
                ]
                handed = [call for call in left if call.call_id in self.handed]
                usage = result.context_wrapper.usage
                tokens = {name: getattr(usage, key) for key, name in fw.USAGE.items()}
                return self.finish(handed, waiting=bool(left), usage=tokens if usage.total_tokens else None)
        return []

    def _raw(self, event: Any) -> list[Chunk]:
        match event:
            case oa.ResponseOutputItemAddedEvent(item=oa.ResponseOutputMessage(id=key)):
                return [*self.open_step(), *self.writing.start(key)]
            case oa.ResponseOutputItemAddedEvent(item=oa.ResponseReasoningItem(id=key)):
                return [*self.open_step(), *self.writing.start(key, reasoning=True)]
            case oa.ResponseOutputItemAddedEvent(item=oa.ResponseFunctionToolCall() as call):
                self.calls[call.id or call.call_id] = call.call_id
                return [*self.open_step(), self.announce(call.call_id, call.name)]
            case (
                oa.ResponseTextDeltaEvent(item_id=key, delta=text)
                | oa.ResponseReasoningSummaryTextDeltaEvent(item_id=key, delta=text)
            ):
                return self.writing.delta(key, text)
            case oa.ResponseFunctionCallArgumentsDeltaEvent(item_id=key, delta=text) if key in self.calls:
                return [ToolInputDelta(tool_call_id=self.calls[key], input_text_delta=text)]
            case oa.ResponseOutputItemDoneEvent(item=oa.ResponseFunctionToolCall() as call):
                args = fw.json_arguments(call.arguments)
                return [ToolInputAvailable(tool_call_id=call.call_id, tool_name=call.name, input=args)]
            case oa.ResponseOutputItemDoneEvent(
                item=oa.ResponseOutputMessage(id=key) | oa.ResponseReasoningItem(id=key)
            ):
                return self.writing.end(key)
        return []
