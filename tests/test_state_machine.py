"""The approval state machine: legal moves only, one winner, one consume, whatever the interleaving."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signoff.core import approval as machine
from signoff.core import claim
from signoff.core.approval import APPROVAL_TRANSITIONS, Approval, State
from signoff.core.audit import Keyring
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyConsumed,
    AlreadyDecided,
    CallMismatch,
    IllegalTransition,
    InvalidDecision,
    SignoffError,
)
from signoff.core.opening import open_approval
from signoff.core.policy import Ruling
from tests.conftest import make_ledger

KEYS = Keyring.ephemeral()
KEY = KEYS.current
ALLOWED = Ruling(action="allow", rule="small", reason="small payments run", description="Pay 20")
"""The policy's ruling on an edited call that it lets run: the edit counts under the rule that asked."""
CALL = ToolCall("call_1", "process_payment", {"amount": 50, "currency": "USD", "recipient": "Hanako"})


def fresh(deadline: float | None = 10.0, on_timeout: machine.OnTimeout = "deny") -> Approval:
    approval, event = open_approval(
        CALL, chat_id="chat", description="Pay", rule="r", now=100.0, key=KEY, deadline=deadline,
        on_timeout=on_timeout,
    )  # fmt: skip
    assert (event.action, event.after, event.subject) == ("open", "pending", approval.id)
    return approval


def test_ids_are_unguessable() -> None:
    ids = {fresh().id for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) >= 4 + 27 for i in ids)  # "apr_" + 160 bits in base64url


def test_approve_then_consume() -> None:
    approved, event = machine.decide(fresh(), Decision.approve("alice", "fine"), 101.0, KEYS)
    assert approved.state is State.APPROVED and approved.by == "alice" and approved.reason == "fine"
    assert (event.before, event.after, event.actor) == ("pending", "approved", "alice")
    consumed, event = claim.consume(approved, CALL, "gate", 102.0, KEYS)
    assert consumed.state is State.CONSUMED and consumed.consumed_at == 102.0
    with pytest.raises(AlreadyConsumed):
        claim.consume(consumed, CALL, "gate", 103.0, KEYS)


def test_first_decision_wins_and_the_loser_learns_the_winner() -> None:
    denied, _ = machine.decide(fresh(), Decision.deny("bob", "too much"), 101.0, KEYS)
    with pytest.raises(AlreadyDecided) as lost:
        machine.decide(denied, Decision.approve("alice"), 101.5, KEYS)
    winner = lost.value.winner.decision
    assert winner is not None and (winner.verdict, winner.by, winner.reason) == ("deny", "bob", "too much")
    assert "denied by bob" in str(lost.value)


@pytest.mark.parametrize("state", [State.DENIED, State.EXPIRED, State.CANCELLED, State.PENDING])
def test_only_an_approved_call_can_be_consumed(state: State) -> None:
    approval = fresh()
    if state is State.DENIED:
        approval, _ = machine.decide(approval, Decision.deny("bob"), 101.0, KEYS)
    elif state is State.EXPIRED:
        approval, _ = machine.expire(approval, 111.0, KEYS)
    elif state is State.CANCELLED:
        approval, _ = machine.cancel(approval, "ops", "withdrawn", 101.0)
    with pytest.raises(IllegalTransition):
        claim.consume(approval, CALL, "gate", 120.0, KEYS)


def test_edit_approves_new_args_and_only_those_can_run() -> None:
    edited, event = machine.decide(
        fresh(), Decision.edit({"amount": 20, "currency": "USD"}, "alice"), 101.0, KEYS, ALLOWED
    )
    assert edited.state is State.APPROVED
    assert edited.approved_call.args == {"amount": 20, "currency": "USD"}
    assert event.detail["digest"] == edited.approved_call.digest != CALL.digest
    with pytest.raises(CallMismatch):
        claim.consume(edited, CALL, "gate", 102.0, KEYS)
    consumed, _ = claim.consume(edited, edited.approved_call, "gate", 102.0, KEYS)
    assert consumed.state is State.CONSUMED


def test_a_decision_after_the_deadline_expires_instead() -> None:
    late, event = machine.decide(fresh(deadline=10.0), Decision.approve("alice"), 110.0, KEYS)
    assert late.state is State.EXPIRED and event.action == "expire"


