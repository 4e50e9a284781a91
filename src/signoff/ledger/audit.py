"""The ledger's audit: one hash chain, keyed, that every write appends to in the same transaction.

The entries are written by the other parts' writes (see `ledger.committer`); this part appends the events
that change no state, reads the chain, checks it end to end, and signs checkpoints of its head to keep
outside the database. `signoff.ledger.evidence` checks the records against the chain too.
"""

from __future__ import annotations

from collections.abc import Sequence

from signoff.core.audit import AuditEntry, BrokenLink, ChainCheck, Checkpoint
from signoff.ledger.parts import Part, Shared

PAGE = 5000
"""Audit entries read at once when the whole chain is checked."""


class Audit(Part):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self.keyring = shared.keyring
        """The audit key the chain, decisions, grants and principals are proven with, and older ones."""

    async def record(self, action: str, subject: str, actor: str, **detail: object) -> None:
        """Append an event that changes no state (a failed approver, a refused forgery, a grant used)."""
        await self._shared.record(action, subject, actor, **detail)

    async def entries(self, after_seq: int = 0, limit: int = 1000) -> list[AuditEntry]:
        return await self._shared.backend.approvals.audit(after_seq, limit)

    async def last_seq(self) -> int:
        """The newest entry's number: where a feed that only wants what happens next starts."""
        return await self._shared.backend.approvals.last_seq()

    async def verify(self, checkpoints: Sequence[Checkpoint] = ()) -> tuple[int, BrokenLink | None]:
        """Check the whole chain, a page at a time, against every checkpoint given; report the first broken
        link."""
        check, after = ChainCheck(self.keyring, checkpoints), 0
        while page := await self.entries(after, PAGE):
            if broken := check.feed(page):
                return check.count, broken
            after = page[-1].seq
        return check.count, check.end()

    async def checkpoint(self) -> Checkpoint:
        """The chain's length and head now, signed with the current key: keep it outside the database."""
        count = await self.last_seq()
        head = (await self.entries(count - 1, 1))[0].hash if count else ""
        return Checkpoint(count=count, head=head, at=self.clock()).signed(self.keyring.current)
