"""Refusals of requests nobody answers for, counted: one audit entry per source, kind of refusal and second.

An unauthenticated request costs its sender nothing, and an audit entry per refusal would let anyone grow
the audit without limit (1,000 bogus requests wrote 1,000 rows in 0.8 s). Counting per reason was not
enough: a reason can quote what the sender chose (an OIDC verifier names the token's key id, a refusal names
the chat or approval asked for), so 2,000 tokens with 2,000 key ids wrote 2,000 rows. Entries are keyed by
a `Kind`, from a small fixed vocabulary, and keep the first refusal of their second as the example (its
reason, and the paths asked for, cut to `EXAMPLE` characters). Refusals of authenticated principals stay
one entry each: someone answers for those.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from signoff.channels.review import hidden
from signoff.core.errors import LedgerUnavailable
from signoff.ledger.background import Background
from signoff.ledger.base import Ledger

log = logging.getLogger("signoff.server")
Kind = Literal[
    "bad-scheme",
    "unknown-token",
    "oidc-invalid",
    "bad-token",
    "no-credential",
    "forbidden",
    "unknown-approval",
    "another-chat",
    "another-owner",
    "cross-site",
    "foreign-host",
    "too-many-sockets",
    "bad-link",
    "bad-signature",
]
"""What was refused, in words an operator can count by; never anything the sender wrote."""
MAX_KEYS = 1000
"""Distinct sources and kinds kept per second; beyond, they are counted together as `client:*`."""
MAX_PATHS = 10
"""Distinct paths an entry names."""
EXAMPLE = 200
"""Characters kept of the example's reason, each path and each detail."""


class Refusals:
    def __init__(self, ledger: Ledger, *, interval: float = 1.0) -> None:
        self.ledger = ledger
        self.interval = interval
        self._counts: dict[tuple[str, str, str, Kind], int] = {}
        self._first: dict[tuple[str, str, str, Kind], dict[str, str]] = {}
        self._paths: dict[tuple[str, str, str, Kind], list[str]] = {}
        self._writer = Background("signoff-refusals")

    def note(
        self, action: str, subject: str, actor: str, kind: Kind, why: str, path: str, **detail: str
    ) -> None:
        """Count one refusal; its entry is written when its second ends, with the first refusal's `why` and
        `detail` as the example, and the paths asked for."""
        key = (action, subject, actor, kind)
        if key not in self._counts and len(self._counts) >= MAX_KEYS:
            key = (action, subject, "client:*", kind)
        self._counts[key] = self._counts.get(key, 0) + 1
        if key not in self._first:
            self._first[key] = {name: value[:EXAMPLE] for name, value in {**detail, "why": why}.items()}
        paths = self._paths.setdefault(key, [])
        if len(paths) < MAX_PATHS and (path := hidden(path)[:EXAMPLE]) not in paths:
            paths.append(path)
        self._writer.ensure(self._write)

    async def _write(self) -> None:
        """Write each second's counts once it ends, for as long as refusals keep coming (one noted while
        the last second's were written is in the next)."""
        while self._counts:
            await asyncio.sleep(self.interval)
            await self.flush()

    async def flush(self) -> None:
        counts, firsts, paths = self._counts, self._first, self._paths
        self._counts, self._first, self._paths = {}, {}, {}
        for key, count in counts.items():
            action, subject, actor, kind = key
            detail = {**firsts[key], "kind": kind, "count": count, "paths": paths[key]}
            try:
                await self.ledger.audit.record(action, subject, actor, **detail)
            except LedgerUnavailable:  # counted with the next second's, written once the ledger takes it
                self._counts[key] = self._counts.get(key, 0) + count
                self._first.setdefault(key, firsts[key])
                self._paths.setdefault(key, paths[key])
            except Exception:  # a bug loses a count, not the server
                log.exception("a count of refused requests could not be audited")

    async def close(self) -> None:
        await self._writer.stop()
        await self.flush()
