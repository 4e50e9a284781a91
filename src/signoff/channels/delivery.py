"""The outbox's worker: every channel's notices delivered, retried on the channel's schedule, given up on
at last, in every worker process at once.

Each channel has a line of its own: a loop that claims that channel's due notices (see `ledger.outbox`)
and keeps up to `concurrency` attempts in flight, claiming more once half of them ended (a claim and the
read of its approvals then serve a batch, not one notice each). So one slow or dead receiver holds only
its own line, and a notice that waits on a slow attempt in its line waits for a free slot, not for the
slow one. Every worker runs every line: the claims share the notices out, and a worker that dies
holding some loses them to the others once their lease runs out.

Who hears of an approval comes from its sealed authority and proven principals only: a notice whose
approval's seal fails (its rule rewritten in the table, say) goes to nobody, is given up on, and audited.

What an outcome does: delivered is recorded; a failure is tried again after the channel's next delay
(jittered by up to a tenth, so that many notices failed together do not all come back together) or after
the receiver's `Retry-After`; past the schedule's end or the channel's `give_up_after` it is given up on,
audited; an endpoint that says it is gone (410) is disabled in this process, audited, and every notice of
it is given up on until the process restarts and tries it again.

While the ledger is away, each line keeps trying to claim, and the ledger's `Outage` says so once: a notice
whose outcome could not be recorded is still held under its lease, which runs out, and is tried again.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Protocol

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram

from signoff.channels.config import DEFAULT_RETRY_SCHEDULE, GIVE_UP_AFTER
from signoff.core.approval import Approval
from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.core.notice import Notice
from signoff.core.proof import seal_holds
from signoff.ledger.background import Background
from signoff.ledger.base import Ledger, outage_of

log = logging.getLogger("signoff.channels")
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 3600.0)


@dataclass(frozen=True)
class Delivered:
    """The channel took the notice; `ref` is what the channel calls it, for a later notice to find (see
    `Notice.ref`)."""

    ref: str = ""


@dataclass(frozen=True)
class Failed:
    """The attempt failed: `retry_after` seconds is the receiver's own wish for the next one, `final`
    that no attempt at this notice can do better, and `gone` that no attempt at this channel can (the
    endpoint said 410)."""

    error: str
    retry_after: float | None = None
    final: bool = False
    gone: bool = False

    @property
    def ends(self) -> bool:
        """Whether the notice is given up on now, with no further attempt."""
        return self.final or self.gone


Outcome = Delivered | Failed


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds from now that a `Retry-After` header asks for (a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


class Sender(Protocol):
    async def send(self, notice: Notice, approval: Approval, now: float) -> Outcome: ...


@dataclass(frozen=True)
class Retries:
    """When a failed notice is tried again: the delay after each failed attempt in turn, and how long
    after its event a notice is given up on."""

    schedule: tuple[float, ...] = DEFAULT_RETRY_SCHEDULE
    give_up_after: float = GIVE_UP_AFTER

    def next_at(self, notice: Notice, now: float, wanted: float | None, jitter: float) -> float | None:
        """When to try `notice` again after its attempt number `notice.attempts` failed, or None to give
        up; `wanted` is the receiver's `Retry-After`, and `jitter` in [-1, 1] spreads the delay by a
        tenth of itself."""
        if notice.attempts > len(self.schedule):
            return None
        delay = wanted if wanted is not None else self.schedule[notice.attempts - 1] * (1 + jitter / 10)
        at = now + delay
        return at if at <= notice.created_at + self.give_up_after else None


@dataclass(frozen=True)
class Line:
    """One channel's sender and retry schedule."""

    sender: Sender
    retries: Retries = Retries()


