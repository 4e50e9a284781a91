"""Words for people (issue 20): whoever settled an approval reads as a person wherever a person or the model
reads it, "the user", "alice (finance)", "the deadline", "a new message", never an id such as
`browser:3ffc…` or `signoff:timeout`."""

from __future__ import annotations

import re

import pytest

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.policy import Policy
from signoff.core.principal import Principal
from signoff.core.views import approval_json
from signoff.core.wording import WITHDRAWN
from signoff.demo.script import sentence
from signoff.gate import Gate, Refused
from signoff.ledger import MemoryLedger

OWNER = "browser:3ffc9a1e"
ALICE = Principal(id="oidc:alice-7f3a", name="alice", roles=("finance",), via="oidc")
ID = re.compile(r"\b(browser|signoff|oidc|chat):\S")
"""An id as signoff makes them (`oidc:alice-7f3a`); words may name a source (`alice (oidc: alice-7f3a)`)."""


async def settle(how: str) -> tuple[Approval, Refused]:
    """One payment asked in a chat owned by `OWNER`, settled `how`, and what the model hears of it."""
    rule = '[[tools.pay]]\naction = "ask"\ndeadline = "1s"\napprovers = ["requester", "role:finance"]\n'
    policy = Policy.from_toml(rule)
    clock = [1000.0]
    async with MemoryLedger(clock=lambda: clock[0]) as ledger:
        gate = Gate(ledger, policy)
        call = ToolCall(f"call-{how}", "pay", {"amount": 50})
        approval = (await gate.authorize(call, chat_id="c1", wait="deferred", requester=OWNER)).approval  # type: ignore[union-attr]
        match how:
            case "owner":
                await ledger.approvals.decide(
                    approval.id,
                    Decision.deny(Principal(id=OWNER, name="browser 3ffc9a", via="session"), "no"),
                )
            case "alice":
                await ledger.approvals.decide(approval.id, Decision.deny(ALICE, "too much"))
            case "deadline":
                clock[0] += 5
            case "new message":
                await ledger.approvals.cancel(approval.id, OWNER, WITHDRAWN)
        refused = await gate.authorize(call, chat_id="c1", wait="deferred", requester=OWNER)
        assert isinstance(refused, Refused)
        return await ledger.approvals.get(approval.id), refused


async def test_the_model_and_the_api_name_people_and_never_ids() -> None:
    expected = {
        "owner": ("the user", "denied by the user: no"),
        "alice": (  # an identity provider's name, so its source shows: it can't pass for a registered alice
            "alice (oidc: alice-7f3a; finance)",
            "denied by alice (oidc: alice-7f3a; finance): too much",
        ),
        "deadline": ("the deadline", "expired by the deadline: no decision before the deadline"),
        "new message": ("a new message", f"cancelled by a new message: {WITHDRAWN}"),
    }
    for how, (who, message) in expected.items():
        approval, refused = await settle(how)
        assert approval.settled_by() == who and refused.message == message, how
        assert refused.to_result()["by"] == who and not ID.search(str(refused.to_result()))
        shown = approval_json(approval)
        words = shown.get("decision", shown.get("closed", {}))["who"]
        assert not ID.search(words), (how, words)
    approval, _ = await settle("owner")
    assert approval_json(approval)["decision"]["who"] == "the chat's user"  # as an approver reads it


async def test_a_policy_denial_names_the_policy() -> None:
    gate = Gate(MemoryLedger(), Policy.from_toml('[[tools.pay]]\naction = "deny"\n'))
    refused = await gate.authorize(ToolCall("c", "pay", {}), chat_id="c1")
    assert isinstance(refused, Refused) and refused.message.startswith("denied by the policy: ")
    assert refused.by == "pay[0]" and not ID.search(refused.message)


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            "denied by the user: User denied the tool execution.",
            "denied by the user: User denied the tool execution.",
        ),
        ("denied by the user: why?", "denied by the user: why?"),
        ("denied by the user: no", "denied by the user: no."),
    ],
)
def test_the_demo_model_ends_a_refusal_with_one_full_stop(message: str, said: str) -> None:
    """The seed's page denies with "User denied the tool execution.": the model's sentence ends there,
    with no second period."""
    refused = {"status": "denied", "message": message}
    assert sentence("process_payment", {"amount": 5, "currency": "USD", "recipient": "Jiro"}, refused) == (
        f"I did not pay 5 USD to Jiro: {said}"
    )
