"""Notices: what an approval's channels are told, kept in the ledger's outbox until delivered.

The rules, in prose:
- An approval's rule names its channels (`notify`), fixed when it opens. Each event of the approval that a
  person should hear of makes one notice per channel, in the same write as the event itself: a crash after
  the commit loses nothing, and nothing is told of an event that was not committed.
- The events told are the opening, a decision, an expiry, a cancellation, and each follow-up (a reminder,
  an escalation, a deadline warning: see `core.followup`). A vote that leaves the quorum
  short and the single-use claim are not: the first changes nothing a channel announces, the second is the
  call running, which the approval's channels already heard was allowed.
- A notice's id is its idempotency key for every attempt (a webhook's `webhook-id`): delivery is at least
  once, and a receiver that sees an id twice has seen the same notice twice.
- A notice is `pending` until a channel delivers it (`delivered`) or gives up on it (`failed`); `attempts`
  counts tries, `next_at` is when it may be tried again, and a worker holds it (`holder`) until
  `lease_until` while it tries: a worker killed mid-delivery loses its hold when the lease runs out.

Pure: the outbox store keeps these records, and `channels` delivers them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from signoff.core.audit import AuditEvent

NoticeType = Literal[
    "approval.requested",
    "approval.reminder",
    "approval.escalated",
    "approval.deadline_warning",
    "approval.decided",
    "approval.expired",
    "approval.cancelled",
]
Delivery = Literal["pending", "delivered", "failed"]

TOLD: Final[dict[str, NoticeType]] = {
    "open": "approval.requested",
    "approve": "approval.decided",
    "edit": "approval.decided",
    "deny": "approval.decided",
    "expire": "approval.expired",
    "cancel": "approval.cancelled",
    "remind": "approval.reminder",
    "escalate": "approval.escalated",
    "warn": "approval.deadline_warning",
}
"""The audit action of each event a channel hears of, and the notice it makes. An approving vote is
recorded as `approve` or `edit` whether or not it reaches the quorum, so `notices_for` also checks that
the approval left `pending`."""


class Notice(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One event of one approval, for one channel, and how its delivery stands."""

    id: str
    approval_id: str
    channel: str
    """`kind:name`, as a rule's `notify` names it (`webhook:ops`)."""
    type: NoticeType
    created_at: float
    state: Delivery = "pending"
    attempts: int = 0
    next_at: float = 0.0
    last_error: str = ""
    delivered_at: float | None = None
    ref: str = ""
    """What the channel calls what it delivered, where it has a name a later notice needs: a Slack
    message's `ts`, which the approval's outcome edits."""
    holder: str = ""
    lease_until: float = 0.0


def new_notice_id() -> str:
    """`msg_` and 128 random bits, the shape Standard Webhooks gives its example ids."""
    return "msg_" + secrets.token_hex(16)


def notices_for(channels: Sequence[str], events: Sequence[AuditEvent]) -> tuple[Notice, ...]:
    """The notices `events` make for an approval whose rule notifies `channels`: one per channel per event
    told (see `TOLD`), each due at once."""
    notices = []
    for event in events:
        told = TOLD.get(event.action)
        if told is None or (told == "approval.decided" and event.after == "pending"):
            continue
        notices += [
            Notice(
                id=new_notice_id(),
                approval_id=event.subject,
                channel=channel,
                type=told,
                created_at=event.at,
                next_at=event.at,
            )
            for channel in channels
        ]
    return tuple(notices)


def claimable(notice: Notice, channel: str, now: float) -> bool:
    """Whether a worker may take `notice` for `channel` now: pending, due, and held by nobody (or by a
    worker whose lease ran out)."""
    return (
        notice.channel == channel
        and notice.state == "pending"
        and notice.next_at <= now
        and notice.lease_until <= now
    )


def claimed(notice: Notice, holder: str, until: float) -> Notice:
    """`notice` held by `holder` until `until`, for one more attempt."""
    return msgspec.structs.replace(notice, holder=holder, lease_until=until, attempts=notice.attempts + 1)


def soonest(notice: Notice) -> tuple[float, float]:
    """The order notices are claimed in: the soonest due first, then the oldest."""
    return notice.next_at, notice.created_at
