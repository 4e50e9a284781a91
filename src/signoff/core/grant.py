"""The grant: a remembered approval, so the same call need not be asked again.

A grant never carries more authority than its maker has. It stands for its maker deciding the later call
alone, so it is used only where the later call's own rule would have let the maker do exactly that
(`unusable`): the rule asks, one approver is enough, it admits the maker with the roles the maker has now,
and four eyes holds (the maker is not the later call's requester where the rule forbids it). A grant for
every chat (`always`) also needs a maker the rule lets remember for every chat. Whatever the grant says,
the later call's ruling decides.
"""

from __future__ import annotations

import secrets
from typing import Literal

import msgspec

from signoff.core.approval import Approval
from signoff.core.audit import AuditEvent, AuditKey
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyRevoked
from signoff.core.principal import Authority, Principal, Via
from signoff.core.proof import prove_grant

GrantScope = Literal["session", "always"]


class Grant(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """`digest` None means any arguments; `chat_id` None means every chat (scope `always`). `via` and
    `roles` are how its maker was authenticated and the roles it decided with. A `session` grant answers
    for its chat's `requester` only: two principals whose calls are asked in chats of one name (the MCP
    gateway's `mcp:alice`, a token's and an OS user's) never share one."""

    id: str
    tool: str
    digest: str | None
    chat_id: str | None
    scope: GrantScope
    created_by: str
    created_at: float
    approval_id: str
    via: Via = "code"
    roles: tuple[str, ...] = ()
    revoked_at: float | None = None
    revoked_by: str = ""
    requester: str = ""
    mac: str = ""
    """The ledger's proof of every other field (see `core.proof`): a grant written or re-activated in the
    database by hand has none that holds, and is never used."""

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def maker(self) -> Principal:
        """Its maker as it decided; `Ledger.principals.standing` says what the maker may do now."""
        return Principal(id=self.created_by, roles=self.roles, via=self.via)

    def matches(self, call: ToolCall, chat_id: str) -> bool:
        return (
            self.active
            and self.tool == call.tool
            and (self.digest is None or self.digest == call.digest)
            and (self.chat_id is None or self.chat_id == chat_id)
        )


def unusable(grant: Grant, authority: Authority, maker: Principal | None, requester: str) -> str | None:
    """Why `grant` can't let a call run whose rule asks `authority`, for `requester`; None if it can.
    `maker` is the grant's maker as it stands now: None once it is revoked, unknown, or unproven."""
    if maker is None:
        return f"its maker {grant.created_by} is revoked, or its record does not verify"
    if grant.scope == "session" and grant.requester and grant.requester != requester:
        return f"it was given for {grant.requester}'s calls in this chat, not {requester}'s"
    if authority.quorum > 1:
        return f"the call needs {authority.quorum} approvers"
    if not authority.allows(maker, requester):
        if maker.id == requester and not authority.requester_may_approve:
            return f"its maker {maker.id} asked for the call, and its rule wants another's eyes"
        return f"its maker {maker.id} may not decide the call: it waits for {authority.awaited()}"
    if grant.scope == "always" and not authority.may_remember_always(maker):
        return f"its maker {maker.id} may not remember the call for every chat"
    return None


def grant_for(approval: Approval, now: float, key: AuditKey) -> tuple[Grant, AuditEvent] | None:
    """The grant an approving decision asks to be remembered, if any, proven with `key`."""
    decision = approval.decision
    if decision is None or not decision.approved or decision.remember == "once":
        return None
    call = approval.approved_call
    grant = Grant(
        id="grt_" + secrets.token_urlsafe(12),
        tool=call.tool,
        digest=None if decision.any_args else call.digest,
        chat_id=approval.chat_id if decision.remember == "session" else None,
        scope=decision.remember,
        created_by=decision.by,
        created_at=now,
        approval_id=approval.id,
        via=decision.via,
        roles=decision.roles,
        requester=approval.requester if decision.remember == "session" else "",
    )
    grant = prove_grant(key, grant)
    event = AuditEvent(
        at=now,
        actor=decision.by,
        action="grant",
        subject=grant.id,
        after="active",
        detail={"tool": grant.tool, "digest": grant.digest, "chat": grant.chat_id, "approval": approval.id},
    )
    return grant, event


def revoke(grant: Grant, actor: str, now: float, key: AuditKey) -> tuple[Grant, AuditEvent]:
    """Revoked, and proven so again: the MAC covers the revocation, so undoing it in the table shows."""
    if not grant.active:
        raise AlreadyRevoked(f"grant {grant.id} was already revoked by {grant.revoked_by}")
    after = prove_grant(key, msgspec.structs.replace(grant, revoked_at=now, revoked_by=actor))
    event = AuditEvent(
        at=now, actor=actor, action="revoke", subject=grant.id, before="active", after="revoked"
    )
    return after, event
