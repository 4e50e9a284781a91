"""ADK events as UI message stream chunks (`signoff.integrations.chat.stream.drive` drives it).

`Translator` is sans-I/O and keeps the stream rules of docs/design.md, as the pydantic-ai one does:
- a step opens at a model response's first part and closes before the next response or at the end;
- streamed text (`partial` events) is sent as it comes, and the aggregated event that closes it only ends
  the text part;
- ADK's internal `adk_request_confirmation` call is never a tool part: the gate announces the question
  itself (an `Approval` item, under the original call id), and the confirmation id is kept to answer ADK;
- a deferred call's placeholder result is not the call's output, and is never sent;
- `End` closes the reply: approved browser calls are handed over, and `finish` carries the run's usage.
"""

from __future__ import annotations

from google.adk.events.event import Event
from google.genai import types

from signoff.core.call import ToolCall
from signoff.integrations.adk.plugin import MARK, outcome
from signoff.integrations.framework import Translator, Turn
from signoff.protocol import (
    Chunk,
)

CONFIRMATION = "adk_request_confirmation"
_TEXT = "text"
"""The key of the text part open in the stream: ADK streams one at a time."""


class End:
    """The run ended (ADK's event stream has no event of its own for that)."""


class AdkTranslator(Translator):
    def __init__(
        self,
        turn: Turn,
        message_id: str,
        *,
        continued: dict[str, ToolCall],
        browser_tools: frozenset[str],
        signing_key: bytes = b"",
    ) -> None:
        super().__init__(turn, message_id, continued, signing_key=signing_key)
        self.browser_tools = browser_tools
        self.calls = dict(continued)
        self.confirmations: dict[str, str] = {}
        """ADK's confirmation call id for each deferred call, to answer it with."""
        self.answered: set[str] = set()
        """Calls whose result (not a placeholder) went out."""
        self.handed_over: set[str] = set()
        """Calls the gate allowed that now wait on the browser (their placeholder says so)."""
        self.usage: dict[str, int] = {}
        self.ended = False

    def translate(self, item: Event | End) -> list[Chunk]:
        match item:
            case End():
                return self._end()
            case Event() if item.content is not None and item.content.parts:
                return self._event(item, item.content.parts)
        return []

    @property
    def open_calls(self) -> dict[str, ToolCall]:
        """Browser calls left to the browser: made or continued here, and with no result yet."""
        return {
            call_id: call
            for call_id, call in self.calls.items()
            if call.tool in self.browser_tools and call_id not in self.answered and call_id not in self.asking
        }

    @property
    def asking(self) -> dict[str, str]:
        """The calls still waiting on a person at the end: asked, and with no result."""
        settled = self.answered | self.handed_over
        return {c: a.id for c, a in self.asked.items() if c not in settled}

    def _event(self, event: Event, parts: list[types.Part]) -> list[Chunk]:
        if event.usage_metadata is not None and not event.partial:
            self._count_usage(event.usage_metadata)
        chunks: list[Chunk] = []
        for part in parts:
            if part.text is not None and not part.thought:
                chunks += self._say(part.text, partial=bool(event.partial))
            elif (call := part.function_call) is not None and not event.partial:
                chunks += self._call(call, event.long_running_tool_ids or set())
            elif (response := part.function_response) is not None:
                chunks += self._result(response)
        return chunks

    def _say(self, text: str, *, partial: bool) -> list[Chunk]:
        """Streamed text comes in `partial` events, and the aggregate that follows repeats it, so it only
        ends the part; with nothing streamed before it, it carries the whole text."""
        chunks = self.open_step()
        if _TEXT not in self.writing.open:
            chunks += self.writing.start(_TEXT, "" if partial else text)
        return chunks + (self.writing.delta(_TEXT, text) if partial else self.writing.end(_TEXT))

    def _call(self, call: types.FunctionCall, long_running: set[str]) -> list[Chunk]:
        args = dict(call.args or {})
        if call.name == CONFIRMATION:
            original = args.get("originalFunctionCall") or {}
            self.confirmations[str(original.get("id"))] = call.id or ""
            return []
        made = self.calls[call.id or ""] = ToolCall(call.id or "", call.name or "", args)
        return self.called(made)

    def _result(self, response: types.FunctionResponse) -> list[Chunk]:
        self.responding = False
        call_id, result = response.id or "", dict(response.response or {})
        if result.get(MARK) == "browser":
            self.handed_over.add(call_id)
        if response.name == CONFIRMATION or (answer := outcome(result)) is None:
            return []
        if chunks := self.returned(call_id, answer):
            self.answered.add(call_id)
        return chunks

    def _end(self) -> list[Chunk]:
        self.ended = True
        waiting = bool(self.asking or self.open_calls)
        return self.finish(self.open_calls.values(), waiting=waiting, usage=self.usage)

    def _count_usage(self, usage: types.GenerateContentResponseUsageMetadata) -> None:
        for key, value in (
            ("inputTokens", usage.prompt_token_count),
            ("outputTokens", usage.candidates_token_count),
            ("totalTokens", usage.total_token_count),
        ):
            if value is not None:
                self.usage[key] = self.usage.get(key, 0) + value
