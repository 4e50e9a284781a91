"""Who may decide, on every ledger backend: quorum of distinct principals, four eyes, roles, a deny that
ends it, an edit that restarts the count; and principals registered with tokens kept only as hashes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
import redis

from signoff import Decision, Ledger, Policy, PolicyError, ToolCall
from signoff.core.approval import State
from signoff.core.errors import AlreadyVoted, InvalidDecision, NotAnApprover, PrincipalExists
from signoff.core.principal import ANONYMOUS, Authority, Principal
from signoff.gate import Allowed, Gate, Pending
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.redis import RedisLedger
from signoff.ledger.sqlite import SqliteLedger
from tests.conftest import POSTGRES, REDIS

FINANCE_TWO = Authority(approvers=("role:finance",), quorum=2, requester_may_approve=False)
ALICE = Principal(id="alice", name="Alice", roles=("finance",), via="token")
BOB = Principal(id="bob", roles=("finance",), via="token")
CAROL = Principal(id="carol", roles=("finance",), via="oidc")
SUPPORT = Principal(id="sam", roles=("support",), via="token")
FINANCE_POLICY = Policy.from_dict(
    {
        "tools": {
            "process_payment": [
                {"action": "ask", "approvers": ["role:finance"], "quorum": 2, "requester_may_approve": False}
            ]
        }
    }
)
"""What `FINANCE_TWO` comes from: an edit's call is ruled on by it."""
PAY = ToolCall("call_1", "process_payment", {"amount": 600, "currency": "USD", "recipient": "Hanako"})


async def asked(ledger: Ledger, authority: Authority = FINANCE_TWO, requester: str = "carol") -> str:
    approval = await ledger.approvals.open(
        PAY, chat_id="c1", description="Pay", rule="r", requester=requester, authority=authority
    )
    return approval.id


async def refusals(ledger: Ledger, subject: str) -> list[str]:
    return [e.actor for e in await ledger.audit.entries() if e.action == "refuse" and e.subject == subject]


async def test_two_distinct_principals_reach_the_quorum(ledger: Ledger) -> None:
    approval_id = await asked(ledger)
    first = await ledger.approvals.decide(approval_id, Decision.approve(ALICE, "ok"))
    assert first.state is State.PENDING and first.tally == "1 of 2: Alice"
    assert first.awaited == "finance, 1 of 2: Alice"
    second = await ledger.approvals.decide(approval_id, Decision.approve(BOB))
    assert second.state is State.APPROVED and second.tally == "2 of 2: Alice, bob"
    assert second.by == "bob" and [v.decision.by for v in second.votes] == ["alice", "bob"]
    assert (await ledger.approvals.get(approval_id)).state is State.APPROVED
    entries = [e for e in await ledger.audit.entries() if e.subject == approval_id]
    assert [(e.action, e.actor, e.after) for e in entries] == [
        ("open", "signoff:gate", "pending"),
        ("approve", "alice", "pending"),
        ("approve", "bob", "approved"),
    ]
    assert entries[1].detail["via"] == "token" and entries[1].detail["votes"] == 1
    assert await ledger.audit.verify() == (3, None)


async def test_the_same_principal_twice_is_refused_and_audited(ledger: Ledger) -> None:
    approval_id = await asked(ledger)
    await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    with pytest.raises(AlreadyVoted, match="alice approved"):
        await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    again = await ledger.approvals.get(approval_id)
    assert again.state is State.PENDING and len(again.votes) == 1
    assert await refusals(ledger, approval_id) == ["alice"]


async def test_a_principal_without_the_role_may_not_decide(ledger: Ledger) -> None:
    approval_id = await asked(ledger)
    for decision in (Decision.approve(SUPPORT), Decision.deny(SUPPORT, "no")):
        with pytest.raises(NotAnApprover, match=r"sam may not decide .* it waits for finance"):
            await ledger.approvals.decide(approval_id, decision)
    assert (await ledger.approvals.get(approval_id)).state is State.PENDING
    assert await refusals(ledger, approval_id) == ["sam", "sam"]


