"""How the Redis ledger says what went wrong: its server's URL without the password, and the replies that
mean the server stores nothing now, which are `LedgerUnwritable` rather than an outage of the connection."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError

REFUSED: dict[type[RedisError], str] = {
    OutOfMemoryError: "out of memory (Redis OOM)",
    ReadOnlyError: "read-only",
}
"""What each refusal to write means: over `maxmemory` with nothing to evict, and a replica."""


def unwritable(exc: RedisError) -> str | None:
    """Why Redis stores nothing now, or None for any other failure: a refusal of `REFUSED`, or `MISCONF`
    (its last save to disk failed, and it takes no write until one works)."""
    if str(exc).startswith("MISCONF"):
        return "Redis can't save to disk (MISCONF)"
    return REFUSED.get(type(exc))


def safe(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
