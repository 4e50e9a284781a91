"""Authority never grows inside a decision, on every ledger backend: an edit is a new call the policy rules
on afresh, and a grant answers for a later call only where that call's own rule would have let its maker,
with the roles it has now, decide it alone."""

from __future__ import annotations

from typing import Any

import pytest

from signoff import Decision, Ledger, Policy, ToolCall
from signoff.core.approval import State
from signoff.core.errors import EditNotAdmitted, EditRefused, MayNotRemember, NotAnApprover
from signoff.core.principal import Principal
from signoff.gate import Allowed, Gate, Pending

POLICY = Policy.from_toml(
    """
    [[tools.pay]]
    action = "deny"
    when = 'normal(recipient) == "blocked"'

    [[tools.pay]]
    action = "ask"
    when = "amount > 500"
    description = "Pay {amount} to {recipient}"
    deadline = "10m"
    approvers = ["role:finance"]
    quorum = 2
    requester_may_approve = false

    [[tools.pay]]
    action = "ask"
    when = "amount > 100"
    description = "Pay {amount} to {recipient}"
    deadline = "1h"
    approvers = ["role:finance"]
    remember_always = ["role:finance"]

    [[tools.pay]]
    action = "allow"
    when = "amount <= 5"

    [[tools.pay]]
    action = "ask"
    description = "Pay {amount} to {recipient}"
    deadline = "30m"
    approvers = ["role:ops", "requester"]
    remember_always = ["role:ops"]

    [[tools.audit]]
    action = "ask"
    approvers = ["role:ops"]
    requester_may_approve = false
    remember_always = ["role:ops"]
    """
)
"""Like the demo's: over 500 takes two of finance and never the requester; over 100 one of finance; up to
100 the chat's owner or ops; 5 or less runs; a blocked recipient never."""
OWNER = Principal(id="browser:own", name="browser own", via="session")
ADMIN = Principal(id="admin", name="admin", roles=("admin",), via="bootstrap")
ALICE = Principal(id="alice", roles=("finance",), via="token")


def pay(amount: int, recipient: str = "Hanako", call_id: str = "call_1") -> ToolCall:
    return ToolCall(call_id, "pay", {"amount": amount, "recipient": recipient})


async def asked(gate: Gate, call: ToolCall, chat: str = "c1", requester: str = OWNER.id) -> str:
    outcome = await gate.authorize(call, chat_id=chat, wait="deferred", requester=requester)
    assert isinstance(outcome, Pending), outcome
    return outcome.approval.id


async def refusals(ledger: Ledger, subject: str, action: str = "refuse") -> list[dict[str, Any]]:
    return [
        e.detail for e in await ledger.audit.entries(0, 10_000) if e.action == action and e.subject == subject
    ]


async def principal(ledger: Ledger, name: str, *roles: str) -> Principal:
    _, token = await ledger.principals.register(name, list(roles), actor="test")
    found = await ledger.principals.authenticate(token)
    assert found is not None
    return found


# -- an edit is a new call ----------------------------------------------------------------------------------


async def test_an_edit_to_a_stricter_rule_by_one_it_does_not_admit_is_refused(ledger: Ledger) -> None:
    """The chat's owner may decide its 50, and edits it to 900 to Mallory: that call needs two of finance
    and never the requester, so the edit is refused and nothing runs."""
    gate = Gate(ledger, POLICY)
    approval_id = await asked(gate, pay(50))
    edit = Decision.edit({"amount": 900, "recipient": "Mallory"}, OWNER)
    with pytest.raises(EditNotAdmitted, match="the edited call needs finance, 0 of 2") as refused:
        await ledger.approvals.decide(approval_id, edit, policy=POLICY)
    assert isinstance(refused.value, NotAnApprover), "every channel answers it as a 403"
    unchanged = await ledger.approvals.get(approval_id)
    assert unchanged.state is State.PENDING and unchanged.approved_call == pay(50) and not unchanged.votes
    assert unchanged.rule == "pay[4]" and unchanged.authority.quorum == 1
    ran: list[dict[str, Any]] = []
    assert isinstance(await gate.run(pay(50), ran.append, chat_id="c1", wait="deferred"), Pending)
    assert ran == []
    assert ["may not make this edit" in r["why"] for r in await refusals(ledger, approval_id)] == [True]


