"""The ledger is its lifecycle and its parts (issue 32): a reader finds `ledger.approvals.open()` by the
concept's name, and no part grows into the 42-method object the ledger once was."""

from __future__ import annotations

import inspect

from signoff.ledger import MemoryLedger
from signoff.ledger.base import Ledger
from signoff.ledger.parts import Part

LIFECYCLE = {"start", "close", "upgrade"}
PARTS = {"approvals", "grants", "audit", "tasks", "chats", "principals", "outbox"}


def public(names: object) -> set[str]:
    return {name for name in dir(names) if not name.startswith("_")}


def test_a_ledger_names_only_its_lifecycle_and_its_parts() -> None:
    ledger = MemoryLedger()
    own = public(ledger)
    assert own == LIFECYCLE | PARTS
    assert len(own) <= 10
    assert public(Ledger) == LIFECYCLE  # the parts are made per ledger, over its one backend
    for name in PARTS:
        assert isinstance(getattr(ledger, name), Part), name


def test_each_part_has_at_most_twelve_methods() -> None:
    ledger = MemoryLedger()
    for name in sorted(PARTS):
        part = getattr(ledger, name)
        methods = {m for m in public(part) if inspect.ismethod(getattr(part, m))}
        assert 0 < len(methods) <= 12, (name, sorted(methods))


def test_the_parts_share_one_clock_and_one_writer() -> None:
    """Every part stamps its records with the ledger's clock, and all of them write through one committer:
    one audit chain, one transaction per write, whatever part it came from."""
    ledger = MemoryLedger(clock=lambda: 42.0)
    parts = [getattr(ledger, name) for name in sorted(PARTS)]
    assert {part.clock() for part in parts} == {42.0}
    assert len({id(part._shared.committer) for part in parts}) == 1
