"""What a process does for its ledger beside answering requests: deadlines applied on time, follow-ups
(reminders, escalations, deadline warnings) taken, the tasks of dead workers failed, the outbox's notices
delivered, and signed audit checkpoints appended to a file outside the database.

Every `signoff serve` worker runs it, and so does `signoff mcp-gateway` over stdio, which may be the only
process on its ledger: one module, so what one of them applies the other applies too. Each step of the
sweep is one the ledger itself leases to one worker at a time (`expire_due`, `follow_up_due`), so every
worker may run it. A process adds its own steps (a server's replies and sockets) through `steps`.

A sweep that fails is tried again at the next one: a hiccup must not stop deadlines for good. An outage of
the ledger is told to its `Outage`, which says it once, not once a second; a traceback is for a bug.

It also keeps the process's readiness current: a probe of the ledger every `PROBE_EVERY` seconds, bounded by
`PROBE_WITHIN`, and what every write tells the ledger's outage, so that `/readyz` answers at once (`unready`)
and turns ready again within a probe or two of the ledger's return.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry

from signoff.channels.config import Channels
from signoff.channels.delivery import Deliverer
from signoff.channels.lines import lines_for
from signoff.channels.webhook import Http
from signoff.core.errors import LedgerUnavailable
from signoff.ledger.background import Background
from signoff.ledger.base import Ledger, outage_of, probe
from signoff.ledger.evidence import append_checkpoint

log = logging.getLogger("signoff.upkeep")

Step = Callable[[], Awaitable[object]]
"""One more thing a process's sweep does each time (a server's replies and sockets)."""
PROBE_EVERY = 0.5
"""Seconds between the readiness probe's looks at the ledger."""
PROBE_WITHIN = 1.0
"""Seconds the ledger has to answer the probe: one that takes longer can't serve requests in time either."""


class Upkeep:
    def __init__(
        self,
        ledger: Ledger,
        channels: Channels | None,
        public_url: str,
        *,
        every: float = 1.0,
        task_silence: float | None = None,
        checkpoints: Path | None = None,
        checkpoint_every: float = 60.0,
        steps: Sequence[Step] = (),
        registry: CollectorRegistry | None = None,
    ) -> None:
        """`channels` are where the policy's rules announce approvals, whose links name `public_url`;
        `task_silence` the seconds after which a task whose worker sent no heartbeat is failed (None:
        this process runs no tasks); `checkpoints` the file signed checkpoints are appended to."""
        self.ledger = ledger
        self.every = every
        self.task_silence = task_silence
        self.checkpoints = checkpoints
        self.checkpoint_every = checkpoint_every
        self.steps = tuple(steps)
        self._http = Http()
        lines = lines_for(channels, ledger, self._http, public_url) if channels else {}
        self.outbox = Deliverer(ledger, lines, registry=registry)
        self.outage = outage_of(ledger)
        self._sweeping = Background("signoff-sweep")
        self._marking = Background("signoff-checkpoints")
        self._probing = Background("signoff-readiness")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep it up while the block runs; everything it started ends before the ledger closes, never in
        the middle of a write."""
        self._probing.ensure(self._probe)
        self._sweeping.ensure(self._sweep)
        if self.checkpoints is not None:
            self._marking.ensure(self._mark)
        self.outbox.start()
        try:
            yield
        finally:
            await self.outbox.stop()
            await self._http.close()
            await self._marking.stop()
            await self._sweeping.stop()
            await self._probing.stop()

    def unready(self) -> str | None:
        """Why this process can't serve now, as its probe and its writes last found; None when it can."""
        if (why := self.outage.reason) is not None:
            return why
        return None if self.outbox.running else "the outbox worker is not running"

    async def _probe(self) -> None:
        while True:
            try:
                async with asyncio.timeout(PROBE_WITHIN):
                    await probe(self.ledger)
            except LedgerUnavailable:  # the outage was told
                pass
            except TimeoutError:
                late = f"the ledger did not answer within {PROBE_WITHIN:g} s"
                self.outage.failed(LedgerUnavailable(late))
            except Exception as exc:  # whatever it is, this process can't serve: said once, like an outage
                self.outage.failed(LedgerUnavailable(f"the ledger failed: {type(exc).__name__}: {exc}"))
            await asyncio.sleep(PROBE_EVERY)

    async def _sweep(self) -> None:
        while True:
            try:
                await self.ledger.approvals.expire_due()
                await self.ledger.approvals.follow_up_due()
                if self.task_silence is not None:
                    await self.ledger.tasks.abandon(self.task_silence)
                for step in self.steps:
                    await step()
            except LedgerUnavailable as exc:  # said once by the outage; the next sweep tries again
                self.outage.failed(exc)
            except Exception:
                log.exception("the sweep failed")
            else:
                self.outage.recovered()
            await asyncio.sleep(self.every)

    async def _mark(self) -> None:
        """Append a signed checkpoint whenever the audit grew, so an audit later cut short or rewritten
        fails `audit verify` (see `ledger.evidence`)."""
        assert self.checkpoints is not None
        path, last = self.checkpoints, -1
        while True:
            try:
                mark = await self.ledger.audit.checkpoint()
                if mark.count != last:
                    await asyncio.to_thread(append_checkpoint, path, mark)
                    last = mark.count
            except LedgerUnavailable as exc:  # the next round tries again, once the ledger answers
                self.outage.failed(exc)
            except Exception:  # the next round tries again; the process goes on
                log.exception("the audit checkpoint could not be written to %s", path)
            await asyncio.sleep(self.checkpoint_every)