async def test_an_edit_to_a_stricter_rule_by_one_it_admits_takes_that_rule(ledger: Ledger) -> None:
    """An admin may decide both: the approval now asks what the edited call asks (its approvers, quorum, four
    eyes, description), the count starts again from the admin, and the deadline is never later."""
    gate = Gate(ledger, POLICY)
    approval_id = await asked(gate, pay(50))
    before = await ledger.approvals.get(approval_id)
    edited = await ledger.approvals.decide(
        approval_id, Decision.edit({"amount": 900, "recipient": "Mallory"}, ADMIN), policy=POLICY
    )
    assert edited.state is State.PENDING and edited.tally == "1 of 2: admin"
    assert (edited.rule, edited.authority.approvers, edited.authority.quorum) == (
        "pay[1]",
        ("role:finance",),
        2,
    )
    assert not edited.authority.requester_may_approve and edited.description == "Pay 900 to Mallory"
    assert before.deadline is not None and edited.deadline is not None
    assert edited.deadline <= before.deadline, "the 10m rule's deadline, not the 30m one's, and never later"
    with pytest.raises(NotAnApprover):  # the chat's owner asked for it: four eyes now
        await ledger.approvals.decide(approval_id, Decision.approve(OWNER), policy=POLICY)
    done = await ledger.approvals.decide(approval_id, Decision.approve(ALICE), policy=POLICY)
    assert done.state is State.APPROVED and done.tally == "2 of 2: admin, alice"
    ran: list[dict[str, Any]] = []
    outcome = await gate.run(pay(50), lambda **a: ran.append(a), chat_id="c1", wait="deferred")
    assert outcome is None and ran == [{"amount": 900, "recipient": "Mallory"}]
    assert (await ledger.audit.verify())[1] is None


