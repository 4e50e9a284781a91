"""Which approval an MCP tool call is, when MCP gives a call no id.

A call's identity is its principal, its tool, its arguments' digest and the conversation its client names
in `_meta` (`io.signoff/conversation`): the same call made again while its approval lives must find that
approval, so a client that retries, or asks again after a person decided out of band, never opens a
duplicate. Yet a new identical call after the first one *ran* is a new request, and asks anew.

So each identity counts generations, `<base>.<n>`: the call of generation `n` is the ledger's call id, and the
count moves on once that call has run, or once a refusal of it has been told to its caller. A refusal stays
the answer to identical calls until one of them hears it (the person's "no" is not lost to a client that
polls), and then the next identical call is a new question. The counts are kept as a chat's state in the
ledger (one chat per principal and conversation), so every gateway worker reads the same ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from signoff.core.call import ToolCall
from signoff.core.errors import StaleChat
from signoff.ledger import Ledger

CONVERSATION = "io.signoff/conversation"
"""The `_meta` key under which a client names its conversation: grants remembered for a session hold
within it, and identical calls in two conversations are two questions."""

_MAX_CONVERSATION = 200
_PREFIX = "mcp:"


def _chat(principal: str) -> str:
    """The chat a principal's calls are asked in, named after it once, as the inbox shows it: `mcp:alice`
    for a token's `alice`, and `mcp:<os user>` for the stdio gateway's own principal, whose id says
    `mcp:` already."""
    return principal if principal.startswith(_PREFIX) else _PREFIX + principal


class _Counts(msgspec.Struct, omit_defaults=True):
    mcp_calls: dict[str, int] = msgspec.field(default_factory=dict)
    """Each identity's current generation, by its base (a chat's other state fields never collide)."""


_decode = msgspec.json.Decoder(_Counts).decode
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class CallIdentity:
    chat_id: str
    base: str
    tool: str
    args: dict[str, Any]

    @classmethod
    def of(
        cls, principal: str, tool: str, args: dict[str, Any], meta: Mapping[str, Any] | None
    ) -> CallIdentity:
        """Raises `InvalidCall` for arguments JSON cannot say (the digest is over their JSON)."""
        digest = ToolCall("identity", tool, args).digest
        conversation = _conversation(meta)
        within = f"/{conversation}" if conversation else ""
        # the principal's id itself, never its chat's name, so that two principals' calls never meet: the
        # stdio `mcp:alice` and a token's `alice` share a chat's name, never a call
        seed = f"{_PREFIX}{principal}{within}\0{tool}\0{digest}".encode()
        return cls(_chat(principal) + within, "mcp_" + hashlib.sha256(seed).hexdigest()[:24], tool, args)

    def call(self, generation: int) -> ToolCall:
        return ToolCall(f"{self.base}.{generation}", self.tool, self.args)


class Generations:
    """The identities' generation counts, in the ledger's chats."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def current(self, identity: CallIdentity) -> int:
        stored = await self.ledger.chats.load(identity.chat_id)
        return _read(stored.state).mcp_calls.get(identity.base, 0) if stored else 0

    async def advance(self, identity: CallIdentity, past: int, owner: str) -> None:
        """Move the count past generation `past`, unless a racing worker already did; a save that loses a
        race is read again and retried, so no worker's step is lost."""
        while True:
            stored = await self.ledger.chats.load(identity.chat_id)
            counts = _read(stored.state) if stored else _Counts()
            if counts.mcp_calls.get(identity.base, 0) > past:
                return
            counts.mcp_calls[identity.base] = past + 1
            version = stored.version if stored else 0
            try:
                await self.ledger.chats.save(identity.chat_id, _encode(counts), version=version, owner=owner)
            except StaleChat:
                continue
            return


def _read(state: bytes) -> _Counts:
    try:
        return _decode(state) if state else _Counts()
    except msgspec.DecodeError:  # another kind of chat under this id: it holds no counts
        return _Counts()


def _conversation(meta: Mapping[str, Any] | None) -> str:
    found = (meta or {}).get(CONVERSATION)
    if not isinstance(found, str) or not found:
        return ""
    if len(found) > _MAX_CONVERSATION or not found.isprintable():
        return "h" + hashlib.sha256(found.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return found
