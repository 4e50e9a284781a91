"""Refusals of unauthenticated requests, counted: one audit entry per source, reason and second.

An unauthenticated request costs its sender nothing, and an audit entry per refusal would let anyone grow
the audit without limit (1,000 bogus requests wrote 1,000 rows in 0.8 s). Refusals of authenticated
principals stay one entry each: someone answers for those.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from signoff.ledger.base import Ledger

log = logging.getLogger("signoff.server")
MAX_KEYS = 1000
"""Distinct sources and reasons kept per second; beyond, they are counted together as `client:*`."""
MAX_PATHS = 10
"""Distinct paths an entry names."""


class Refusals:
    def __init__(self, ledger: Ledger, *, interval: float = 1.0) -> None:
        self.ledger = ledger
        self.interval = interval
        self._counts: dict[tuple[str, str, str, str], int] = {}
        self._first: dict[tuple[str, str, str, str], dict[str, object]] = {}
        self._paths: dict[tuple[str, str, str, str], list[str]] = {}
        self._writer: asyncio.Task[None] | None = None

    def note(self, action: str, subject: str, actor: str, why: str, path: str, **detail: object) -> None:
        """Count one refusal; its entry is written when its second ends, naming the paths asked for."""
        key = (action, subject, actor, why)
        if key not in self._counts and len(self._counts) >= MAX_KEYS:
            key = (action, subject, "client:*", why)
        self._counts[key] = self._counts.get(key, 0) + 1
        self._first.setdefault(key, detail)
        paths = self._paths.setdefault(key, [])
        if path not in paths and len(paths) < MAX_PATHS:
            paths.append(path)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_after(self.interval))

    async def _write_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.flush()

    async def flush(self) -> None:
        counts, firsts, paths = self._counts, self._first, self._paths
        self._counts, self._first, self._paths = {}, {}, {}
        for key, count in counts.items():
            action, subject, actor, why = key
            detail = {**firsts[key], "why": why, "count": count, "paths": paths[key]}
            try:
                await self.ledger.record(action, subject, actor, **detail)
            except Exception:  # a ledger hiccup loses a count, not the server
                log.exception("a count of refused requests could not be audited")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        await self.flush()
