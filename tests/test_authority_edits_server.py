"""Authority inside a decision over real HTTP, on SQLite, PostgreSQL and Redis, against the demo's policy
(payments over 500 need two distinct principals of finance, never the requester): an edit is ruled on as
the call it makes, an `always` grant needs the authority to answer for others' chats, a principal written
in its table proves nothing, and names that read alike are told apart."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from tests.test_authority_server import Issuer, Site, issuer, pending, said, site, user
from tests.test_tamper import Database

__all__ = ["issuer", "site"]  # the fixtures these tests use, from the module that defines them


async def test_an_edit_is_judged_by_the_rule_of_the_call_it_makes(site: Site) -> None:
    """The issue's attack: a chat owner with no role edits its own "pay 50 USD to Hanako" to 900 USD to
    Mallory and approves it alone. Now that edit is a 403 naming the rule it would need; an admin's edit
    takes that rule (two of finance, four eyes), and the payment runs once finance's second approves."""
    async with site.client("olivia") as olivia, site.client("admin") as admin, site.client("alice") as alice:
        reply = asyncio.ensure_future(
            olivia.post("/api/chat", json=user("edit", "pay 50 USD to Hanako", wait="blocking"))
        )
        asked = await pending(admin, "edit")
        url = f"/api/approvals/{asked['id']}/decision"
        bigger = {"amount": 900, "currency": "USD", "recipient": "Mallory"}
        own = await olivia.post(url, json={"approved": True, "args": bigger})
        assert own.status_code == 403, own.text
        assert "the edited call needs finance, 0 of 2" in own.json()["error"]["message"]
        unchanged = (await admin.get(f"/api/approvals/{asked['id']}")).json()
        assert unchanged["call"]["args"]["amount"] == 50 and "edited" not in unchanged
        assert unchanged["state"] == "pending" and unchanged["quorum"] == 1

        edited = await admin.post(url, json={"approved": True, "args": bigger})
        assert edited.status_code == 200, edited.text
        shown = edited.json()
        assert (shown["state"], shown["tally"], shown["rule"]) == (
            "pending",
            "1 of 2: admin",
            "process_payment[0]",
        )
        assert shown["approvers"] == ["role:finance"] and shown["quorum"] == 2
        assert shown["requester_may_approve"] is False and shown["description"] == "Pay 900 USD to Mallory"
        assert shown["awaiting"] == "finance" and shown["edited"]["args"] == bigger
        olivia_votes = await olivia.post(f"/api/chat/edit/approvals/{asked['id']}", json={"approved": True})
        assert olivia_votes.status_code == 403, "four eyes now: the requester never counts"
        assert not reply.done(), "one approval of two runs nothing"
        done = await alice.post(url, json={"approved": True})
        assert done.status_code == 200 and done.json()["tally"] == "2 of 2: admin, alice"
        assert "Paid 900 USD to Mallory" in said((await reply).text)
    entries = [e for e in await site.ledger.audit.entries(0, 10_000) if e.subject == asked["id"]]
    assert [e.action for e in entries if e.action in ("refuse", "edit", "approve", "consume")] == [
        "refuse", "edit", "refuse", "approve", "consume",
    ]  # fmt: skip


async def test_always_needs_an_admin_or_a_listed_role(site: Site) -> None:
    """A principal with no role may approve its own small payment, and remember it for its chat, but not
    for every chat: that answers for other principals' chats."""
    async with site.client("olivia") as olivia, site.client("admin") as admin:
        first = await olivia.post("/api/chat", json=user("small", "pay 50 USD to Mallory"))
        assert first.status_code == 200
        asked = await pending(admin, "small")
        url = f"/api/approvals/{asked['id']}/decision"
        always = await olivia.post(url, json={"approved": True, "remember": "always"})
        assert always.status_code == 403 and "remember_always" in always.json()["error"]["message"]
        assert (await admin.get(f"/api/approvals/{asked['id']}")).json()["state"] == "pending"
        assert (await olivia.get("/api/grants")).json() == {"grants": []}
        session = await olivia.post(url, json={"approved": True, "remember": "session"})
        assert session.status_code == 200 and session.json()["state"] == "approved"
        (grant,) = (await olivia.get("/api/grants")).json()["grants"]
        assert grant["scope"] == "session" and grant["chat_id"] == "small"


async def test_a_principal_promoted_in_its_table_is_refused_and_audited(site: Site) -> None:
    async with site.client("olivia") as olivia:
        assert (await olivia.get("/api/me")).json()["roles"] == []
        (record,) = [r for r in await site.ledger.principals.all() if r.id == "olivia"]
        await Database(site.ledger).put(msgspec.structs.replace(record, roles=("finance",)))
        assert [r.roles for r in await site.ledger.principals.all() if r.id == "olivia"] == [("finance",)]
        refused = await olivia.get("/api/me")
        assert refused.status_code == 401, refused.text
    found = [e for e in await site.ledger.audit.entries(0, 10_000) if e.subject == "principal:olivia"]
    assert [(e.action, e.detail.get("why")) for e in found][-1] == (
        "refuse",
        "its record carries no valid proof",
    )


async def test_names_that_read_alike_are_told_apart(site: Site, issuer: Issuer) -> None:
    """An identity provider's user named "alice" votes beside the registered alice: the tally, the votes and
    the decision say which is which."""
    intruder = issuer.token(sub="intruder-42", name="alice", realm={"roles": ["finance"]})
    async with (
        site.client("olivia") as olivia, site.client("alice") as alice, site.client(intruder) as oidc,
        site.client("admin") as admin,
    ):  # fmt: skip
        reply = asyncio.ensure_future(
            olivia.post("/api/chat", json=user("twins", "pay 600 USD to Hanako", wait="blocking"))
        )
        asked = await pending(admin, "twins")
        url = f"/api/approvals/{asked['id']}/decision"
        assert (await alice.post(url, json={"approved": True})).status_code == 200
        done = await oidc.post(url, json={"approved": True})
        assert done.status_code == 200, done.text
        shown: dict[str, Any] = done.json()
        assert shown["tally"] == "2 of 2: alice, alice (oidc: intruder-42)"
        assert [v["who"] for v in shown["votes"]] == ["alice (finance)", "alice (oidc: intruder-42; finance)"]
        assert [v["via"] for v in shown["votes"]] == ["token", "oidc"]
        assert shown["decision"]["who"] == "alice (oidc: intruder-42; finance)"
        assert (
            "alice (oidc: intruder-42; finance)" in said((await reply).text)
            or (await reply).status_code == 200
        )
