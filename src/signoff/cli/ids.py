"""Ids as people type and read them: any unique prefix names a record, and a table on a terminal shows each
id as its shortest unique prefix, so what a person copies from a table is what a command takes.

Prefixes are matched by listing every id of the kind and filtering, after a point read for a whole id.
That is fine while a ledger holds thousands of records of a kind; a store's own prefix query is the step
after it, with no change to what a person types.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from signoff.cli.common import terminal
from signoff.core.errors import NotFound, SignoffError
from signoff.ledger import Ledger

SHORTEST = 4
"""Characters after the tag that a shown prefix has at least: a prefix of one or two characters would
stop being unique after a few more records, and a person who copied it would be refused."""
NAMED = 5
"""Candidates an ambiguous prefix names, with how many more there are."""


class Identified(Protocol):
    """An approval, grant, task or notice: each has its id."""

    @property
    def id(self) -> str: ...


class AmbiguousId(SignoffError):
    """A prefix that begins more than one id of its kind: nothing is done to any of them."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of id: what a person calls it, its tag (`apr_`), and how the ledger lists them."""

    name: str
    tag: str
    every: Callable[[Ledger], Awaitable[list[str]]]
    """Every id of the kind in the ledger."""
    holds: Callable[[Ledger, str], Awaitable[bool]] | None = None
    """Whether the ledger holds this whole id, where one point read tells: a script that gives whole ids
    then never waits for a list."""

    async def resolve(self, ledger: Ledger, given: str) -> str:
        """The id `given` names: itself, or the one id it begins. A prefix must go past the tag, so an
        empty `$ID` in a script names nothing rather than the only approval there is."""
        if self.holds is not None and await self.holds(ledger, given):
            return given
        found = [i for i in await self.every(ledger) if i.startswith(given)] if given[len(self.tag) :] else []
        if len(found) == 1:
            return found[0]
        if not found:
            raise NotFound(f"no {self.name} {given or repr(given)}")
        more = f" and {len(found) - NAMED} more" if len(found) > NAMED else ""
        raise AmbiguousId(
            f"{self.name} {given} is ambiguous: it begins {', '.join(sorted(found)[:NAMED])}{more};"
            " give more of the id"
        )

    async def shown(self, ledger: Ledger) -> Callable[[str], str]:
        """How a table shows this kind's ids: whole when stdout is not a terminal (a script reads them),
        else as their shortest unique prefixes among every id of the kind, which `resolve` takes back."""
        if not terminal():
            return str
        short = prefixes(await self.every(ledger), self.tag)
        return lambda id_: short.get(id_, id_)


def prefixes(ids: Iterable[str], tag: str) -> dict[str, str]:
    """Each id's shortest prefix that begins no other of `ids`, with at least `SHORTEST` characters after
    `tag`. In sorted order an id shares the most with a neighbour, so only the neighbours are compared."""
    ordered = sorted(set(ids))
    short = {}
    for index, id_ in enumerate(ordered):
        neighbours = ordered[max(index - 1, 0) : index] + ordered[index + 1 : index + 2]
        shared = max((_shared(id_, other) for other in neighbours), default=0)
        short[id_] = id_[: max(shared + 1, len(tag) + SHORTEST)]
    return short


def _shared(one: str, other: str) -> int:
    """How many characters two ids share at their start."""
    pairs = zip(one, other, strict=False)
    return next((index for index, (a, b) in enumerate(pairs) if a != b), min(len(one), len(other)))


async def _ids(records: Awaitable[Sequence[Identified]]) -> list[str]:
    return [record.id for record in await records]


async def _approval(ledger: Ledger, given: str) -> bool:
    return bool(await ledger.approvals.many([given]))


async def _task(ledger: Ledger, given: str) -> bool:
    try:
        await ledger.tasks.get(given)
    except NotFound:
        return False
    return True


async def _notice(ledger: Ledger, given: str) -> bool:
    try:
        await ledger.outbox.get(given)
    except NotFound:
        return False
    return True


APPROVAL = Kind("approval", "apr_", lambda lg: _ids(lg.approvals.query()), _approval)
GRANT = Kind("grant", "grt_", lambda lg: _ids(lg.grants.query(active=False)))  # few: listed, no point read
TASK = Kind("task", "task_", lambda lg: _ids(lg.tasks.query()), _task)
NOTICE = Kind("notice", "msg_", lambda lg: _ids(lg.outbox.query()), _notice)