async def test_four_eyes_the_requester_never_counts(ledger: Ledger) -> None:
    approval_id = await asked(ledger, requester="alice")
    with pytest.raises(NotAnApprover):
        await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    admin_requester = Principal(id="root", roles=("admin", "finance"), via="cli")
    own = await asked_again(ledger, requester="root")
    with pytest.raises(NotAnApprover):  # not even an admin approves its own request under four eyes
        await ledger.approvals.decide(own, Decision.approve(admin_requester))
    await ledger.approvals.decide(approval_id, Decision.approve(BOB))
    done = await ledger.approvals.decide(approval_id, Decision.approve(CAROL))
    assert done.state is State.APPROVED


async def asked_again(ledger: Ledger, requester: str) -> str:
    call = ToolCall("call_2", PAY.tool, PAY.args)
    approval = await ledger.approvals.open(
        call, chat_id="c1", description="Pay", rule="r", requester=requester, authority=FINANCE_TWO
    )
    return approval.id


async def test_one_deny_after_an_approve_denies(ledger: Ledger) -> None:
    approval_id = await asked(ledger)
    await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    denied = await ledger.approvals.decide(approval_id, Decision.deny(BOB, "not this month"))
    assert denied.state is State.DENIED and denied.by == "bob" and denied.reason == "not this month"
    with pytest.raises(Exception, match="already decided"):
        await ledger.approvals.decide(approval_id, Decision.approve(CAROL))


async def test_an_edit_restarts_the_count_for_the_edited_call(ledger: Ledger) -> None:
    approval_id = await asked(ledger)
    await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    edit = Decision.edit({**PAY.args, "amount": 550}, BOB)
    edited = await ledger.approvals.decide(approval_id, edit, policy=FINANCE_POLICY)
    assert edited.state is State.PENDING and edited.tally == "1 of 2: bob"
    assert edited.approved_call.args["amount"] == 550
    done = await ledger.approvals.decide(
        approval_id, Decision.approve(ALICE)
    )  # alice approves the edited call
    assert done.state is State.APPROVED and done.approved_call.args["amount"] == 550
    with pytest.raises(Exception, match="not the call"):
        await ledger.approvals.consume(approval_id, PAY, "gate")  # the original arguments can no longer run
    await ledger.approvals.consume(approval_id, done.approved_call, "gate")


async def test_a_quorum_cannot_be_remembered(ledger: Ledger) -> None:
    approval_id = await asked(ledger)
    with pytest.raises(InvalidDecision, match="needs 2 approvers"):
        await ledger.approvals.decide(approval_id, Decision.approve(ALICE, remember="session"))


async def test_the_default_authority_is_the_requester_admins_and_the_programs_own_approvers(
    ledger: Ledger,
) -> None:
    default = Authority()
    owner = Principal(id="browser:x", via="session")
    approval_id = await asked(ledger, default, requester=owner.id)
    with pytest.raises(NotAnApprover, match="waits for the requester or an admin"):
        await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    assert (await ledger.approvals.decide(approval_id, Decision.approve(owner))).state is State.APPROVED
    for who in (Principal(id="admin", roles=("admin",), via="bootstrap"), Principal(id="callback")):
        call = ToolCall(f"c-{who.id}", PAY.tool, PAY.args)
        opened = await ledger.approvals.open(
            call, chat_id="c1", description="d", rule="r", requester=owner.id
        )
        assert (await ledger.approvals.decide(opened.id, Decision.approve(who))).state is State.APPROVED


async def test_the_gate_asks_with_the_rules_authority_and_the_requester() -> None:
    from signoff import MemoryLedger

    policy = Policy.from_toml(
        """
        [[tools.process_payment]]
        action = "ask"
        approvers = ["role:finance", "dana"]
        quorum = 2
        requester_may_approve = false
        """
    )
    async with MemoryLedger() as ledger:
        gate = Gate(ledger, policy)
        pending = await gate.authorize(PAY, chat_id="c1", wait="deferred", requester="alice")
        assert isinstance(pending, Pending)
        approval = pending.approval
        assert approval.requester == "alice" and approval.authority.quorum == 2
        assert approval.authority.awaited() == "finance or dana"
        await ledger.approvals.decide(approval.id, Decision.approve(Principal(id="dana")))
        waiting = asyncio.ensure_future(gate.authorize(PAY, chat_id="c1", requester="alice"))
        await asyncio.sleep(0.01)
        assert not waiting.done(), "one vote of two decides nothing"
        await ledger.approvals.decide(approval.id, Decision.approve(BOB))
        outcome = await asyncio.wait_for(waiting, 5)
        assert isinstance(outcome, Allowed) and outcome.by == "bob"


