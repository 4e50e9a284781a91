"""The audit chain: every state change, hash-linked so that editing or deleting a row is detectable.

Entries are chained here, in the core, so every ledger backend produces byte-identical hashes and one
verifier serves them all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec

from signoff.core.call import normalize

GENESIS = "0" * 64


class AuditEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What happened, before the ledger gives it a place in the chain."""

    at: float
    actor: str
    action: str
    subject: str
    before: str | None = None
    after: str | None = None
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    seq: int
    at: float
    actor: str
    action: str
    subject: str
    before: str | None
    after: str | None
    detail: dict[str, Any]
    prev: str
    hash: str

    @property
    def head(self) -> Head:
        return (self.seq, self.hash)


def _hash(seq: int, event: AuditEvent, prev: str) -> str:
    """SHA-256 of the entry's canonical JSON. Only `detail` is free-form; the other fields have fixed types
    and are encoded as they are, which keeps hashing off the hot path of every decision."""
    body = {
        "seq": seq,
        "at": event.at,
        "actor": event.actor,
        "action": event.action,
        "subject": event.subject,
        "before": event.before,
        "after": event.after,
        "detail": normalize(event.detail),
        "prev": prev,
    }
    return hashlib.sha256(msgspec.json.encode(body, order="sorted")).hexdigest()


Head = tuple[int, str]
"""The (seq, hash) of the newest entry: all a ledger must read to append the next one."""

GENESIS_HEAD: Head = (0, GENESIS)


def chain(event: AuditEvent, head: Head) -> AuditEntry:
    """The entry that follows `head` for `event`."""
    seq, prev = head[0] + 1, head[1]
    return AuditEntry(
        seq=seq,
        at=event.at,
        actor=event.actor,
        action=event.action,
        subject=event.subject,
        before=event.before,
        after=event.after,
        detail=event.detail,
        prev=prev,
        hash=_hash(seq, event, prev),
    )


class BrokenLink(msgspec.Struct, frozen=True):
    """The first entry at which the chain no longer holds, and why."""

    seq: int
    problem: str


class ChainCheck:
    """Verifies a chain fed in order, a page at a time, so a ledger never holds the whole log in memory."""

    def __init__(self) -> None:
        self.count = 0
        self._head: Head = GENESIS_HEAD

    def feed(self, entries: Iterable[AuditEntry]) -> BrokenLink | None:
        for entry in entries:
            seq, prev = self._head[0] + 1, self._head[1]
            if entry.seq != seq:
                return BrokenLink(seq, f"entry {seq} is missing (the next one is {entry.seq})")
            if entry.prev != prev:
                return BrokenLink(seq, "its prev hash does not match the entry before it")
            event = AuditEvent(
                at=entry.at,
                actor=entry.actor,
                action=entry.action,
                subject=entry.subject,
                before=entry.before,
                after=entry.after,
                detail=entry.detail,
            )
            if _hash(seq, event, prev) != entry.hash:
                return BrokenLink(seq, "its content does not match its hash (edited)")
            self._head, self.count = entry.head, self.count + 1
        return None


def verify(entries: Iterable[AuditEntry]) -> tuple[int, BrokenLink | None]:
    """How many entries held, and the first broken link if any."""
    check = ChainCheck()
    broken = check.feed(entries)
    return check.count, broken