def test_on_timeout_allow_approves_in_signoffs_name() -> None:
    approved, _ = machine.expire(fresh(on_timeout="allow"), 110.0, KEYS)
    assert approved.state is State.APPROVED and approved.by == machine.TIMEOUT_ACTOR


def test_expire_before_the_deadline_is_illegal() -> None:
    with pytest.raises(IllegalTransition, match="not due"):
        machine.expire(fresh(deadline=10.0), 105.0, KEYS)
    with pytest.raises(IllegalTransition, match="not due"):
        machine.expire(fresh(deadline=None), 10_000.0, KEYS)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Decision(verdict="approve", by=" "),
        lambda: Decision(verdict="maybe", by="a"),  # type: ignore[arg-type]
        lambda: Decision(verdict="edit", by="a"),
        lambda: Decision(verdict="approve", by="a", args={"x": 1}),
        lambda: Decision(verdict="deny", by="a", remember="session"),
        lambda: Decision(verdict="approve", by="a", remember="forever"),  # type: ignore[arg-type]
    ],
)
def test_nonsense_decisions_are_typed_errors(make: object) -> None:
    with pytest.raises(InvalidDecision):
        make()  # type: ignore[operator]


ACTIONS = st.sampled_from(["approve", "deny", "edit", "consume", "cancel", "expire", "tick"])


@given(st.lists(ACTIONS, max_size=30))
def test_random_sequences_follow_the_transition_table(actions: list[str]) -> None:
    approval, now, decided, consumed = fresh(deadline=5.0), 100.0, 0, 0
    for action in actions:
        before = approval.state
        try:
            if action == "tick":
                now += 1.0
                continue
            if action == "approve":
                approval, _ = machine.decide(approval, Decision.approve("a"), now, KEYS)
            elif action == "deny":
                approval, _ = machine.decide(approval, Decision.deny("b"), now, KEYS)
            elif action == "edit":
                approval, _ = machine.decide(approval, Decision.edit({"amount": 1}, "c"), now, KEYS, ALLOWED)
            elif action == "consume":
                approval, _ = claim.consume(approval, approval.approved_call, "g", now, KEYS)
            elif action == "cancel":
                approval, _ = machine.cancel(approval, "ops", "", now)
            else:
                approval, _ = machine.expire(approval, now, KEYS)
        except SignoffError:
            assert approval.state is before
            continue
        assert approval.state in APPROVAL_TRANSITIONS[before].values()
        decided += before is State.PENDING
        consumed += approval.state is State.CONSUMED
    assert decided <= 1 and consumed <= 1


OPS = st.lists(st.sampled_from(["approve", "deny", "consume", "cancel", "expire"]), min_size=2, max_size=24)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_concurrent_interleavings_never_give_two_winners_or_two_consumes(
    backend: str, ops: list[str]
) -> None:
    """Every op races every other one on a real ledger; exactly the legal ones succeed."""

    async def scenario(directory: Path) -> None:
        async with make_ledger(backend, directory) as ledger:
            approval = await ledger.approvals.open(
                CALL, chat_id="chat", description="Pay", rule="r", deadline=0.05
            )

            async def attempt(i: int, op: str) -> str | None:
                await asyncio.sleep(0.001 * (i % 5))
                try:
                    if op == "approve":
                        await ledger.approvals.decide(approval.id, Decision.approve(f"approver{i}"))
                    elif op == "deny":
                        await ledger.approvals.decide(approval.id, Decision.deny(f"denier{i}"))
                    elif op == "consume":
                        await ledger.approvals.consume(approval.id, CALL, f"runner{i}")
                    elif op == "cancel":
                        await ledger.approvals.cancel(approval.id, f"ops{i}")
                    else:
                        await ledger.approvals.expire_due()
                        return None
                except SignoffError:
                    return None
                return op

            wins = [w for w in await asyncio.gather(*(attempt(i, op) for i, op in enumerate(ops))) if w]
            final = await ledger.approvals.get(approval.id)
            assert len([w for w in wins if w in ("approve", "deny", "cancel")]) <= 1
            assert wins.count("consume") <= 1
            assert (final.state is State.CONSUMED) == ("consume" in wins)
            entries = await ledger.audit.entries()
            assert len([e for e in entries if e.action == "consume"]) == wins.count("consume")
            assert len([e for e in entries if e.before == "pending"]) <= 1
            assert (await ledger.audit.verify())[1] is None

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(scenario(Path(directory)))
