"""The ledger's chats: each one's server-side state, saved version over version, and its reply logs."""

from __future__ import annotations

from collections.abc import Sequence

from signoff.core.errors import StaleChat
from signoff.ledger.parts import Part, Shared
from signoff.ledger.records import Entries, ReplyFrames, ReplyLog, StoredChat


class Chats(Part):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._store = shared.backend.chats

    async def load(self, chat_id: str, *, held: int | None = None) -> StoredChat | None:
        """The chat's record, with its entries; with `held`, the version whose state the caller holds
        already: a record of that version may come without its state (`b""`) or entries, which a long
        chat's request then need not read."""
        return await self._store.load(chat_id, held)

    async def save(
        self,
        chat_id: str,
        state: bytes,
        *,
        version: int,
        owner: str | None = None,
        entries: Entries | None = None,
    ) -> StoredChat:
        """Save a chat's state over the `version` that was read (0 for a new chat, which `owner` starts),
        and change its entries as `entries` says (by default they stay as they are), in one write.

        Raises `StaleChat` when someone else saved in between, so two requests racing on one chat can never
        silently lose one's history, nor two principals both start it.
        """
        chat = StoredChat(
            chat_id=chat_id, version=version + 1, state=state, updated_at=self.clock(), owner=owner
        )
        if not await self._store.save(chat, entries):
            raise StaleChat(f"chat {chat_id} changed while this request was running; reload it and retry")
        return chat

    async def log_replies(self, batch: Sequence[ReplyFrames]) -> None:
        """Record what several chats' replies added since the last call, in one write. Entries for a chat
        whose log has moved on to another reply are dropped: a reply never writes into a newer one's log,
        and an entry number written twice (a retry) keeps its first write."""
        if batch:
            await self._store.log_replies(batch, self.clock())

    async def reply_log(self, chat_id: str, after: int = 0) -> ReplyLog | None:
        """The chat's latest reply log, with its entries after the first `after`; None if there is none."""
        return await self._store.reply_log(chat_id, after)

    async def forget_replies(self, before: float) -> int:
        """Drop the reply logs last written before `before` (ended, or their worker died); the count."""
        return await self._store.forget_replies(before)
