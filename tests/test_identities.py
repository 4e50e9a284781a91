"""A principal's channel identities (issue 33): the email address and the Slack user whose answers are its
decisions, linked under the principal's MAC on every backend, and never a way in for anyone else."""

from __future__ import annotations

import msgspec
import pytest

from signoff.core.errors import InvalidPrincipal, NotFound
from signoff.core.proof import prove_principal
from signoff.ledger import Ledger
from tests.test_tamper import Database


async def test_a_linked_identity_names_its_principal_with_its_roles_now(ledger: Ledger) -> None:
    await ledger.principals.register("alice", ["finance"], actor="setup")
    linked = await ledger.principals.link("alice", email="Alice@Example.com", slack="U0ALICE", actor="ops")
    assert (linked.email, linked.slack) == ("Alice@Example.com", "U0ALICE")
    found = await ledger.principals.identified("email", "alice@example.COM")  # addresses match in any case
    assert found is not None and found.principal.id == "alice" and found.principal.roles == ("finance",)
    assert found.principal.via == "email" and found.credential == "identity"
    await ledger.principals.assign_roles("alice", ["ops"], actor="ops")
    by_slack = await ledger.principals.identified("slack", "U0ALICE")
    assert by_slack is not None and by_slack.principal.roles == ("ops",) and by_slack.principal.via == "slack"
    assert await ledger.principals.identified("slack", "u0alice") is None  # Slack ids are exact
    assert await ledger.principals.identified("email", "bob@example.com") is None
    actions = [e.action for e in await ledger.audit.entries()]
    assert actions.count("link") == 1


async def test_an_identity_leaves_with_an_unlink_or_a_revocation(ledger: Ledger) -> None:
    await ledger.principals.register("alice", [], actor="setup")
    await ledger.principals.register("bob", [], actor="setup")
    await ledger.principals.link("alice", email="alice@example.com", slack="U0ALICE", actor="ops")
    unlinked = await ledger.principals.link("alice", slack="", actor="ops")
    assert (unlinked.email, unlinked.slack) == ("alice@example.com", "")
    assert await ledger.principals.identified("slack", "U0ALICE") is None
    await ledger.principals.revoke("alice", "ops")
    assert await ledger.principals.identified("email", "alice@example.com") is None
    again = await ledger.principals.link("bob", email="alice@example.com", actor="ops")  # alice's is gone
    assert again.email == "alice@example.com"


async def test_an_identity_is_one_principals_and_a_bad_one_is_refused(ledger: Ledger) -> None:
    await ledger.principals.register("alice", [], actor="setup")
    await ledger.principals.register("bob", [], actor="setup")
    await ledger.principals.link("alice", email="alice@example.com", actor="ops")
    with pytest.raises(InvalidPrincipal, match="linked to alice already"):
        await ledger.principals.link("bob", email="ALICE@example.com", actor="ops")
    for email, slack in (("alice", None), ("a@b.c\r\nBcc: x@y.z", None), (None, "alice"), (None, "U1 2")):
        with pytest.raises(InvalidPrincipal, match=r"not an? "):
            await ledger.principals.link("bob", email=email, slack=slack, actor="ops")
    with pytest.raises(NotFound):
        await ledger.principals.link("carol", email="carol@example.com", actor="ops")
    assert [r.email for r in await ledger.principals.all() if r.id == "bob"] == [""]


async def test_an_identity_written_around_signoff_names_nobody(ledger: Ledger) -> None:
    """Someone who can write the database gives bob alice's Slack id and a new address: bob's record no
    longer proves itself, so the id still names only alice, the address nobody, and bob can't be linked
    anew (that would prove what was written around signoff)."""
    await ledger.principals.register("alice", ["finance"], actor="setup")
    bob, _ = await ledger.principals.register("bob", [], actor="setup")
    await ledger.principals.link("alice", slack="U0ALICE", actor="ops")
    await Database(ledger).put(msgspec.structs.replace(bob, slack="U0ALICE", email="boss@example.com"))
    found = await ledger.principals.identified("slack", "U0ALICE")
    assert found is not None and found.principal.id == "alice"
    assert await ledger.principals.identified("email", "boss@example.com") is None
    with pytest.raises(InvalidPrincipal, match="no valid proof"):
        await ledger.principals.link("bob", email="bob@example.com", actor="ops")


async def test_an_identity_two_principals_hold_names_neither(ledger: Ledger) -> None:
    """Two links that raced leave two proven records with one identity: an answer from it is nobody's
    decision, and the refusal is audited."""
    await ledger.principals.register("alice", ["finance"], actor="setup")
    bob, _ = await ledger.principals.register("bob", ["finance"], actor="setup")
    await ledger.principals.link("alice", slack="U0ALICE", actor="ops")
    raced = prove_principal(ledger.audit.keyring.current, msgspec.structs.replace(bob, slack="U0ALICE"))
    await Database(ledger).put(raced)
    assert await ledger.principals.identified("slack", "U0ALICE") is None
    [refusal] = [e for e in await ledger.audit.entries() if e.action == "refuse"]
    assert refusal.subject == "slack:U0ALICE" and "alice, bob" in refusal.detail["why"]
