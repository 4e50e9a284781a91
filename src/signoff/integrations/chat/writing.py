"""The text and reasoning parts of a streamed message, as every framework's translator writes them.

A framework streams a part under a key of its own (pydantic-ai a part's index in the model response, ADK
the one text it streams at a time). The chunks don't carry that key but an id, the message id and a count,
so that the ids of one reply never repeat; and each part ends once.
"""

from __future__ import annotations

from collections.abc import Hashable

from signoff.protocol import (
    Chunk,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    TextDelta,
    TextEnd,
    TextStart,
)


class Writing:
    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self.open: dict[Hashable, tuple[str, bool]] = {}
        """Each open part's id, and whether it is reasoning, by its key."""
        self._count = 0

    def start(self, key: Hashable, text: str = "", *, reasoning: bool = False) -> list[Chunk]:
        self._count += 1
        part_id = f"{self.message_id}-{self._count}"
        self.open[key] = part_id, reasoning
        return [ReasoningStart(id=part_id) if reasoning else TextStart(id=part_id), *self.delta(key, text)]

    def delta(self, key: Hashable, text: str) -> list[Chunk]:
        if not text or (part := self.open.get(key)) is None:
            return []
        part_id, reasoning = part
        return [ReasoningDelta(id=part_id, delta=text) if reasoning else TextDelta(id=part_id, delta=text)]

    def end(self, key: Hashable) -> list[Chunk]:
        if (part := self.open.pop(key, None)) is None:
            return []
        part_id, reasoning = part
        return [ReasoningEnd(id=part_id) if reasoning else TextEnd(id=part_id)]
