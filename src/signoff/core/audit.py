"""The audit chain: every state change, linked by a keyed hash, so that no row can be edited, inserted or
deleted unnoticed by someone who can write the database but lacks the key.

Each entry's hash is an HMAC-SHA256, under the audit key, of the entry's canonical JSON, which includes the
hash of the entry before it. A plain hash chain proves nothing against someone who can write the rows: they
recompute every later hash. The key lives outside the database (`ledger.keyfile`), so they can't.

What a chain can't show is its own end: deleting the newest entries leaves a shorter chain that still
holds. A **checkpoint** (the entry count and the head hash, signed with the same key) kept apart from the
database shows that: `ChainCheck` refuses a chain shorter than a checkpoint or differing from it up to it.

The key is HMAC's, not a signature's (Ed25519, say): the chain is written and checked by the operator's own
processes, which hold the key anyway, and HMAC is in the standard library and costs what SHA-256 costs, on
the path of every decision. Keys rotate: each hash names its key by a short id (`<kid>:<mac>`), so entries
written under an old key still verify while the keyring holds it.

Entries are chained here, in the core, so every ledger backend produces byte-identical hashes and one
verifier serves them all.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from signoff.core.call import normalize
from signoff.core.errors import WeakKey

TIMEOUT_ACTOR = "signoff:timeout"
"""The actor of what a deadline settles: an expiry, or the approval a rule that allows on timeout makes."""

GENESIS = "0" * 64


@functools.lru_cache(maxsize=64)
def _keyed(secret: bytes) -> hmac.HMAC:
    """The HMAC state after the key, copied for each MAC: keying costs as much as hashing a few hundred
    bytes, and every decision makes or checks several MACs (its approval's seal, its own, its audit
    entry's)."""
    return hmac.new(secret, digestmod=hashlib.sha256)


@functools.lru_cache(maxsize=64)
def _key_id(secret: bytes) -> str:
    """Cached: every MAC carries it, and a ledger has a handful of keys."""
    return hashlib.sha256(b"signoff audit key id\n" + secret).hexdigest()[:12]


class AuditKey(msgspec.Struct, frozen=True):
    """One secret, and the short id its MACs carry so a verifier knows which key made them."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) < 16:
            raise WeakKey("an audit key needs at least 16 bytes (128 bits)")

    @property
    def id(self) -> str:
        return _key_id(self.secret)

    def mac(self, body: bytes) -> str:
        """`<kid>:<hex HMAC-SHA256>` of `body`."""
        keyed = _keyed(self.secret).copy()
        keyed.update(body)
        return f"{self.id}:{keyed.hexdigest()}"

    @classmethod
    def generate(cls) -> AuditKey:
        return cls(secrets.token_bytes(32))


class Keyring(msgspec.Struct, frozen=True):
    """The key new MACs are made with, and every key old ones may have been made with."""

    current: AuditKey
    older: tuple[AuditKey, ...] = ()

    def derived(self, purpose: str) -> tuple[bytes, ...]:
        """A secret for `purpose` from each key, the current key's first. What a server hands its clients
        (session cookies, approval signatures, email links) is keyed so, never from the admin token, which
        a person chooses; the audit keys are random, and every worker of a ledger reads the same key file."""
        label = f"signoff {purpose}".encode()
        return tuple(hmac.digest(key.secret, label, "sha256") for key in (self.current, *self.older))

    def verifies(self, body: bytes, mac: str) -> bool:
        """Whether `mac` is a MAC of `body` under one of these keys."""
        kid, _, _ = mac.partition(":")
        key = next((k for k in (self.current, *self.older) if k.id == kid), None)
        return key is not None and hmac.compare_digest(key.mac(body), mac)

    def knows(self, mac: str) -> bool:
        kid = mac.partition(":")[0]
        return any(k.id == kid for k in (self.current, *self.older))

    @classmethod
    def ephemeral(cls) -> Keyring:
        """A key that lives as long as the process: for a ledger nobody else ever reads (memory)."""
        return cls(AuditKey.generate())


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

    @property
    def event(self) -> AuditEvent:
        return AuditEvent(**{name: getattr(self, name) for name in AuditEvent.__struct_fields__})


def _body(seq: int, event: AuditEvent, prev: str) -> bytes:
    """The entry's canonical JSON. Only `detail` is free-form; the other fields have fixed types and are
    encoded as they are, which keeps hashing off the hot path of every decision."""
    body = msgspec.structs.asdict(event)
    body.update(seq=seq, detail=normalize(event.detail), prev=prev)
    return msgspec.json.encode(body, order="sorted")


Head = tuple[int, str]
"""The (seq, hash) of the newest entry: all a ledger must read to append the next one."""

GENESIS_HEAD: Head = (0, GENESIS)


def chain(event: AuditEvent, head: Head, key: AuditKey) -> AuditEntry:
    """The entry that follows `head` for `event`, its hash made with `key`."""
    seq, prev = head[0] + 1, head[1]
    fields = msgspec.structs.asdict(event)
    return AuditEntry(**fields, seq=seq, prev=prev, hash=key.mac(_body(seq, event, prev)))


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """How long the chain was, and its head then, signed: kept outside the database, it exposes a chain
    cut short or rewritten up to there. One line of JSON."""

    count: int
    head: str
    at: float
    mac: str = ""

    def _body(self) -> bytes:
        return msgspec.json.encode({"count": self.count, "head": self.head, "at": self.at}, order="sorted")

    def signed(self, key: AuditKey) -> Checkpoint:
        return msgspec.structs.replace(self, mac=key.mac(self._body()))

    def authentic(self, keyring: Keyring) -> bool:
        return keyring.verifies(self._body(), self.mac)


class BrokenLink(msgspec.Struct, frozen=True):
    """The first entry at which the chain no longer holds, and why."""

    seq: int
    problem: str


class ChainCheck:
    """Verifies a chain fed in order, a page at a time, so a ledger never holds the whole log in memory;
    and that it holds every checkpoint given."""

    def __init__(self, keyring: Keyring, checkpoints: Sequence[Checkpoint] = ()) -> None:
        self.keyring = keyring
        self.count = 0
        self._head: Head = GENESIS_HEAD
        self._checkpoints = {c.count: c for c in checkpoints}

    def feed(self, entries: Iterable[AuditEntry]) -> BrokenLink | None:
        for entry in entries:
            seq, prev = self._head[0] + 1, self._head[1]
            if entry.seq != seq:
                return BrokenLink(seq, f"entry {seq} is missing (the next one is {entry.seq})")
            if entry.prev != prev:
                return BrokenLink(seq, "its prev hash does not match the entry before it")
            if not self.keyring.knows(entry.hash):
                return BrokenLink(seq, "its hash was made with no key this keyring holds")
            if not self.keyring.verifies(_body(seq, entry.event, prev), entry.hash):
                return BrokenLink(seq, "its content does not match its hash (edited)")
            if (mark := self._checkpoints.get(seq)) is not None and mark.head != entry.hash:
                return BrokenLink(seq, f"it differs from the checkpoint of {mark.count} entries")
            self._head, self.count = entry.head, self.count + 1
        return None

    def end(self) -> BrokenLink | None:
        """After the last entry: a checkpoint beyond the chain's end means entries were cut off."""
        longest = max(self._checkpoints, default=0)
        if longest > self.count:
            return BrokenLink(self.count + 1, f"the chain ends at {self.count}, a checkpoint saw {longest}")
        return None
