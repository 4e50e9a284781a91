"""How the Redis ledger says what went wrong: its server's URL without the password, the replies that
mean the server stores nothing now, which are `LedgerUnwritable` rather than an outage of the connection,
a server that would forget everything on a restart, and a ledger that lost its data.

Each ledger holds an epoch marker (`{p}:epoch`), a random value written once, when its schema is made.
A process reads it when it starts, and its readiness probe reads it again twice a second, and every audited
write checks it in the same script: gone, or another value, means the keys were flushed or the server
restarted with nothing on disk, and what answers is no longer the ledger the process served
(`LedgerWiped`)."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit, urlunsplit

from redis import asyncio as aioredis
from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError, ResponseError

from signoff.core.errors import LedgerUnavailable

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


def new_epoch() -> str:
    """A ledger's epoch marker: random, so that a ledger made anew under the same prefix has another."""
    return secrets.token_hex(12)


def lost(url: str, prefix: str, found: object) -> str:
    """What `LedgerWiped` says of a ledger whose epoch marker is gone (`found` None) or another's."""
    where = f"{safe(url)} (prefix {prefix!r})"
    if found is None:
        what = "no longer holds the epoch marker it was made with: it was flushed, or restarted with nothing"
        what += " on disk"
    else:
        what = "holds another ledger's epoch marker: it was emptied, and made anew"
    return f"the Redis ledger lost its data: {where} {what}; every approval it held is gone"


async def persistence(url: str, within: float) -> str | None:
    """Why the server at `url` would forget everything on a restart, or None when it keeps its data on
    disk (an append-only file, or snapshots). A server that won't answer `CONFIG GET` (renamed or refused,
    as managed services do) can't be told apart from one that keeps nothing, so it is said to be one."""
    client = aioredis.Redis.from_url(url, socket_connect_timeout=within, socket_timeout=within)
    try:
        appendonly = (await client.config_get("appendonly")).get("appendonly")
        save = (await client.config_get("save")).get("save")
    except ResponseError as exc:
        why = f"does not answer CONFIG GET ({exc}), so whether it keeps anything on disk can't be told"
    except RedisError as exc:
        raise LedgerUnavailable(f"cannot reach Redis ledger {safe(url)}: {exc}") from exc
    else:
        if appendonly == "yes" or save:
            return None
        why = f'keeps nothing on disk (appendonly {appendonly or "no"}, save "")'
    finally:
        await client.aclose()
    return f"the Redis at {safe(url)} {why}"
