"""Server-sent-event framing of the UI message stream, as the client's `parseJsonEventStream` reads it."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

DONE = b"data: [DONE]\n\n"
"""The event that ends a reply's stream."""
KEEPALIVE = b": keep-alive\n\n"
"""A comment, which every SSE parser skips: sent while a stream is quiet, so proxies keep it open."""

HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "x-vercel-ai-ui-message-stream": "v1",
        "x-accel-buffering": "no",
    }
)
"""The ai package's UI_MESSAGE_STREAM_HEADERS, minus `connection: keep-alive`: that header is hop-by-hop,
belongs to the HTTP server, and is illegal in HTTP/2. `x-accel-buffering: no` stops nginx from holding the
stream back, which would freeze a blocking approval."""


def frame(data: bytes) -> bytes:
    """One event: encoded JSON never holds a raw newline, so a single `data:` line carries the chunk."""
    return b"data: " + data + b"\n\n"