async def test_an_approver_callback_the_rule_does_not_name_abstains() -> None:
    """A callback's decision is judged like any other: one from a principal the rule does not admit
    counts for nothing (audited), and the call waits for a decision that counts."""
    from signoff import MemoryLedger

    policy = Policy.from_dict(
        {"tools": {"process_payment": [{"action": "ask", "approvers": ["role:finance"]}]}}
    )
    async with MemoryLedger() as ledger:
        refused = asyncio.Event()

        async def intern(approval: object) -> Decision:
            return Decision.approve("intern")

        async def after_the_intern() -> None:
            while not {"refuse", "approver-failed"} <= {e.action for e in await ledger.audit.entries()}:
                await asyncio.sleep(0.01)
            refused.set()
            held = await ledger.approvals.find("c1", PAY.call_id)
            assert held is not None and held.state is State.PENDING
            await ledger.approvals.decide(held.id, Decision.approve(BOB))

        gate = Gate(ledger, policy, approvers=[intern])
        deciding = asyncio.ensure_future(after_the_intern())
        outcome = await asyncio.wait_for(gate.authorize(PAY, chat_id="c1", requester=ANONYMOUS.id), 30)
        await deciding
        assert refused.is_set() and isinstance(outcome, Allowed) and outcome.by == "bob"
        refusal = next(e for e in await ledger.audit.entries() if e.action == "refuse")
        assert refusal.actor == "intern"


@pytest.mark.parametrize(
    ("rule", "fault"),
    [
        ('approvers = "finance"', "must be a list"),
        ("approvers = []", "at least one approver"),
        ('approvers = ["role:"]', "names no role"),
        ('approvers = [" alice"]', "an approver must be"),
        ("quorum = 0", "from 1 to 100"),
        ("quorum = true", "from 1 to 100"),
        ('requester_may_approve = "no"', "true or false"),
        ('approvers = ["requester"]\nrequester_may_approve = false', "excludes"),
    ],
)
def test_a_bad_authority_in_a_policy_is_named(rule: str, fault: str) -> None:
    with pytest.raises(PolicyError, match=f"tools.pay\\[0\\].*{fault}"):
        Policy.from_toml(f'[[tools.pay]]\naction = "ask"\n{rule}\n', source="p.toml")


# -- principals registered with personal tokens ------------------------------------------------------------


async def test_tokens_are_stored_only_as_hashes_and_revoked_at_once(ledger: Ledger, tmp_path: Path) -> None:
    record, token = await ledger.principals.register("alice", ["finance"], display="Alice", actor="cli:root")
    assert token.startswith("sop_") and len(token) > 40 and record.token_hash != token
    assert await ledger.principals.authenticate(token) == Principal(
        id="alice", name="Alice", roles=("finance",), via="token"
    )
    assert await ledger.principals.authenticate(token + "x") is None
    assert token not in await stored_text(ledger, tmp_path), "the token itself must never be stored"
    with pytest.raises(PrincipalExists):
        await ledger.principals.register("alice", [], actor="cli:root")
    changed = await ledger.principals.assign_roles("alice", ["finance", "ops"], "cli:root")
    assert changed.roles == ("finance", "ops")
    assert (await ledger.principals.authenticate(token)).roles == ("finance", "ops")  # type: ignore[union-attr]
    await ledger.principals.revoke("alice", "cli:root")
    assert await ledger.principals.authenticate(token) is None
    assert [p.id for p in await ledger.principals.all()] == ["alice"]
    assert [e.action for e in await ledger.audit.entries()] == ["register", "roles", "revoke"]
    assert await ledger.audit.verify() == (3, None)


