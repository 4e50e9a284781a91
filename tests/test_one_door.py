"""One door for every decision (issue 41): every surface decides through `ledger.approvals.decide` with a
principal proven by its credential, each kind of credential follows its one rule, and no input reaches a
500.

- A principal row restored around signoff is no one's: its email links decide nothing, and `audit
  verify` reports it.
- An email link is a bearer credential, spent by its first decision; an identity (REST, Slack) follows
  the core's one rule for a second decision: approve once, and deny while the approval still waits.
- Whom a channel tells comes from the approval's seal: a rule rewritten in the table tells nobody.
- Malformed Slack and email forms are 4xx, and decide nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import msgspec
import pytest
from slack_sdk.signature import SignatureVerifier

from signoff.channels.slack import APPROVE, DENY
from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.principal import Authority, Registered
from signoff.ledger import Ledger
from signoff.ledger.evidence import verify
from tests.conftest import drop, make_ledger
from tests.test_email import ask, form_nonce, link_in, mail_for, people, post
from tests.test_email import site as email_site
from tests.test_slack import SIGNING, click, send
from tests.test_slack import people as slack_people
from tests.test_slack import site as slack_site
from tests.test_tamper import Database


@pytest.fixture(params=["sqlite", "postgres"])
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledger]:
    async with make_ledger(str(request.param), tmp_path) as opened:
        yield opened
    await drop(opened)


async def record_of(ledger: Ledger, name: str) -> Registered:
    (found,) = [r for r in await ledger.principals.all() if r.id == name]
    return found


# -- the proven path --------------------------------------------------------------------------------------


async def test_a_principal_row_restored_around_signoff_decides_nothing(ledger: Ledger) -> None:
    """fiona is demoted and frank revoked through signoff; a database write then puts both rows back as
    they were. Their review links, mailed before, decide nothing, and `audit verify` names both rows."""
    await people(ledger)
    for name in ("fiona", "frank"):
        await ledger.principals.register(name, ["finance"], actor="setup")
        await ledger.principals.link(name, email=f"{name}@example.com", actor="setup")
    async with email_site(ledger) as s:
        approval_id = await ask(ledger)
        links = {name: link_in((await mail_for(s.mailbox, f"{name}@example.com"))[0], s.base) for name in
                 ("fiona", "frank")}  # fmt: skip
        nonces = {name: await form_nonce(s.client, link) for name, link in links.items()}
        demoted = await ledger.principals.assign_roles("fiona", ["ops"], actor="admin")
        revoked = await ledger.principals.revoke("frank", "admin")
        database = Database(ledger)
        await database.put(msgspec.structs.replace(demoted, roles=("finance",)))
        await database.put(msgspec.structs.replace(revoked, revoked_at=None, revoked_by=""))
        for name, link in links.items():
            answer = await post(s.client, link, s.base, nonce=nonces[name], decision="approve")
            assert answer.status_code == 403 and "Nothing was decided" in answer.text, (name, answer.text)
        approval = await ledger.approvals.get(approval_id)
        assert approval.state is State.PENDING and approval.votes == ()
    problems = (await verify(ledger)).problems
    assert "principal fiona's record carries no valid proof" in problems
    assert "principal frank's record carries no valid proof" in problems
    assert "principal frank is active in the table, and revoked in the audit" in problems


async def test_a_row_restored_whole_to_an_earlier_proven_version_is_reported(ledger: Ledger) -> None:
    """A row copied out while fiona was in finance, and written back after her demotion, still carries a
    MAC that verifies: `audit verify` tells it from what the audit says her roles are."""
    await ledger.principals.register("fiona", ["finance"], actor="setup")
    before = await record_of(ledger, "fiona")
    await ledger.principals.assign_roles("fiona", ["ops"], actor="admin")
    assert (await verify(ledger)).ok
    await Database(ledger).put(before)
    assert (await verify(ledger)).problems == [
        "principal fiona's roles is ['finance'] in the table, and ['ops'] in the audit"
    ]


# -- a bearer link is spent by its first use --------------------------------------------------------------


async def test_a_link_that_decided_decides_nothing_more(ledger: Ledger) -> None:
    """bob approves from his link, then presses Deny on the same page with the same token and nonce: the
    link was spent, so nothing is decided; the page says what stands and sends him to the inbox."""
    await people(ledger)
    async with email_site(ledger) as s:
        approval_id = await ask(ledger)
        link = link_in((await mail_for(s.mailbox, "bob@example.com"))[0], s.base)
        nonce = await form_nonce(s.client, link)
        approved = await post(s.client, link, s.base, nonce=nonce, decision="approve")
        assert approved.status_code == 200 and "You approved it" in approved.text
        denied = await post(s.client, link, s.base, nonce=nonce, decision="deny", reason="changed my mind")
        assert denied.status_code == 409 and "was used already" in denied.text
        approval = await ledger.approvals.get(approval_id)
        assert approval.state is State.PENDING and [v.decision.by for v in approval.votes] == ["bob"]
        page = await s.client.get(link)
        assert page.status_code == 200 and "used already" in page.text and "<form" not in page.text
        assert f"/approvals#{approval_id}" in page.text, "the inbox, where bob decides as himself"
        (vote,) = approval.votes
        assert (vote.decision.via, vote.decision.credential) == ("email", "bearer")
    refused = [e for e in await ledger.audit.entries() if e.action == "refuse" and e.subject == approval_id]
    assert [(e.actor, e.detail["credential"], e.detail["verdict"]) for e in refused] == [
        ("bob", "bearer", "deny")
    ]


async def test_an_identity_may_deny_after_its_own_approve_and_never_approve_twice(ledger: Ledger) -> None:
    """The core's one rule for an identity's second decision, the same through REST and Slack: cora
    approves twice (the second is refused, 409), then denies, which counts."""
    await slack_people(ledger)
    _, token = await ledger.principals.register("cora", ["finance"], actor="setup")
    await ledger.principals.link("cora", slack="U0CORA", actor="setup")
    bearer = {"authorization": f"Bearer {token}"}
    async with slack_site(ledger) as s:
        for surface in ("rest", "slack"):
            approval = await _asked_for_two(ledger, surface)
            said = []
            for approved in (True, True, False):
                if surface == "slack":
                    clicked = await send(s, click("U0CORA", APPROVE if approved else DENY, approval.id))
                    said.append(clicked.status_code)
                else:
                    url = f"/api/approvals/{approval.id}/decision"
                    decided = await s.client.post(url, json={"approved": approved}, headers=bearer)
                    said.append(decided.status_code)
                if approved:
                    votes = [v.decision.by for v in (await ledger.approvals.get(approval.id)).votes]
                    assert votes == ["cora"], (surface, votes)
            assert said == ([200, 409, 200] if surface == "rest" else [200, 200, 200]), (surface, said)
            assert (await ledger.approvals.get(approval.id)).state is State.DENIED
    refused = [e for e in await ledger.audit.entries() if e.action == "refuse" and e.actor == "cora"]
    assert [(e.detail["via"], e.detail["credential"]) for e in refused] == [
        ("token", "identity"),
        ("slack", "identity"),
    ]
    assert all("cora approved" in e.detail["why"] for e in refused)


async def _asked_for_two(ledger: Ledger, surface: str) -> Approval:
    return await ledger.approvals.open(
        ToolCall(f"two-{surface}", "pay", {"amount": 900}),
        chat_id="chat",
        description="Pay 900",
        rule="pay[0]",
        requester="dave",
        authority=Authority(approvers=("role:finance",), quorum=2, requester_may_approve=False),
        notify=("slack:payments",),
    )


# -- notices from proven records only ---------------------------------------------------------------------


async def test_a_rule_rewritten_in_the_table_tells_nobody(ledger: Ledger) -> None:
    """A database write adds `role:cfo` to an approval's approvers before its notice goes out: carol (cfo)
    is not mailed a link to it, nor is anyone else, and the refusal is audited."""
    await people(ledger)
    await ledger.principals.register("carl", ["cfo"], actor="setup")
    await ledger.principals.link("carl", email="carl@example.com", actor="setup")
    approval_id = await ask(ledger, call_id="tampered")  # its notice waits in the outbox for a server
    approval = await ledger.approvals.get(approval_id)
    widened = Authority(approvers=("role:finance", "role:cfo"), quorum=2, requester_may_approve=False)
    await Database(ledger).put(msgspec.structs.replace(approval, authority=widened))
    async with email_site(ledger) as s:
        for _ in range(200):
            refused = [e for e in await ledger.audit.entries() if e.actor == "signoff:outbox"]
            if refused:
                break
            await _pause()
        assert s.mailbox.to("carl@example.com") == [] and s.mailbox.messages == []
        assert refused and "nobody is told" in refused[0].detail["why"]
    assert any(f"approval {approval_id} is not proven" in p for p in (await verify(ledger)).problems)


async def _pause() -> None:
    await asyncio.sleep(0.02)


# -- no 500 from any input --------------------------------------------------------------------------------


def signed(payload: object, *, stamp: str | None = None) -> tuple[bytes, dict[str, str]]:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = stamp or str(int(time.time()))
    try:
        signature = SignatureVerifier(SIGNING).generate_signature(timestamp=stamp, body=body)
    except ValueError:
        signature = "v0=" + "0" * 64
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature,
    }
    return body, headers


def _action(value: object, **more: object) -> dict[str, object]:
    return {
        "type": "block_actions",
        "user": {"id": "U0CAROL"},
        "actions": [{"action_id": APPROVE, "value": value}],
        **more,
    }


@pytest.mark.parametrize(
    ("payload", "stamp", "status"),
    [
        (_action("apr_x"), "abc", 401),
        (_action({"id": "apr_x"}), None, 400),
        (_action(["apr_x"]), None, 400),
        (_action("APPROVAL", channel="C0PAY"), None, 400),
        (_action("APPROVAL", state="reason"), None, 400),
        ([1, 2], None, 400),
        ({"type": "block_actions"}, None, 400),
    ],
)
async def test_a_malformed_slack_interaction_is_a_4xx_and_decides_nothing(
    ledger: Ledger, payload: object, stamp: str | None, status: int
) -> None:
    await slack_people(ledger)
    async with slack_site(ledger) as s:
        approval = await _asked_for_two(ledger, "slack")
        text = json.dumps(payload).replace("APPROVAL", approval.id)
        answer = await send(s, signed(json.loads(text), stamp=stamp))
        assert answer.status_code == status, answer.text
        assert "error" in answer.json()
        assert (await ledger.approvals.get(approval.id)).votes == ()


async def test_a_review_form_with_too_many_fields_is_a_400_and_decides_nothing(ledger: Ledger) -> None:
    await people(ledger)
    async with email_site(ledger) as s:
        approval_id = await ask(ledger)
        link = link_in((await mail_for(s.mailbox, "bob@example.com"))[0], s.base)
        nonce = await form_nonce(s.client, link)
        many = {f"f{n}": "x" for n in range(12)}
        answer = await post(s.client, link, s.base, nonce=nonce, decision="approve", **many)
        assert answer.status_code == 400 and "Nothing was decided" in answer.text
        twice = await s.client.post(
            link, content=f"nonce={nonce}&decision=approve&decision=deny",
            headers={"origin": s.base, "content-type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        assert twice.status_code == 400
        assert (await ledger.approvals.get(approval_id)).votes == ()
