"""The ledger's registered principals: who they are, their roles, and the hash of each one's token.

Each record carries a MAC over all of it (`core.proof`), made here with the audit key whenever it changes,
so a row minted, promoted, un-revoked or given another token in the database proves nothing: its token is
refused, and the refusal is audited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from signoff.core.audit import AuditEvent
from signoff.core.errors import InvalidPrincipal
from signoff.core.principal import (
    Identity,
    Principal,
    Proven,
    Registered,
    assign_roles,
    link,
    matched,
    register,
    token_hash,
)
from signoff.core.principal import revoke as revoke_principal
from signoff.core.proof import principal_holds
from signoff.ledger.keys import PrincipalKey
from signoff.ledger.parts import Part, Shared
from signoff.ledger.records import Change

UNPROVEN = "its record carries no valid proof"


class Principals(Part):
    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._store = shared.backend.principals

    async def register(
        self, name: str, roles: Sequence[str] = (), *, display: str = "", actor: str
    ) -> tuple[Registered, str]:
        """Register a principal with a new personal token; the record, and the token, which only its
        holder ever sees again: the ledger keeps its hash."""
        made: list[str] = []

        def step(existing: Registered | None) -> Change:
            record, token, event = register(
                name, roles, display=display, actor=actor, now=self.clock(), existing=existing,
                key=self._shared.keyring.current,
            )  # fmt: skip
            made.append(token)
            return Change(principal=record, events=(event,))

        registered = (await self._shared.committer.write(PrincipalKey(name), step)).principal
        assert registered is not None
        return registered, made[-1]

    async def all(self) -> list[Registered]:
        """Every registered principal, revoked ones too, oldest first."""
        return await self._store.all()

    async def authenticate(self, token: str) -> Principal | None:
        """The principal a personal token proves, read now, so a revocation counts from the next request
        on every worker; None for an unknown or revoked token, or one whose record does not verify (that
        refusal is audited: someone wrote the table around signoff)."""
        hashed = token_hash(token)
        record = await self._store.by_token(hashed)
        if record is None:
            return None
        if record.token_hash != hashed:  # its index and its record disagree: written around signoff
            await self._shared.record("refuse", f"principal:{record.id}", "signoff:ledger", why=UNPROVEN)
            return None
        return await self._verified(record)

    async def named(self, principal_id: str, kind: Identity, *, spends: str) -> Proven | None:
        """The principal a bearer credential of a channel names (an email review link names its
        approver), as its record stands now: only if the record proves itself, is active and still has
        that channel's identity linked. The credential decides as that principal, through that channel,
        and is spent by its first decision (`spends`)."""
        record = await self._store.load(principal_id)
        if record is None or not record.identity(kind):
            return None
        principal = await self._verified(record)
        if principal is None:
            return None
        return Proven(principal=msgspec.structs.replace(principal, via=kind), spends=spends)

    async def standing(self, principal: Principal) -> Principal | None:
        """`principal` as it stands now, for a decision it made earlier (a grant): a registered one with the
        roles its record holds today, None once revoked or unproven; one from an identity provider or a host
        app with no roles, since signoff can't ask them what roles it has now; any other as it was."""
        if principal.via == "token":
            record = await self._store.load(principal.id)
            return None if record is None else await self._verified(record, audited=False)
        if principal.via in ("oidc", "host"):
            return msgspec.structs.replace(principal, roles=())
        return principal

    async def _verified(self, record: Registered, *, audited: bool = True) -> Principal | None:
        """The one check every identification passes: the principal `record` proves, if its proof holds
        and it is active; a record that fails its proof was written around signoff, and using it is
        refused (audited, where someone presented a credential of it)."""
        if not self._holds(record):
            if audited:
                await self._shared.record("refuse", f"principal:{record.id}", "signoff:ledger", why=UNPROVEN)
            return None
        return record.principal if record.active else None

    def _holds(self, record: Registered) -> bool:
        return principal_holds(self._shared.keyring, record)

    async def revoke(self, principal_id: str, actor: str) -> Registered:
        return await self._change(
            principal_id,
            lambda record: revoke_principal(
                record, actor=actor, now=self.clock(), key=self._shared.keyring.current
            ),
            proven=False,  # revoking a record written around signoff is how it is put out of use
        )

    async def assign_roles(self, principal_id: str, roles: Sequence[str], actor: str) -> Registered:
        return await self._change(
            principal_id,
            lambda record: assign_roles(
                record, roles, actor=actor, now=self.clock(), key=self._shared.keyring.current
            ),
            proven=True,
        )

    async def link(
        self, principal_id: str, *, email: str | None = None, slack: str | None = None, actor: str
    ) -> Registered:
        """Link the principal's email address and Slack user id (see `core.principal.link`). An identity
        another active principal holds is refused: an answer from it would be two principals'."""
        others = [r for r in await self._proven() if r.id != principal_id]
        given: tuple[tuple[Identity, str | None], ...] = (("email", email), ("slack", slack))
        for kind, value in given:
            if value and (holders := _holding(others, kind, value)):
                raise InvalidPrincipal(
                    f"{kind} {value!r} is linked to {holders[0].id} already; unlink it there"
                )
        return await self._change(
            principal_id,
            lambda record: link(
                record,
                email=email,
                slack=slack,
                actor=actor,
                now=self.clock(),
                key=self._shared.keyring.current,
            ),
            proven=True,
        )

    async def identified(self, kind: Identity, value: str) -> Proven | None:
        """The principal an email address or a Slack user id is linked to, with its roles as they are now,
        proven through that channel: None when it is linked to nobody active, and also when two principals
        hold it (written around signoff, or two links that raced), audited: an answer from it is nobody's
        decision."""
        holders = _holding(await self._proven(), kind, value)
        if len(holders) > 1:
            why = f"{kind} {value!r} is linked to {', '.join(h.id for h in holders)}"
            await self._shared.record("refuse", f"{kind}:{value}", "signoff:ledger", why=why)
            return None
        if not holders:
            return None
        return Proven(principal=msgspec.structs.replace(holders[0].principal, via=kind))

    async def reachable(self, kind: Identity) -> list[Registered]:
        """The active principals with an identity of that kind linked, proven: whom a channel may tell."""
        return [r for r in await self._proven() if r.identity(kind)]

    async def _proven(self) -> list[Registered]:
        """The active principals whose records prove themselves. Principals are few, and read whole: no
        index of identities to keep in step on every backend."""
        return [r for r in await self._store.all() if r.active and self._holds(r)]

    async def _change(
        self, principal_id: str, step: Callable[[Registered], tuple[Registered, AuditEvent]], *, proven: bool
    ) -> Registered:
        """Change a record and prove it anew; with `proven`, only a record whose proof holds now."""

        def change(record: Registered | None) -> Change:
            if record is None:
                raise PrincipalKey(principal_id).missing()
            if proven and not self._holds(record):  # proving it anew would sign what was written around us
                raise InvalidPrincipal(f"principal {principal_id}: {UNPROVEN}; revoke it and register anew")
            after, event = step(record)
            return Change(principal=after, events=(event,))

        stored = (await self._shared.committer.write(PrincipalKey(principal_id), change)).principal
        assert stored is not None
        return stored


def _holding(records: list[Registered], kind: Identity, value: str) -> list[Registered]:
    wanted = matched(kind, value)
    return [r for r in records if r.identity(kind) == wanted]
