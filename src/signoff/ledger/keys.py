"""Typed keys of the records a write reads first, and what the one transaction of a backend takes and gives.

Every write of every store is a pure step over the record its key names (see `ledger.committer`). A
backend's transaction loads the records of a batch's keys, the committer runs the steps, and the backend
stores the `Write`s, all or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from signoff.core.approval import Approval
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.records import Change


@dataclass(frozen=True, slots=True)
class ApprovalKey:
    id: str


@dataclass(frozen=True, slots=True)
class GrantKey:
    id: str


@dataclass(frozen=True, slots=True)
class TaskKey:
    id: str


@dataclass(frozen=True, slots=True)
class PrincipalKey:
    """A principal may be missing: the step that registers one gets None."""

    id: str


@dataclass(frozen=True, slots=True)
class AskedKey:
    """The approval asked for a call, if any: opening one inserts it unless the call was asked before."""

    chat_id: str
    call_id: str


@dataclass(frozen=True, slots=True)
class StartedKey:
    """The task started for a call, if any: starting one inserts it unless the call started one before."""

    chat_id: str
    call_id: str


Key = ApprovalKey | GrantKey | TaskKey | PrincipalKey | AskedKey | StartedKey
Record = Approval | Grant | Task | Registered
MUST_EXIST = (ApprovalKey, GrantKey, TaskKey)
"""Keys whose record a step changes: a missing one is `NotFound`, and the step never runs."""
INSERTS = (AskedKey, StartedKey)


def written(key: Key, change: Change) -> Record | None:
    """The record a step under `key` writes (a decision's change may hold a grant too, beside it)."""
    match key:
        case GrantKey():
            return change.grant
        case PrincipalKey():
            return change.principal
        case TaskKey() | StartedKey():
            return change.task
        case _:
            return change.approval


def own_key(key: AskedKey | StartedKey, record: Any) -> Key:
    """The key by the record's own id of what an insert key found or wrote."""
    return ApprovalKey(record.id) if isinstance(key, AskedKey) else TaskKey(record.id)


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
        return isinstance(self.key, INSERTS)
