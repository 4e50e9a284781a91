"""Who a chat request is from, and whether the chat is theirs.

A chat belongs to the principal that started it (see `auth`). Every chat route, the tasks routes of a chat
and the live socket ask here, and answer only that principal: to anyone else another's chat is as unknown
as a missing one (`Unknown`, audited). Without a credential, the caller is the anonymous principal where the
server takes credential-less chats.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from signoff.core.principal import Principal
from signoff.integrations.chat.state import check_owner, owner_of
from signoff.integrations.chat.trust import Unknown
from signoff.ledger.base import Ledger
from signoff.server.auth import chatter, client_of, principal_of
from signoff.server.refusals import Kind, Refusals


class Owners:
    def __init__(self, ledger: Ledger, refusals: Refusals, *, anonymous: bool = False) -> None:
        self.ledger = ledger
        self.refusals = refusals
        self.anonymous = anonymous
        """Whether chats are taken without a credential, from the anonymous principal."""

    def principal(self, conn: HTTPConnection) -> Principal:
        """Who talks in a chat through this request; `NeedsCredential` where a credential is needed."""
        return chatter(conn, self.anonymous)

    async def owned(self, chat_id: str, principal: Principal, conn: HTTPConnection) -> bool:
        """Whether the chat is `principal`'s (False: nobody's yet); raises `Unknown` (audited as `refuse`
        does) if it is another's."""
        stored = await self.ledger.chats.load(chat_id)
        if principal_of(conn) is None and owner_of(stored) not in (None, principal.id):
            await self.refuse(conn, "another-owner", chat_id, "the chat belongs to another principal")
            raise Unknown("id", f"no chat {chat_id}")
        await check_owner(self.ledger, chat_id, stored, principal)
        return stored is not None

    async def refuse(self, conn: HTTPConnection, kind: Kind, subject: str, why: str, **detail: str) -> None:
        """Audit a refusal in a chat: one entry for a principal, whom someone answers for; counted by source
        and kind for a caller without a credential, who costs nothing to be and names `subject` itself."""
        principal = principal_of(conn)
        if principal is None:
            self.refusals.note("refuse", "chat", client_of(conn), kind, why, conn.url.path)
        else:
            await self.ledger.audit.record("refuse", subject, principal.id, why=why, **detail)
