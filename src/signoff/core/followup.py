"""Follow-ups: what happens to an approval nobody decides, short of its deadline.

The rules, in prose:
- A rule may remind (`remind_after`, at most `remind_max` times, 3 by default): every `remind_after`
  since it opened, while it is pending, the approvers who have not voted are told again.
- A rule may escalate (`escalate_after`, `escalate_to`): that long after it opened, the `escalate_to`
  approvers join its approvers, and are told. Whom it escalates to and when are part of its seal, fixed
  when it opens, so a database write can neither add an approver nor bring the escalation forward: a
  vote counts for an escalated approver only if it came at or after the sealed time.
- A rule may warn before the deadline (`warn_before_deadline`): once, that long before it.
- Each follow-up is a step of the approval's machine (pending to pending, audited: who joined, when and
  why) and tells the approval's channels (`core.notice`). They are scheduled in the ledger, not in a
  process's memory: any worker's sweep finds them due, and one applies each.

Pure: `due` says which is due now, and `core.approval.follow_up` takes the step.
"""

from __future__ import annotations

from typing import Literal

import msgspec

FollowUp = Literal["escalate", "warn", "remind"]


class Followups(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """An approval's follow-ups as its rule set them (seconds), and how far they got."""

    remind_after: float | None = None
    remind_max: int = 3
    warn_before: float | None = None
    reminded: int = 0
    warned: bool = False
    escalated: bool = False


def due(
    followups: Followups | None,
    *,
    created_at: float,
    deadline: float | None,
    escalate_at: float | None,
    now: float,
) -> FollowUp | None:
    """The follow-up due now for a pending approval, the most pressing first; None if none is."""
    done = followups or Followups()
    if escalate_at is not None and not done.escalated and now >= escalate_at:
        return "escalate"
    if (
        done.warn_before is not None
        and deadline is not None
        and not done.warned
        and deadline - done.warn_before <= now < deadline
    ):
        return "warn"
    if (
        done.remind_after is not None
        and done.reminded < done.remind_max
        and now >= created_at + done.remind_after * (done.reminded + 1)
    ):
        return "remind"
    return None


def advanced(followups: Followups | None, step: FollowUp) -> Followups:
    """`followups` after `step` was taken."""
    done = followups or Followups()
    match step:
        case "escalate":
            return msgspec.structs.replace(done, escalated=True)
        case "warn":
            return msgspec.structs.replace(done, warned=True)
        case "remind":
            return msgspec.structs.replace(done, reminded=done.reminded + 1)