class Deliverer:
    def __init__(
        self,
        ledger: Ledger,
        lines: Mapping[str, Line],
        *,
        interval: float = 0.2,
        concurrency: int = 32,
        registry: CollectorRegistry | None = None,
        jitter: Callable[[], float] = lambda: random.uniform(-1.0, 1.0),
    ) -> None:
        self.ledger = ledger
        self.lines = dict(lines)
        self.interval = interval
        self.concurrency = concurrency
        self.jitter = jitter
        self.disabled: dict[str, str] = {}
        """Channels whose endpoint said it is gone, with what it said."""
        self.outage = outage_of(ledger)
        self._running = Background("signoff-outbox")
        labels = ["channel"]
        self._latency = Histogram(
            "signoff_outbox_delivery_seconds",
            "Seconds from an approval's event to its notice's delivery.",
            labels, registry=registry, buckets=LATENCY_BUCKETS,
        )  # fmt: skip
        self._attempts = Counter(
            "signoff_outbox_attempts",
            "Delivery attempts by this worker, by outcome: delivered, failed (to retry) or gave_up.",
            [*labels, "outcome"], registry=registry,
        )  # fmt: skip

    def start(self) -> None:
        if self.lines:
            self._running.ensure(self.run)

    async def stop(self) -> None:
        await self._running.stop()

    @property
    def running(self) -> bool:
        """Whether the worker runs (or there is nothing for it to do): what readiness checks."""
        return not self.lines or self._running.running

    async def run(self) -> None:
        await asyncio.gather(*(self._line(name) for name in self.lines))

    async def _line(self, channel: str) -> None:
        flying: set[asyncio.Task[None]] = set()
        try:
            while True:
                room = self.concurrency - len(flying)
                found = await self._claim(channel, room) if room > 0 else []
                approvals = await self._approvals(found)
                for notice in found:
                    approval = approvals.get(notice.approval_id)
                    task = asyncio.get_running_loop().create_task(self.deliver(notice, approval))
                    flying.add(task)
                    task.add_done_callback(flying.discard)
                if found and len(found) == room:  # more wait: claim again once half the slots are free,
                    while len(flying) > self.concurrency // 2:  # so a claim takes a batch, not one each
                        await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
                elif not found:
                    await self._rest(flying)
        finally:
            for task in flying:
                task.cancel()

    async def _claim(self, channel: str, room: int) -> list[Notice]:
        try:
            found = await self.ledger.outbox.claim(channel, limit=room)
        except LedgerUnavailable as exc:  # the ledger is away: keep trying, as every other worker will
            self.outage.failed(exc)
            return []
        except SignoffError as exc:
            log.warning("outbox: cannot claim %s's notices: %s", channel, exc)
            return []
        self.outage.recovered()
        return found

    async def _approvals(self, notices: list[Notice]) -> dict[str, Approval]:
        """The approvals of a claim's notices, in one read; none if the ledger is away (each attempt then
        fails, and is tried again)."""
        try:
            return await self.ledger.approvals.many({n.approval_id for n in notices})
        except LedgerUnavailable as exc:
            self.outage.failed(exc)
            return {}
        except SignoffError as exc:
            log.warning("outbox: cannot read the approvals of %d notices: %s", len(notices), exc)
            return {}

    async def _rest(self, flying: set[asyncio.Task[None]]) -> None:
        """Until the interval passes, this process writes notices, or an attempt ends."""
        told = self.ledger.outbox.told
        heard = asyncio.ensure_future(told.wait())
        try:
            await asyncio.wait({heard, *flying}, timeout=self.interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            heard.cancel()
        told.clear()

    async def deliver(self, notice: Notice, approval: Approval | None) -> None:
        """One attempt at `notice`, which this process holds, about `approval` as it stands (None: it
        could not be read), and its outcome recorded."""
        outbox, line = self.ledger.outbox, self.lines[notice.channel]
        try:
            outcome = await self._attempt(notice, approval, line)
            now = self.ledger.outbox.clock()
            if isinstance(outcome, Delivered):
                if await outbox.delivered(msgspec.structs.replace(notice, ref=outcome.ref)):
                    self._latency.labels(notice.channel).observe(max(0.0, now - notice.created_at))
                self._attempts.labels(notice.channel, "delivered").inc()
                return
            if outcome.gone and notice.channel not in self.disabled:
                self.disabled[notice.channel] = outcome.error
                await self.ledger.audit.record(
                    "channel-disabled", notice.channel, "signoff:outbox", why=outcome.error
                )
            retries, wanted = line.retries, outcome.retry_after
            at = None if outcome.ends else retries.next_at(notice, now, wanted, self.jitter())
            if at is None:
                await outbox.give_up(notice, _given_up(notice, outcome))
                self._attempts.labels(notice.channel, "gave_up").inc()
            else:
                await outbox.later(notice, at, outcome.error)
                self._attempts.labels(notice.channel, "failed").inc()
        except LedgerUnavailable as exc:  # the lease runs out, and this worker or another tries again
            self.outage.failed(exc)
        except SignoffError as exc:  # the lease runs out and another worker tries it
            log.warning("outbox: notice %s: %s", notice.id, exc)

    async def _attempt(self, notice: Notice, approval: Approval | None, line: Line) -> Outcome:
        if notice.channel in self.disabled:
            return Failed(f"the endpoint is disabled: {self.disabled[notice.channel]}", gone=True)
        if approval is None:
            return Failed("its approval could not be read from the ledger")
        if not seal_holds(self.ledger.audit.keyring, approval):  # whom to tell comes from the seal alone
            why = "its approval's authority is not the one it was sealed with: nobody is told"
            await self.ledger.audit.record("refuse", approval.id, "signoff:outbox", why=why, notice=notice.id)
            return Failed(why, final=True)
        try:
            return await line.sender.send(notice, approval, self.ledger.outbox.clock())
        except Exception as exc:  # a sender's bug must cost one attempt, not the worker
            log.exception("outbox: %s failed on notice %s", notice.channel, notice.id)
            return Failed(f"{type(exc).__name__}: {exc}")


def _given_up(notice: Notice, outcome: Failed) -> str:
    if outcome.ends:
        return outcome.error
    return f"gave up after {notice.attempts} attempts; the last: {outcome.error}"
