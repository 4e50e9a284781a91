"""An edit is a new call, asked afresh.

An edit approves other arguments than the agent asked with, so it would carry more authority than its
maker has if it were judged by the rule that asked the original call: a chat's owner could turn its own
"pay 50 to Hanako" into "pay 900 to Mallory" and approve it alone. So the policy rules on the edited call
as if the agent had made it (`ruling`):

- it denies the call: the edit is refused (`EditRefused`), and the approval waits as it was;
- it allows the call outright: the edit counts as the editor's approval under the rule that asked, and
  the approval keeps its question, the edited call shown beside it;
- it asks: the approval takes the edited call's rule (who may decide, how many, four eyes, its
  description), with a deadline never later than it had and `on_timeout = "allow"` only where both rules
  say so, and the edit counts only if that rule admits the editor (`EditNotAdmitted` otherwise).

Either way the count starts again from the editor, and the ledger seals the approval anew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from signoff.core.arguments import misfit
from signoff.core.errors import EditNotAdmitted, EditRefused, InvalidDecision
from signoff.core.policy import Ruling
from signoff.core.principal import Principal

if TYPE_CHECKING:
    from signoff.core.approval import Approval


def reruled(
    approval: Approval, args: dict[str, Any], editor: Principal, ruling: Ruling | None, now: float
) -> Approval:
    """The approval asking about the call with `args`, under the rule `ruling` chose for it; not sealed."""
    if (why := misfit(approval.schema, args)) is not None:
        raise InvalidDecision(f"the edited arguments do not fit {approval.call.tool}: {why}")
    if ruling is None:
        raise InvalidDecision("an edit is a new call, and the policy must rule on it: pass the policy")
    if ruling.action == "deny":
        raise EditRefused(approval, ruling.reason)
    edited = msgspec.structs.replace(approval, edited=approval.call.with_args(args).args, votes=())
    if ruling.action == "allow":  # the question stays the one asked, and shows the edited call beside it
        return edited
    deadline = approval.deadline
    if ruling.deadline is not None and (deadline is None or now + ruling.deadline < deadline):
        deadline = now + ruling.deadline
    on_timeout = "allow" if approval.on_timeout == ruling.on_timeout == "allow" else "deny"
    edited = msgspec.structs.replace(
        edited, rule=ruling.rule, authority=ruling.authority, deadline=deadline, on_timeout=on_timeout,
        description=ruling.description,
    )  # fmt: skip
    if not ruling.authority.allows(editor, approval.requester):
        raise EditNotAdmitted(approval, editor.id, edited.awaited)
    return edited
