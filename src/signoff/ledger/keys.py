"""Typed keys of the records a read or a write names.

Every write of every store is a pure step over the record its key names (see `ledger.committer`). A
backend's transaction loads the records of a batch's keys, the committer runs the steps, and the backend
stores their writes, all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar

from signoff.core.approval import Approval
from signoff.core.errors import NotFound
from signoff.core.grant import Grant
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.records import Change, Stored

Field = Literal["approval", "grant", "task", "principal"]


@dataclass(frozen=True, slots=True)
class _Key:
    """What the committer needs to know of a key, as class attributes given where each key is declared:
    it asks them of every write, and an attribute costs less than a match."""

    field: ClassVar[Field]
    """The `Change` field that holds the record a step under this key writes (a decision's change may hold
    a grant too, beside it)."""
    must_exist: ClassVar[bool] = False
    """A step changes the record: a missing one is `NotFound`, and the step never runs."""
    inserts: ClassVar[bool] = False
    """A step inserts the record unless one is found (the call was asked or started before)."""

    def __init_subclass__(cls, *, field: Field | None = None, must_exist: bool = False) -> None:
        if field is not None:  # a dataclass remade with slots keeps what its first making set
            cls.field, cls.must_exist = field, must_exist

    def missing(self) -> NotFound:
        return NotFound(f"no {self.field} {getattr(self, 'id', '')}")


@dataclass(frozen=True, slots=True)
class _ById(_Key):
    id: str


@dataclass(frozen=True, slots=True)
class _ByCall(_Key):
    """The record of a call, if any: a step under such a key inserts it unless the call has one already."""

    inserts = True
    chat_id: str
    call_id: str


class ApprovalKey(_ById, field="approval", must_exist=True): ...


class GrantKey(_ById, field="grant", must_exist=True): ...


class TaskKey(_ById, field="task", must_exist=True): ...


class PrincipalKey(_ById, field="principal"):
    """A principal may be missing: the step that registers one gets None."""


class AskedKey(_ByCall, field="approval"):
    """The approval asked for a call: opening one inserts it unless the call was asked before."""


class StartedKey(_ByCall, field="task"):
    """The task started for a call: starting one inserts it unless the call started one before."""


R = TypeVar("R")
Key = ApprovalKey | GrantKey | TaskKey | PrincipalKey | AskedKey | StartedKey
Record = Approval | Grant | Task | Registered


def written(key: Key, change: Change) -> Record | None:
    """The record a step under `key` writes."""
    record: Record | None = getattr(change, key.field)
    return record


def found(record: R | None, key: Key) -> R:
    """`record`, read by `key`; `NotFound` naming the key when there is none."""
    if record is None:
        raise key.missing()
    return record


def own_key(key: Key, record: Any) -> Key:
    """The key by the record's own id of what an insert key found or wrote."""
    return ApprovalKey(record.id) if key.field == "approval" else TaskKey(record.id)


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


Apply: TypeAlias = "Callable[[dict[Key, Stored]], list[Write]]"
"""The steps of a batch, run on the records it loaded: pure, so a backend may run it again."""
