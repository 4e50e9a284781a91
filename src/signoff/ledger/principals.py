"""The ledger's registered principals: who they are, their roles, and the hash of each one's token."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from signoff.core.audit import AuditEvent
from signoff.core.principal import Principal, Registered, assign_roles, register, token_hash
from signoff.core.principal import revoke as revoke_principal
from signoff.ledger.keys import PrincipalKey, found
from signoff.ledger.parts import Parts
from signoff.ledger.records import Change


class PrincipalLedger(Parts):
    async def register(
        self, name: str, roles: Sequence[str] = (), *, display: str = "", actor: str
    ) -> tuple[Registered, str]:
        """Register a principal with a new personal token; the record, and the token, which only its
        holder ever sees again: the ledger keeps its hash."""
        made: list[str] = []

        def step(existing: Registered | None) -> Change:
            record, token, event = register(
                name, roles, display=display, actor=actor, now=self.clock(), existing=existing
            )
            made.append(token)
            return Change(principal=record, events=(event,))

        registered = (await self.committer.write(PrincipalKey(name), step)).principal
        assert registered is not None
        return registered, made[-1]

    async def principal(self, principal_id: str) -> Registered:
        return found(await self.backend.principals.load(principal_id), PrincipalKey(principal_id))

    async def principals(self) -> list[Registered]:
        """Every registered principal, revoked ones too, oldest first."""
        return await self.backend.principals.all()

    async def authenticate(self, token: str) -> Principal | None:
        """The principal a personal token proves, read now, so a revocation counts from the next request
        on every worker; None for an unknown or revoked token."""
        found = await self.backend.principals.by_token(token_hash(token))
        return found.principal if found is not None and found.active else None

    async def revoke_principal(self, principal_id: str, actor: str) -> Registered:
        return await self._change_principal(
            principal_id, lambda record: revoke_principal(record, actor=actor, now=self.clock())
        )

    async def assign_roles(self, principal_id: str, roles: Sequence[str], actor: str) -> Registered:
        return await self._change_principal(
            principal_id, lambda record: assign_roles(record, roles, actor=actor, now=self.clock())
        )

    async def _change_principal(
        self, principal_id: str, step: Callable[[Registered], tuple[Registered, AuditEvent]]
    ) -> Registered:
        def change(record: Registered | None) -> Change:
            if record is None:
                raise PrincipalKey(principal_id).missing()
            after, event = step(record)
            return Change(principal=after, events=(event,))

        stored = (await self.committer.write(PrincipalKey(principal_id), change)).principal
        assert stored is not None
        return stored
