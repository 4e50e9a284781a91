"""The approval as every channel shows it: the REST API, the page, webhooks' payloads and emails read the
same JSON, so what one shows a person is what every other shows.

Pure: a view is built from the core's records, and who sees it is the caller's to check (`may_see`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from signoff.core.approval import Approval, State
from signoff.core.argument_rows import WIDTH, Item, cut, plain
from signoff.core.argument_views import view
from signoff.core.call import digest
from signoff.core.notice import Notice
from signoff.core.principal import Principal, distinct
from signoff.core.visible import reveal


def principal_json(principal: Principal) -> dict[str, Any]:
    return {
        "id": principal.id,
        "name": principal.display,
        "roles": list(principal.roles),
        "via": principal.via,
    }


def may_see(principal: Principal, approval: Approval) -> bool:
    """An admin sees everything; anyone else the approvals of its own chats and those it may decide."""
    return principal.is_admin or approval.requester == principal.id or approval.admits(principal)


def may_decide(principal: Principal, approval: Approval) -> bool:
    """Whether a decision from `principal` would count now: pending, allowed, and not approved before."""
    return approval.state is State.PENDING and approval.admits(principal) and not approval.voted(principal.id)


def approval_json(approval: Approval, viewer: Principal | None = None) -> dict[str, Any]:
    """The approval as API clients see it: no nulls, and only what a person deciding needs. With a
    `viewer`, `may_decide` says whether that principal's decision would count now."""
    call = approval.call
    out: dict[str, Any] = {
        "id": approval.id,
        "chat_id": approval.chat_id,
        "state": str(approval.state),
        "call": {"call_id": call.call_id, "tool": call.tool, "args": call.args}
        | ({"context": call.context} if call.context else {}),
        "digest": approval.digest,
        "description": approval.description,
        "rule": approval.rule,
        "created_at": approval.created_at,
    }
    if approval.deadline is not None:
        out["deadline"] = approval.deadline
    if approval.requester:
        out["requester"] = approval.requester
    authority = approval.authority
    out["quorum"] = authority.quorum
    if authority.approvers is not None:
        out["approvers"] = list(authority.approvers)
    if not authority.requester_may_approve:
        out["requester_may_approve"] = False
    out["awaiting"] = authority.awaited(escalated=approval.escalated)
    out["tally"] = approval.tally
    if approval.votes:
        whos = distinct([v.decision.principal for v in approval.votes], lambda p: p.described)
        out["votes"] = [
            {
                "by": v.decision.by,
                "name": v.decision.name or v.decision.by,
                "who": who,
                "verdict": v.decision.verdict,
                "via": v.decision.via,
                "at": v.at,
            }
            for v, who in zip(approval.votes, whos, strict=True)
        ]
    if approval.edited is not None:  # the call that runs is this one, so show its own digest too
        out["edited"] = {"args": approval.edited, "digest": digest(approval.edited)}
    if (d := approval.decision) is not None:
        decision: dict[str, Any] = {
            "verdict": d.verdict,
            "by": d.by,
            "name": d.name or d.by,
            "who": approval.settled_by(owner="the chat's user"),
            "via": d.via,
            "reason": d.reason,
            "remember": d.remember,
        }
        if d.args is not None:
            decision["args"] = d.args
            decision["digest"] = digest(d.args)
        out["decision"] = decision
    if approval.closed_by:
        who = approval.settled_by(owner="the chat's user")
        out["closed"] = {"by": approval.closed_by, "who": who, "reason": approval.closed_reason}
    if approval.consumed_at is not None:
        out["consumed_at"] = approval.consumed_at
    if viewer is not None:
        out["may_decide"] = may_decide(viewer, approval)
    return out


Shown = tuple[str, str | list[Item]]
"""A label and what it says: text, or, for the arguments, their rows and blocks (`core.argument_views`)."""
ARGUMENTS = "Arguments"


def shown(approval: Approval) -> list[Shown]:
    """The approval as a message or a page puts it before a person, label by label: what the requester
    wrote (the description, the arguments) with its hidden characters spelled out, as the inbox shows it.
    The arguments come as rows and blocks, which each channel lays out its own way."""
    call = approval.approved_call
    labels: list[Shown] = [
        ("Description", reveal(approval.description)),
        ("Tool", reveal(call.tool)),
        (ARGUMENTS, view(call.tool, call.args, call.context)),
        ("Asked by", reveal(approval.requester or "an agent")),
        ("Waiting for", approval.awaited),
        ("State", str(approval.state)),
    ]
    if approval.deadline is not None:
        labels.append(
            ("Deadline", datetime.fromtimestamp(approval.deadline, UTC).isoformat(timespec="seconds"))
        )
    if approval.decision is not None or approval.closed_by:
        labels.append(("Settled by", approval.settled_by(owner="the requester")))
    return labels


def shown_lines(approval: Approval, width: int = WIDTH) -> list[str]:
    """`shown` as lines of plain text, `Label: text`, the arguments one per line below their label, every
    line cut at `width`: what the email's text and an MCP client's form say."""
    lines: list[str] = []
    for label, said in shown(approval):
        if isinstance(said, str):
            lines += cut(f"{label}: {said}", width)
        else:
            lines += [f"{label}:", *plain(said, width)] if said else [f"{label}: none"]
    return lines


NOTICE_FIELDS = ("id", "channel", "type", "state", "attempts", "created_at", "delivered_at", "last_error")
"""What a notice shows: not who holds it, nor the channel's own reference."""


def notice_json(notice: Notice) -> dict[str, Any]:
    """Where an approval was announced, and how that delivery stands (no nulls, no empty error)."""
    return {f: v for f in NOTICE_FIELDS if (v := getattr(notice, f)) is not None and v != ""}
