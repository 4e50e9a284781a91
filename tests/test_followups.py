"""Reminders, escalation and deadline warnings on every backend, on a clock the test moves: each a step of
the approval's machine, audited, told to its channels in the same write, taken once whoever sweeps; and
an escalation that no database write can bring forward.
"""

from __future__ import annotations

import msgspec
import pytest

from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import NotAnApprover, PolicyError
from signoff.core.policy import Policy, rule
from signoff.core.principal import Principal
from signoff.core.proof import seal_holds
from signoff.ledger import Ledger
from tests.conftest import FakeClock

POLICY = Policy.from_toml(
    """
[[tools.pay]]
action = "ask"
deadline = "1h"
approvers = ["role:finance"]
notify = ["webhook:ops"]
remind_after = "10m"
remind_max = 2
escalate_after = "30m"
escalate_to = ["role:cfo"]
warn_before_deadline = "5m"
"""
)
CFO = Principal(id="carla", roles=("cfo",), via="token")


async def ask(ledger: Ledger, policy: Policy = POLICY) -> str:
    """A payment asked as the gate asks it: everything `policy`'s ruling says of it, follow-ups included."""
    call = ToolCall("c1", "pay", {"amount": 700})
    ruling = policy.evaluate(call)
    approval = await ledger.approvals.open(
        call, chat_id="chat", description=ruling.description, rule=ruling.rule, requester="dave",
        deadline=ruling.deadline, authority=ruling.authority, notify=ruling.notify,
        escalate_after=ruling.escalate_after, followups=ruling.followups,
    )  # fmt: skip
    return approval.id


async def steps(ledger: Ledger) -> list[tuple[str, object]]:
    return [
        (e.action, e.detail.get("joined"))
        for e in await ledger.audit.entries()
        if e.actor.endswith("follow-up")
    ]


async def test_reminders_an_escalation_and_a_warning_each_once_each_audited_and_told(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    ledger = clocked_ledger
    approval_id = await ask(ledger)
    assert await ledger.approvals.follow_up_due() == []
    clock.advance(600)
    assert [a.followups.reminded for a in await ledger.approvals.follow_up_due()] == [1]  # type: ignore[union-attr]
    assert await ledger.approvals.follow_up_due() == []  # taken once
    with pytest.raises(NotAnApprover):  # not yet: the escalation is half an hour after it opened
        await ledger.approvals.decide(approval_id, Decision.of(True, CFO))
    clock.advance(600)
    await ledger.approvals.follow_up_due()
    clock.advance(600)  # 30 min: the escalation is due; the reminders are spent (remind_max = 2)
    (escalated,) = await ledger.approvals.follow_up_due()
    assert escalated.followups is not None and escalated.followups.escalated
    assert escalated.awaited == "finance or cfo"
    assert await ledger.approvals.follow_up_due() == []
    clock.advance(25 * 60)  # 55 min: five minutes before the deadline
    await ledger.approvals.follow_up_due()
    assert await steps(ledger) == [
        ("remind", None), ("remind", None), ("escalate", ["role:cfo"]), ("warn", None)
    ]  # fmt: skip
    told = [n.type for n in await ledger.outbox.query(approval_id=approval_id)]
    assert told == [
        "approval.requested", "approval.reminder", "approval.reminder", "approval.escalated",
        "approval.deadline_warning",
    ]  # fmt: skip

    decided = await ledger.approvals.decide(approval_id, Decision.of(True, CFO))  # the cfo, now
    assert decided.state is State.APPROVED  # quorum 1: the escalated approver decides it
    clock.advance(10 * 60)
    await ledger.approvals.follow_up_due()
    assert len(await steps(ledger)) == 4  # nothing follows a decided approval, nor a deadline passed


async def test_an_expiry_is_told_as_an_expiry(clocked_ledger: Ledger, clock: FakeClock) -> None:
    approval_id = await ask(clocked_ledger)
    clock.advance(3601)
    (expired,) = await clocked_ledger.approvals.expire_due()
    assert expired.state is State.EXPIRED and expired.id == approval_id
    types = [n.type for n in await clocked_ledger.outbox.query(approval_id=approval_id)]
    assert types[-1] == "approval.expired" and "approval.decided" not in types


async def test_an_escalation_brought_forward_in_the_database_fails_the_seal(
    clocked_ledger: Ledger, clock: FakeClock
) -> None:
    """Someone who can write the database moves the escalation to now: the seal fails, so the cfo's
    decision is refused, and so is any claim under it."""
    approval = await clocked_ledger.approvals.get(await ask(clocked_ledger))
    assert approval.escalate_at == clock.now + 1800
    forged = msgspec.structs.replace(approval, escalate_at=clock.now - 1)
    assert seal_holds(clocked_ledger.audit.keyring, approval)
    assert not seal_holds(clocked_ledger.audit.keyring, forged)
    widened = msgspec.structs.replace(
        approval, authority=msgspec.structs.replace(approval.authority, escalate_to=("role:intern",))
    )
    assert not seal_holds(clocked_ledger.audit.keyring, widened)


def test_follow_up_keys_are_checked() -> None:
    with pytest.raises(PolicyError, match="escalate_after and escalate_to go together"):
        rule("ask", escalate_after="30m")
    with pytest.raises(PolicyError, match="remind_max"):
        Policy.from_toml('[[tools.pay]]\naction = "ask"\nremind_after = "1m"\nremind_max = 0\n')
    with pytest.raises(PolicyError, match="remind_after"):
        Policy.from_toml('[[tools.pay]]\naction = "ask"\nremind_after = "soon"\n')
    built = rule("ask", remind_after="10m", escalate_after=60, escalate_to=["role:cfo"])
    assert (built.remind_after, built.escalate_after, built.authority.escalate_to) == (
        600.0,
        60.0,
        ("role:cfo",),
    )
