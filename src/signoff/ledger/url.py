"""One URL picks the ledger everywhere: the library, the CLI and the server."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from signoff.core.audit import Keyring
from signoff.core.errors import LedgerUnavailable
from signoff.ledger.base import Ledger
from signoff.ledger.memory import MemoryLedger
from signoff.ledger.sqlite import SqliteLedger, Synchronous

DEFAULT_URL = "sqlite:///signoff.db"
ENV_VAR = "SIGNOFF_LEDGER"
TIMEOUT = 5.0
"""Seconds one call may wait on the ledger by default (`--ledger-timeout`): for a connection, for the server,
for another process's write lock. A ledger that does not answer in time is `LedgerUnavailable`, which a
server answers with a 503 at once rather than holding the request."""


def ledger_url(url: str | None = None) -> str:
    """The URL given, else `$SIGNOFF_LEDGER`, else `signoff.db` in the working directory."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_URL


class NoLedger(LedgerUnavailable):
    """The SQLite ledger a reader names has no database: opening it would make an empty one."""


def existing(url: str | None = None) -> str:
    """The URL `ledger_url` picks, once it names a ledger that may hold something: raises `NoLedger` for a
    SQLite file that is not there, so that `open_ledger(existing(url))` reads and never creates a database.
    A PostgreSQL or Redis server, and memory, are taken as they are: opening them makes no file."""
    url = ledger_url(url)
    parts = urlsplit(url)
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.scheme == "sqlite" and not parts.netloc and path and not Path(path).exists():
        shown = path if Path(path).is_absolute() or path.startswith(".") else f"./{path}"
        raise NoLedger(f"no ledger at {shown}")
    return url


def command_hint(args: str, url: str | None = None) -> str:
    """`signoff ARGS` as a person types it to reach the ledger `url` names (see `ledger_url`): with
    `--ledger URL` unless that is the default, since the process that prints a hint (an MCP gateway
    started by its client, a server) may hold a ledger the person's shell does not name. A password in the
    URL is left out, because a hint may be shown to a model or logged: the person's `~/.pgpass` or the
    like supplies it."""
    url = ledger_url(url)
    if url == DEFAULT_URL:
        return f"signoff {args}"
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit(parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host))
    return f"signoff {args} --ledger {shlex.quote(url)}"


def open_ledger(
    url: str | None = None, *, keyring: Keyring | None = None, timeout: float = TIMEOUT
) -> Ledger:
    """A ledger for `memory://`, `sqlite:///relative.db` / `sqlite:////absolute.db` or
    `postgresql://user@host:port/database[?schema=name]` or `redis://host:port/db[?prefix=name]`, not yet
    started, proving with `keyring` (by default the audit key file's: see `ledger.keyfile`).

    `timeout` bounds every wait on the ledger, from the one setting: SQLite's busy timeout, PostgreSQL's
    connect and pool timeouts, Redis's connect, pool and socket timeouts.

    Use it as `async with open_ledger(url) as ledger:`.
    """
    url = ledger_url(url)
    parts = urlsplit(url)
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    if parts.scheme == "memory":
        return MemoryLedger(keyring=keyring)
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc or not path:
            raise LedgerUnavailable(
                f"bad SQLite ledger URL {url!r}: use sqlite:///relative.db or sqlite:////abs.db"
            )
        synchronous = options.pop("synchronous", "normal")
        if synchronous not in ("normal", "full"):
            raise LedgerUnavailable(f"bad SQLite ledger URL {url!r}: synchronous must be normal or full")
        if options:
            raise LedgerUnavailable(f"bad SQLite ledger URL {url!r}: unknown option {next(iter(options))!r}")
        mode: Synchronous = "full" if synchronous == "full" else "normal"
        return SqliteLedger(path, synchronous=mode, keyring=keyring, busy_timeout=timeout)
    if parts.scheme in ("postgresql", "postgres"):
        return _postgres(url, options, keyring, timeout)
    if parts.scheme in ("redis", "rediss"):
        return _redis(url, options, keyring, timeout)
    raise LedgerUnavailable(
        f"unsupported ledger URL {url!r}: expected memory://, sqlite:///path, postgresql://host/database"
        " or redis://host:port/db"
    )


def _postgres(url: str, options: dict[str, str], keyring: Keyring | None, timeout: float) -> Ledger:
    try:
        from signoff.ledger.postgres import PostgresLedger
    except ImportError as exc:  # an optional extra: say how to get it
        raise LedgerUnavailable(
            f"the PostgreSQL ledger needs psycopg: pip install 'signoff[postgres]' ({exc})"
        ) from None
    schema = options.pop("schema", "signoff")
    dsn = urlunsplit(urlsplit(url)._replace(query=urlencode(options)))  # the rest is libpq's to read
    return PostgresLedger(dsn, schema=schema, keyring=keyring, connect_timeout=timeout, pool_timeout=timeout)


def _redis(url: str, options: dict[str, str], keyring: Keyring | None, timeout: float) -> Ledger:
    try:
        from signoff.ledger.redis import RedisLedger
    except ImportError as exc:
        raise LedgerUnavailable(
            f"the Redis ledger needs redis-py: pip install 'signoff[redis]' ({exc})"
        ) from None
    prefix = options.pop("prefix", "signoff")
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if not prefix or (path and not path.isdigit()):
        raise LedgerUnavailable(
            f"bad Redis ledger URL {url!r}: use redis://host:port/db-number[?prefix=name]"
        )
    if options:
        raise LedgerUnavailable(f"bad Redis ledger URL {url!r}: unknown option {next(iter(options))!r}")
    return RedisLedger(
        urlunsplit(parts._replace(query="")), prefix=prefix, keyring=keyring,
        connect_timeout=timeout, pool_timeout=timeout, socket_timeout=timeout,
    )  # fmt: skip