async def test_two_registrations_of_one_name_race_and_one_wins(ledger: Ledger) -> None:
    results = await asyncio.gather(
        *(ledger.principals.register("zed", [], actor=f"cli:{n}") for n in range(5)), return_exceptions=True
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, PrincipalExists) for r in results if isinstance(r, BaseException))


async def stored_text(ledger: Ledger, tmp_path: Path) -> str:
    """Everything the backend holds, as text: the database file, every row, or every key and value."""
    if isinstance(ledger, SqliteLedger):
        await ledger.close()
        text = b"".join(p.read_bytes() for p in tmp_path.glob("signoff.db*")).decode("latin-1")
        await ledger.start()
        return text
    if isinstance(ledger, PostgresLedger):
        async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
            await conn.execute(f"SET search_path = {ledger.schema}")
            rows = await (await conn.execute("SELECT id, token_hash, record FROM principals")).fetchall()
            audit = await (await conn.execute("SELECT detail FROM audit")).fetchall()
        return repr(rows) + repr(audit)
    if isinstance(ledger, RedisLedger):
        async with redis.asyncio.Redis.from_url(REDIS) as client:
            found = []
            async for key in client.scan_iter(match=f"{ledger.prefix}:*"):
                kind = await client.type(key)
                if kind == b"hash":
                    found.append(repr(await client.hgetall(key)))
                elif kind == b"stream":
                    found.append(repr(await client.xrange(key)))
            return "".join(found)
    return repr(await ledger.principals.all()) + repr(await ledger.audit.entries())


async def test_principals_that_read_alike_are_told_apart(ledger: Ledger) -> None:
    """Two principals given one display name, and an identity provider's user who named itself like a
    registered one: the tally says which is which."""
    approval_id = await asked(ledger)
    await ledger.approvals.decide(approval_id, Decision.approve(ALICE))
    namesake = Principal(id="alice2", name="Alice", roles=("finance",), via="token")
    assert (
        await ledger.approvals.decide(approval_id, Decision.approve(namesake))
    ).tally == "2 of 2: Alice [alice], Alice [alice2]"
    other = await asked_again(ledger, requester="carol")
    intruder = Principal(id="oidc:intruder-42", name="Alice", roles=("finance",), via="oidc")
    await ledger.approvals.decide(other, Decision.approve(intruder))
    done = await ledger.approvals.decide(other, Decision.approve(ALICE))
    assert done.tally == "2 of 2: Alice (oidc: intruder-42), Alice"
    assert intruder.described == "Alice (oidc: intruder-42; finance)"


async def test_a_session_grant_answers_only_for_its_chats_requester(ledger: Ledger) -> None:
    """Two principals can ask in chats of one name (the MCP gateway names a token's `alice` and the stdio
    OS user `mcp:alice` both `mcp:alice`): a grant remembered for this chat answers only for the calls of
    the requester it was given for."""
    gate = Gate(ledger, Policy())
    admin = Principal(id="admin", roles=("admin",), via="bootstrap")
    asked = await gate.authorize(PAY, chat_id="mcp:alice", wait="deferred", requester="alice")
    assert isinstance(asked, Pending)
    await ledger.approvals.decide(asked.approval.id, Decision.approve(admin, remember="session"))
    again = ToolCall("call_2", PAY.tool, PAY.args)
    theirs = await gate.authorize(again, chat_id="mcp:alice", wait="deferred", requester="mcp:alice")
    assert isinstance(theirs, Pending), "another requester's identical call is asked anew"
    mine = await gate.authorize(
        ToolCall("call_3", PAY.tool, PAY.args), chat_id="mcp:alice", requester="alice"
    )
    assert isinstance(mine, Allowed) and mine.via == "grant"
    unused = [e for e in await ledger.audit.entries() if e.action == "unused"]
    assert [e.detail["why"] for e in unused] == [
        "it was given for alice's calls in this chat, not mcp:alice's"
    ]
