"""Typed keys of the records a write reads first, and what the one transaction of a backend takes and gives.

Every write of every store is a pure step over the record its key names (see `ledger.committer`). A
backend's transaction loads the records of a batch's keys, the committer runs the steps, and the backend
stores the `Write`s, all or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from signoff.core.approval import Approval
from signoff.core.errors import NotFound
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.records import Change

Field = Literal["approval", "grant", "task", "principal"]


@dataclass(frozen=True, slots=True)
class _Key:
    """What the committer needs to know of a key, as class attributes: it asks them of every write, and an
    attribute costs less than a match."""

    field: ClassVar[Field]
    """The `Change` field that holds the record a step under this key writes (a decision's change may hold
    a grant too, beside it)."""
    must_exist: ClassVar[bool] = False
    """A step changes the record: a missing one is `NotFound`, and the step never runs."""
    inserts: ClassVar[bool] = False
    """A step inserts the record unless one is found (the call was asked or started before)."""

    def missing(self) -> NotFound:
        return NotFound(f"no {self.field} {getattr(self, 'id', '')}")


@dataclass(frozen=True, slots=True)
class ApprovalKey(_Key):
    field = "approval"
    must_exist = True
    id: str


@dataclass(frozen=True, slots=True)
class GrantKey(_Key):
    field = "grant"
    must_exist = True
    id: str


@dataclass(frozen=True, slots=True)
class TaskKey(_Key):
    field = "task"
    must_exist = True
    id: str


@dataclass(frozen=True, slots=True)
class PrincipalKey(_Key):
    """A principal may be missing: the step that registers one gets None."""

    field = "principal"
    id: str


@dataclass(frozen=True, slots=True)
class AskedKey(_Key):
    """The approval asked for a call, if any: opening one inserts it unless the call was asked before."""

    field = "approval"
    inserts = True
    chat_id: str
    call_id: str


@dataclass(frozen=True, slots=True)
class StartedKey(_Key):
    """The task started for a call, if any: starting one inserts it unless the call started one before."""

    field = "task"
    inserts = True
    chat_id: str
    call_id: str


Key = ApprovalKey | GrantKey | TaskKey | PrincipalKey | AskedKey | StartedKey
Record = Approval | Grant | Task | Registered


def written(key: Key, change: Change) -> Record | None:
    """The record a step under `key` writes."""
    record: Record | None = getattr(change, key.field)
    return record


def own_key(key: Key, record: Any) -> Key:
    """The key by the record's own id of what an insert key found or wrote."""
    return ApprovalKey(record.id) if key.field == "approval" else TaskKey(record.id)


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as loaded, with its revision: how many times it was written, or a task's change number (a
    backend without revisions says 0)."""

    record: Any
    rev: int


@dataclass(frozen=True, slots=True)
class Write:
    """One change to store. `key` and `rev` name the record it replaces and the revision it was computed
    from (None for a new record, or for audit events alone), so an optimistic backend can check that
    nothing moved."""

    change: Change
    key: Key | None = None
    rev: int | None = None

    @property
    def new(self) -> bool:
        return self.key is not None and self.key.inserts
