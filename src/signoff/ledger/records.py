"""What the ledger's stores read and write beside the core's own records: a change to store, and the shapes
of chats, reply logs, progress reports and task queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from signoff.core.approval import Approval
from signoff.core.audit import AuditEvent
from signoff.core.grant import Grant
from signoff.core.notice import Notice
from signoff.core.principal import Registered
from signoff.core.task import Task, TaskState

Clock = Callable[[], float]
TaskStep = Callable[[Task], tuple[Task, AuditEvent | None]]


@dataclass(frozen=True, slots=True)
class Change:
    """What one atomic step writes: the new approval, grant, task or principal, the audit events that
    record it, and the notices its channels are to hear of it (the outbox's rows, in the same write)."""

    approval: Approval | None = None
    grant: Grant | None = None
    task: Task | None = None
    principal: Registered | None = None
    events: tuple[AuditEvent, ...] = ()
    notices: tuple[Notice, ...] = ()


@dataclass(frozen=True, slots=True)
class Progress:
    """How far one running task got: written as it is, replacing the last report."""

    task_id: str
    progress: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """Which tasks to read: of one chat, in some states, whose heartbeat is older than `beat_before`; or
    those changed after change number `after_seq`. Oldest first, or in change order with `after_seq`."""

    chat_id: str | None = None
    states: tuple[TaskState, ...] | None = None
    after_seq: int | None = None
    beat_before: float | None = None
    limit: int | None = None

    def select(self, tasks: Iterable[Task]) -> list[Task]:
        """The query run in Python, for a backend whose store cannot run all of it."""
        found = [
            t
            for t in tasks
            if (self.chat_id is None or t.chat_id == self.chat_id)
            and (self.states is None or t.state in self.states)
            and (self.after_seq is None or t.seq > self.after_seq)
            and (self.beat_before is None or t.heartbeat < self.beat_before)
        ]
        found.sort(key=(lambda t: t.seq) if self.after_seq is not None else (lambda t: t.created_at))
        return found[: self.limit]


@dataclass(frozen=True, slots=True)
class ReplyFrames:
    """What one chat's reply adds to its log: entries numbered `start + 1…` (each one chunk, opaque here),
    and whether it ended. With `meta`, the reply begins here: the chat's log starts over, the previous
    reply's entries dropped. No entries and no end is a heartbeat."""

    chat_id: str
    reply: str
    start: int = 0
    frames: Sequence[bytes] = ()
    done: bool = False
    meta: bytes | None = None


@dataclass(frozen=True, slots=True)
class ReplyLog:
    """The latest reply of a chat as its worker streams it, for readers on other workers: `meta` is the
    worker's own description of the reply (opaque here), `frames` the entries after the ones already
    read."""

    reply: str
    meta: bytes
    done: bool
    updated_at: float
    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class StoredChat:
    """A chat's server-side state, opaque to the ledger. `version` counts saves, so a writer that read an
    older version cannot overwrite a newer one. `owner` is the principal that started the chat, set by its
    first save and never changed (None for a chat saved before chats had owners)."""

    chat_id: str
    version: int
    state: bytes
    updated_at: float
    owner: str | None = None
    entries: Sequence[bytes] = ()
    """The chat's entries, in order: a part of its state that grows one entry at a time (a framework's
    history, a message each), stored apart so that a save writes only what changed. As loaded; none when
    the state was left out (see `ChatStore.load`), nor in a record as saved."""


@dataclass(frozen=True, slots=True)
class Entries:
    """What a save does to a chat's entries: the first `kept` stay as they are, `added` follow them, and
    any others are gone. A history grows at its end, so a save's cost is what it adds, not what it holds."""

    kept: int
    added: Sequence[bytes] = ()


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as loaded, with its revision: how many times it was written, or a task's change number (a
    backend without revisions says 0)."""

    record: Any
    rev: int
