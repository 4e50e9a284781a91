"""The grant: a remembered approval, so the same call need not be asked again."""

from __future__ import annotations

import secrets
from typing import Literal

import msgspec

from signoff.core.approval import Approval
from signoff.core.audit import AuditEvent, AuditKey
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyRevoked
from signoff.core.proof import prove_grant

Scope = Literal["session", "always"]


class Grant(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """`digest` None means any arguments; `chat_id` None means every chat (scope `always`)."""

    id: str
    tool: str
    digest: str | None
    chat_id: str | None
    scope: Scope
    created_by: str
    created_at: float
    approval_id: str
    revoked_at: float | None = None
    revoked_by: str = ""
    mac: str = ""
    """The ledger's proof that it made this grant (see `core.proof`): a grant written into the database by
    hand has none, and is never used."""

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def matches(self, call: ToolCall, chat_id: str) -> bool:
        return (
            self.active
            and self.tool == call.tool
            and (self.digest is None or self.digest == call.digest)
            and (self.chat_id is None or self.chat_id == chat_id)
        )


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


def revoke(grant: Grant, actor: str, now: float) -> tuple[Grant, AuditEvent]:
    if not grant.active:
        raise AlreadyRevoked(f"grant {grant.id} was already revoked by {grant.revoked_by}")
    after = msgspec.structs.replace(grant, revoked_at=now, revoked_by=actor)
    event = AuditEvent(
        at=now, actor=actor, action="revoke", subject=grant.id, before="active", after="revoked"
    )
    return after, event
