"""What one process knows of its ledger's outages, and says of them once.

Everything that works on the ledger in the background (the sweep, the watcher, the outbox, the reply
recorder, task progress) retries while the ledger is away, each at its own pace: one line per failed attempt
filled the log with hundreds of tracebacks saying the same thing. So they all tell one `Outage` per ledger
instead, as the committer and the leases do for every write: it logs one line when the ledger goes away
("ledger unavailable: …", or "the ledger can't write: disk full") and one when it is back ("ledger back
after 78 s"), and `/readyz` answers from it at once.

A ledger that can't write may still answer reads, so an outage of writes ends only with a write that
stored something; any answer ends an outage of the ledger's server. A ledger that lost its data
(`LedgerWiped`) is said once too, even in the middle of an outage (a Redis restarted empty), and nothing
ends it: what answers is no longer the ledger this process served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from signoff.core.errors import LedgerUnavailable, LedgerUnwritable, LedgerWiped

log = logging.getLogger("signoff.ledger")


class Outage:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.problem: LedgerUnavailable | None = None
        """The last failure since the ledger went away; None while it answers."""
        self.since = 0.0
        """When it went away (on `clock`)."""
        self.unwritable = False
        """Whether writes failed in this outage: then only a write ends it."""

    @property
    def reason(self) -> str | None:
        """Why the ledger is away, as a line says it; None while it answers."""
        if self.problem is None:
            return None
        if isinstance(self.problem, LedgerUnwritable | LedgerWiped):
            return str(self.problem)
        return f"ledger unavailable: {self.problem}"

    @property
    def wiped(self) -> bool:
        """Whether the ledger lost its data, which no answer ends."""
        return isinstance(self.problem, LedgerWiped)

    def failed(self, exc: LedgerUnavailable) -> None:
        """A call to the ledger failed: said once when the ledger goes away, and again only if it then
        fails to write, having failed to answer, or turns out to have lost its data."""
        if self.wiped:
            return
        if isinstance(exc, LedgerWiped):
            self.problem, self.unwritable = exc, False
            log.error("%s", self.reason)
            return
        unwritable = isinstance(exc, LedgerUnwritable)
        said = self.problem is not None and (self.unwritable or not unwritable)
        if self.problem is None:
            self.since = self.clock()
        self.problem, self.unwritable = exc, self.unwritable or unwritable
        if not said:
            log.warning("%s", self.reason)

    def recovered(self, *, wrote: bool = False) -> None:
        """A call to the ledger succeeded; `wrote` says it stored something, which alone ends an outage in
        which writes failed."""
        if self.problem is None or self.wiped or (self.unwritable and not wrote):
            return
        self.problem, self.unwritable = None, False
        log.warning("ledger back after %.0f s", self.clock() - self.since)
