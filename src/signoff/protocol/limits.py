"""Bounds on a chat request that no real chat reaches, so that a hostile body costs the server little. The
1 MiB body cap is the HTTP layer's; these bound what fits inside it."""

from __future__ import annotations

from typing import Final

MAX_MESSAGES: Final = 10_000
MAX_PARTS: Final = 10_000
MAX_TEXT: Final = 256 * 1024
MAX_ID: Final = 256
MAX_DEPTH: Final = 64
"""Levels a body may nest (a chat request's own take five): deeper is a 400 before any of it is used, so
no code that walks a value (digests, the audit, the tool) meets a structure deep enough to exhaust it. Of a
chat request only the last message is used, so only it is held to this: reading all history cost more."""


_PAIRS = bytes.maketrans(b"[]{}", b"()()")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(text: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the arrays and objects of a valid JSON text nest more than `limit` levels, read from the
    text with bytes operations alone: escapes out, then what lies between quotes, then all but brackets;
    each pass then takes out every innermost pair, so `limit` passes empty a text no deeper than `limit`.
    Walking the decoded document node by node cost a client's whole history on every request."""
    outside = text.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2]
    brackets = b"".join(outside).translate(_PAIRS, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"()", b"")
    return bool(brackets)