async def test_an_edit_never_extends_the_deadline(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    approval_id = await asked(gate, pay(600))  # the 10m rule
    before = await ledger.approvals.get(approval_id)
    edited = await ledger.approvals.decide(
        approval_id, Decision.edit({"amount": 200, "recipient": "Jiro"}, ADMIN), policy=POLICY
    )
    assert edited.rule == "pay[2]" and edited.deadline == before.deadline, "the 1h rule does not extend it"
    assert edited.state is State.APPROVED, "one of finance, or an admin, is enough for 200"


async def test_an_edit_to_a_denied_call_is_refused_and_the_approval_waits(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    approval_id = await asked(gate, pay(50))
    with pytest.raises(EditRefused, match="normal\\(recipient\\)"):
        await ledger.approvals.decide(
            approval_id, Decision.edit({"amount": 50, "recipient": "Blocked"}, ADMIN), policy=POLICY
        )
    assert (await ledger.approvals.get(approval_id)).state is State.PENDING
    assert len(await refusals(ledger, approval_id)) == 1


async def test_an_edit_to_an_allowed_call_counts_under_the_rule_that_asked(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    approval_id = await asked(gate, pay(50))
    edited = await ledger.approvals.decide(
        approval_id, Decision.edit({"amount": 5, "recipient": "Hanako"}, OWNER), policy=POLICY
    )
    assert (
        edited.state is State.APPROVED
        and edited.rule == "pay[4]"
        and edited.approved_call.args["amount"] == 5
    )


# -- a grant answers only for what its maker could have decided ----------------------------------------------


async def test_always_from_a_principal_without_a_listed_role_is_refused(ledger: Ledger) -> None:
    """A principal with no role approves its own small payment and asks to remember it for every chat: a 403,
    and the approval is not decided."""
    gate = Gate(ledger, POLICY)
    approval_id = await asked(gate, pay(50, "Mallory"))
    with pytest.raises(MayNotRemember, match="remember_always"):
        await ledger.approvals.decide(approval_id, Decision.approve(OWNER, remember="always"), policy=POLICY)
    assert (
        await ledger.approvals.get(approval_id)
    ).state is State.PENDING and await ledger.grants.query() == []
    olga = await principal(ledger, "olga", "ops")
    await ledger.approvals.decide(approval_id, Decision.approve(olga, remember="always"), policy=POLICY)
    assert [g.scope for g in await ledger.grants.query()] == ["always"], "ops is listed for this rule"
    big = await asked(gate, pay(200, "Mallory", call_id="c2"))  # one of finance; finance may remember
    await ledger.approvals.decide(big, Decision.approve(ADMIN, remember="always"), policy=POLICY)
    assert [g.scope for g in await ledger.grants.query()] == ["always", "always"], "an admin may, anywhere"


async def test_a_grant_is_used_only_where_its_maker_could_decide_alone(ledger: Ledger) -> None:
    """olga (ops) remembers a payment to Mallory for every chat, any amount. Another chat's 50 runs with
    nobody asked; its 200 needs finance, which olga lacks; its 700 needs two: both asked, and the audit says
    why the grant did not apply."""
    gate = Gate(ledger, POLICY)
    olga = await principal(ledger, "olga", "ops")
    approval_id = await asked(gate, pay(50, "Mallory"))
    await ledger.approvals.decide(
        approval_id, Decision.approve(olga, remember="always", any_args=True), policy=POLICY
    )
    (grant,) = await ledger.grants.query()
    assert (grant.via, grant.roles) == ("token", ("ops",))

    used = await gate.authorize(pay(60, "Mallory", "b1"), chat_id="other", wait="deferred", requester="dave")
    assert isinstance(used, Allowed) and used.via == "grant" and used.by == "olga"
    for amount, why in ((200, "may not decide the call: it waits for finance"), (700, "needs 2 approvers")):
        call = pay(amount, "Mallory", f"b{amount}")
        outcome = await gate.authorize(call, chat_id="other", wait="deferred", requester="dave")
        assert isinstance(outcome, Pending), amount
        assert why in (await refusals(ledger, grant.id, "unused"))[-1]["why"]


async def test_a_grant_stops_working_when_its_maker_is_demoted_or_revoked(ledger: Ledger) -> None:
    gate = Gate(ledger, POLICY)
    olga = await principal(ledger, "olga", "ops")
    approval_id = await asked(gate, pay(50, "Mallory"))
    await ledger.approvals.decide(approval_id, Decision.approve(olga, remember="always"), policy=POLICY)
    again = pay(50, "Mallory", "b1")
    used = await gate.authorize(again, chat_id="other", wait="deferred", requester="dave")
    assert isinstance(used, Allowed) and used.via == "grant"
    await ledger.principals.assign_roles("olga", [], "test")
    demoted = await gate.authorize(
        pay(50, "Mallory", "b2"), chat_id="other", wait="deferred", requester="dave"
    )
    assert isinstance(demoted, Pending), "olga has no role now: her grant answers for nothing"
    await ledger.principals.assign_roles("olga", ["ops"], "test")
    await ledger.principals.revoke("olga", "test")
    revoked = await gate.authorize(
        pay(50, "Mallory", "b3"), chat_id="other", wait="deferred", requester="dave"
    )
    assert isinstance(revoked, Pending)
    whys = [r["why"] for r in await refusals(ledger, (await ledger.grants.query())[0].id, "unused")]
    assert "waits for ops or the requester" in whys[0] and "is revoked" in whys[1]


async def test_four_eyes_holds_against_a_grant(ledger: Ledger) -> None:
    """olga (ops) remembers an audit run for every chat; in her own chat the rule wants another's eyes, so
    her grant does not answer for her own request."""
    gate = Gate(ledger, POLICY)
    olga = await principal(ledger, "olga", "ops")
    run = ToolCall("a1", "audit", {"books": "2026"})
    asked_by_dave = await gate.authorize(run, chat_id="c1", wait="deferred", requester="dave")
    assert isinstance(asked_by_dave, Pending)
    await ledger.approvals.decide(
        asked_by_dave.approval.id, Decision.approve(olga, remember="always"), policy=POLICY
    )
    for_dave = await gate.authorize(
        ToolCall("a2", "audit", run.args), chat_id="c2", wait="deferred", requester="dave"
    )
    assert isinstance(for_dave, Allowed) and for_dave.via == "grant"
    for_olga = await gate.authorize(
        ToolCall("a3", "audit", run.args), chat_id="c3", wait="deferred", requester="olga"
    )
    assert isinstance(for_olga, Pending)
    grant_id = (await ledger.grants.query())[0].id
    assert "rule wants another's eyes" in (await refusals(ledger, grant_id, "unused"))[0]["why"]
