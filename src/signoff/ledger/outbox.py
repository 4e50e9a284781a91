"""The ledger's outbox: the notices an approval's channels are to hear of, until each is delivered.

A notice is written with the event that makes it (see `ledger.approvals`), so what this part does is hand
notices to the workers that deliver them and record how each delivery went. Any worker may deliver any
notice: a claim holds it for one lease, long enough for one attempt, and a worker killed mid-attempt
loses it to the next claim once the lease runs out. So a notice may be delivered more than once, always
under its one id, and never by two workers at once while a lease holds.

How an attempt went is the worker's record, not an audited event, except where a person must be able to
see it later: a notice given up on, and an operator's retry.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from signoff.core.errors import NotFound, NoticeBusy
from signoff.core.notice import Delivery, Notice
from signoff.ledger.background import Background
from signoff.ledger.parts import Part, Shared
from signoff.ledger.stores import OutboxStore

BATCH = 256
"""Outcomes stored in one write."""
LEASE = 60.0
"""Seconds a claim holds a notice: more than one attempt takes (a webhook times out after 15 s)."""
ACTOR = "signoff:outbox"


class Outbox(Part):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._store = shared.backend.outbox
        self._settles = _Settles(self._store)
        self.holder = shared.holder
        self.told = shared.told
        """Set when this process writes notices; whoever waits on it clears it."""

    async def claim(self, channel: str, *, limit: int = 32, lease: float = LEASE) -> list[Notice]:
        """Notices of `channel` due now, held by this process for `lease` seconds, each an attempt."""
        now = self.clock()
        return await self._store.claim(channel, self.holder, now, now + lease, limit)

    async def delivered(self, notice: Notice) -> bool:
        """Record `notice` delivered; False if another worker took it over meanwhile."""
        return await self._release(notice, state="delivered", delivered_at=self.clock())

    async def later(self, notice: Notice, at: float, error: str) -> bool:
        """Record a failed attempt of `notice`, to be tried again at `at`."""
        return await self._release(notice, next_at=at, last_error=error)

    async def give_up(self, notice: Notice, error: str) -> bool:
        """Record `notice` failed for good (its channel gave up, or its endpoint is gone), audited."""
        if not await self._release(notice, state="failed", last_error=error):
            return False
        await self._shared.record(
            "notice-failed", notice.approval_id, ACTOR,
            notice=notice.id, channel=notice.channel, type=notice.type, attempts=notice.attempts, why=error,
        )  # fmt: skip
        return True

    async def retry(self, notice_id: str, actor: str) -> Notice:
        """Put a notice back in line to be tried now, as an operator asks (`signoff outbox retry`),
        audited. A notice a worker holds right now is left to it."""
        notice = await self.get(notice_id)
        again = msgspec.structs.replace(
            notice, state="pending", next_at=self.clock(), holder="", lease_until=0.0, delivered_at=None
        )
        if notice.lease_until > self.clock() or not await self._settles.settle(again, notice.holder):
            raise NoticeBusy(f"notice {notice_id} is being delivered right now")
        await self._shared.record(
            "notice-retry", notice.approval_id, actor, notice=notice.id, channel=notice.channel
        )
        return again

    async def _release(self, notice: Notice, **outcome: Any) -> bool:
        """Store how this process's attempt at `notice` went, giving up its hold."""
        released = msgspec.structs.replace(notice, lease_until=0.0, **outcome)
        return await self._settles.settle(released, self.holder)

    async def get(self, notice_id: str) -> Notice:
        notice = await self._store.load(notice_id)
        if notice is None:
            raise NotFound(f"no notice {notice_id}")
        return notice

    async def query(
        self, *, state: Delivery | None = None, approval_id: str | None = None, limit: int | None = None
    ) -> list[Notice]:
        """Notices oldest first, of one approval and/or in one delivery state."""
        return await self._store.query(state=state, approval_id=approval_id, limit=limit)


class _Settles:
    """How attempts went, stored a batch at a time: while one batch is written, the outcomes that arrive
    queue for the next, as the committer does for audited writes. An outcome is one row, and a
    transaction each cost more than the delivery's own HTTP request on PostgreSQL."""

    def __init__(self, store: OutboxStore) -> None:
        self.store = store
        self.queue: list[tuple[Notice, str, asyncio.Future[bool]]] = []
        self.writer = Background("signoff-outbox-settle")

    async def settle(self, notice: Notice, holder: str) -> bool:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        self.queue.append((notice, holder, done))
        self.writer.ensure(self._write)
        return await done

    async def _write(self) -> None:
        while self.queue:
            batch, self.queue = self.queue[:BATCH], self.queue[BATCH:]
            try:
                settled = await self.store.settle([(notice, holder) for notice, holder, _ in batch])
            except Exception as exc:  # each caller gets it, and its notice is tried again after its lease
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for notice, _, done in batch:
                if not done.done():  # a caller cancelled meanwhile: its outcome is stored all the same
                    done.set_result(notice.id in settled)
