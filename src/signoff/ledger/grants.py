"""The ledger's grants: what an "always" or "this chat" decision remembers, until it is revoked.

A decision makes its grant in the same write as itself (see `ledger.approvals`); this part reads them back
for the gate, passing over any whose proof fails (written around signoff, and audited), and revokes them.
Whether a grant may answer for a call is the call's rule's to say (`core.grant.unusable`), not this part's.
"""

from __future__ import annotations

from signoff.core.call import ToolCall
from signoff.core.grant import Grant, revoke
from signoff.core.proof import grant_holds
from signoff.ledger.keys import GrantKey
from signoff.ledger.parts import Part
from signoff.ledger.records import Change

FORGED = "the grant carries no valid proof"


class Grants(Part):
    async def query(
        self, *, chat_id: str | None = None, tool: str | None = None, active: bool = True
    ) -> list[Grant]:
        return await self._shared.backend.approvals.grants(chat_id=chat_id, tool=tool, active=active)

    async def matching(self, call: ToolCall, chat_id: str) -> list[Grant]:
        """The active grants that cover this call in this chat (its own or global ones), oldest first."""
        keyring, found = self._shared.keyring, []
        for grant in await self.query(chat_id=chat_id, tool=call.tool):
            if not grant.matches(call, chat_id):
                continue
            if grant_holds(keyring, grant):
                found.append(grant)
            else:
                await self._shared.record("refuse", grant.id, "signoff:ledger", why=FORGED)
        return found

    async def revoke(self, grant_id: str, actor: str) -> Grant:
        def step(grant: Grant) -> Change:
            after, event = revoke(grant, actor, self.clock(), self._shared.keyring.current)
            return Change(grant=after, events=(event,))

        revoked = (await self._shared.committer.write(GrantKey(grant_id), step)).grant
        assert revoked is not None
        return revoked
