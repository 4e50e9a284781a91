"""A framework's history that is a JSON array of messages (pydantic-ai's), as the chat driver keeps it.

The ledger stores such a history as the chat's entries, a message each (`StoredChat.entries`), so a save
writes only the messages a reply added. A `History` holds each message's JSON as saved and parses the
messages only when they are first used: a request that needs only what the last step left open reads the
JSON, and one this worker saved last reuses the very messages its run ended with.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypeVar

import msgspec

from signoff.integrations.chat.state import ChatState
from signoff.ledger.records import Entries, StoredChat

M = TypeVar("M")

_split = msgspec.json.Decoder(list[msgspec.Raw]).decode
"""A JSON array's elements, each as its own JSON, without parsing them."""


@dataclass(frozen=True)
class JsonMessages(Generic[M]):
    """How a framework reads and writes its whole history as JSON."""

    parse: Callable[[bytes], list[M]]
    dump: Callable[[Sequence[M]], bytes]

    def read(self, stored: StoredChat | None, state: ChatState) -> History[M]:
        """The history as stored, each message's JSON cut from it without parsing it."""
        dumped = [bytes(piece) for piece in _split(bytes(state.history))]
        held = 0  # a parked history, or one saved before entries, may start with the entries or not
        for entry, stored_entry in zip(dumped, stored.entries if stored else (), strict=False):
            if entry != stored_entry:
                break
            held += 1
        return History(self, dumped, held)


@dataclass(slots=True)
class History(Generic[M]):
    """A chat's history: each message's own JSON as saved, and the messages, parsed on first use."""

    codec: JsonMessages[M]
    dumped: list[bytes]
    stored: int = 0
    """How many of its first messages the ledger holds as the chat's entries, byte for byte."""
    parsed: list[M] | None = None

    @property
    def messages(self) -> list[M]:
        if self.parsed is None:
            self.parsed = self.codec.parse(self.json())
        return self.parsed

    def json(self) -> bytes:
        """The whole history as JSON: what dumping every message at once gives."""
        return b"[" + b",".join(self.dumped) + b"]"

    def since(self, starts: Callable[[M], bool]) -> bytes:
        """The history from the last message that `starts` a step on, as JSON; the whole history while
        it is not parsed."""
        if (messages := self.parsed) is None:
            return self.json()
        last = next((i for i in range(len(messages) - 1, -1, -1) if starts(messages[i])), 0)
        return History(self.codec, self.dumped[last:]).json()

    def after(self, messages: list[M]) -> History[M]:
        """`messages`, as a run left them, with each one's JSON: the messages the run kept from this
        history (the very objects, a prefix of them: a run appends, a regenerated reply drops the end
        first) keep the JSON they were saved as, and the others are dumped together, in one call, and cut
        apart."""
        kept, known = 0, min(len(self.dumped), len(messages))
        while kept < known and messages[kept] is self.messages[kept]:
            kept += 1
        rest = messages[kept:]
        new = [bytes(raw) for raw in _split(self.codec.dump(rest))] if rest else []
        return History(self.codec, [*self.dumped[:kept], *new], min(kept, self.stored), messages)

    def entries(self) -> tuple[Entries, History[M]]:
        """What a save writes (only the entries the ledger lacks), and the history as it then holds it."""
        entries = Entries(self.stored, self.dumped[self.stored :])
        return entries, History(self.codec, self.dumped, len(self.dumped), self.parsed)

    def copy(self) -> History[M]:
        """A kept history as a new request's own: a run appends to the list of messages it is given."""
        parsed = None if self.parsed is None else list(self.parsed)
        return History(self.codec, self.dumped, self.stored, parsed)


class StoredHistory(Protocol):
    """A framework's history as the driver holds it: it knows how a save writes it."""

    def entries(self) -> tuple[Entries | None, Self]:
        """What a save writes of the history as the chat's entries (None: they stay as they are), and the
        history as the ledger holds it after."""

    def copy(self) -> Self:
        """A kept history as a new request's own (a run may change what it is given)."""


H = TypeVar("H", bound=StoredHistory)
"""A framework's history as the driver holds it between its codec's calls."""


@dataclass(frozen=True, slots=True)
class Kept(Generic[H]):
    version: int
    history: H
    state: ChatState


class Histories(Generic[H]):
    """The chats this process saved last, by chat and stored version, so the chat's next request here
    neither reads nor parses its history again: a request costs what is new, however long the chat. A
    chat another worker saved since has another version, and is read from its record. At most `size`
    chats are kept, the most recently used."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[str, Kept[H]] = OrderedDict()

    def keep(self, chat_id: str, version: int, history: H, state: ChatState) -> None:
        self._kept[chat_id] = Kept(version, history, state)
        self._kept.move_to_end(chat_id)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def held(self, chat_id: str) -> int | None:
        kept = self._kept.get(chat_id)
        return None if kept is None else kept.version

    def at(self, chat_id: str, stored: StoredChat | None) -> Kept[H] | None:
        """The chat as kept, when `stored` is the version kept."""
        kept = self._kept.get(chat_id)
        if stored is None or kept is None or kept.version != stored.version:
            return None
        self._kept.move_to_end(chat_id)
        return kept


@dataclass
class Loaded(Generic[H]):
    """A chat as read: its record (None for a new chat), its state with what it waits on, its history."""

    stored: StoredChat | None
    state: ChatState
    history: H
