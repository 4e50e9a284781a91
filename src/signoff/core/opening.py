"""Opening an approval: the first step of its machine (see `core.approval`), which seals who may decide.

Everything the rule says of the approval is fixed here, from the ruling the gate made: who may decide and
how many, until when, whom to tell, and when it follows up. What grants authority is sealed with the
ledger's key before anything is stored.
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

import msgspec

from signoff.core.approval import Approval, State, new_approval_id
from signoff.core.audit import AuditEvent, AuditKey
from signoff.core.call import ToolCall
from signoff.core.followup import Followups
from signoff.core.principal import Authority
from signoff.core.proof import sealed
from signoff.core.rule import OnTimeout


class Asking(TypedDict, total=False):
    """How an approval is asked, beyond the call and its rule: a deadline and what it means, who asks
    (`actor`) and for whom (`requester`, the chat's owner), who may decide (`authority`), and the tool's
    JSON Schema an edit must fit."""

    deadline: float | None
    on_timeout: OnTimeout
    actor: str
    requester: str
    authority: Authority | None
    schema: dict[str, Any] | None
    notify: tuple[str, ...]
    escalate_after: float | None
    followups: Followups | None


def open_approval(
    call: ToolCall,
    *,
    chat_id: str,
    description: str,
    rule: str,
    now: float,
    key: AuditKey,
    **asking: Unpack[Asking],
) -> tuple[Approval, AuditEvent]:
    """A pending approval, sealed with `key`, and the audit event that opens it."""
    deadline, requester, authority = (
        asking.get("deadline"),
        asking.get("requester", ""),
        asking.get("authority"),
    )
    approval = Approval(
        id=new_approval_id(),
        chat_id=chat_id,
        call=call,
        digest=call.digest,
        description=description,
        rule=rule,
        created_at=now,
        deadline=None if deadline is None else now + deadline,
        on_timeout=asking.get("on_timeout", "deny"),
        requester=requester,
        authority=authority or Authority(),
        schema=asking.get("schema"),
        notify=asking.get("notify", ()),
        escalate_at=None if (after := asking.get("escalate_after")) is None else now + after,
        followups=asking.get("followups"),
    )
    approval = sealed(key, approval)
    detail: dict[str, object] = {
        "chat": chat_id,
        "call": call.call_id,
        "tool": call.tool,
        "digest": approval.digest,
        "rule": rule,
    }
    if requester:
        detail["requester"] = requester
    if authority is not None and authority != Authority():
        detail["authority"] = msgspec.to_builtins(authority)
    event = AuditEvent(
        at=now,
        actor=asking.get("actor", "signoff:gate"),
        action="open",
        subject=approval.id,
        after=State.PENDING,
        detail=detail,
    )
    return approval, event
