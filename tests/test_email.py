"""The email channel against a real SMTP server (`aiosmtpd`), through a real server: each approver the
rule admits gets a message whose link GETs a review page that decides nothing, and whose form POSTs the
principal's decision, once; a forged, replayed, expired, cross-site or no-longer-admitted use decides
nothing and is audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from pydantic_ai import Agent

from signoff.channels.config import Channels, EmailChannel
from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.policy import Policy
from signoff.core.principal import Authority
from signoff.ledger import Ledger, MemoryLedger
from signoff.server.app import Settings, create_app
from tests.conftest import FakeClock
from tests.servers import in_loop

TOKEN = "admin-token"
SCRIPT = re.compile(r'<script type="module" crossorigin src="/static/assets/[\w-]+\.js">')
"""The review page's one script tag: the front end's bundle, from /static/."""


@dataclass
class Mailbox:
    """What the SMTP server received, message by message."""

    messages: list[EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 OK"

    def to(self, address: str) -> list[EmailMessage]:
        return [m for m in self.messages if m["To"] == address]


@contextlib.contextmanager
def smtp_server() -> Any:
    mailbox = Mailbox()
    with socket.socket() as probe:  # aiosmtpd checks it listens by connecting, so it needs a real port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, controller.port
    finally:
        controller.stop()


@dataclass
class Site:
    base: str
    ledger: Ledger
    mailbox: Mailbox
    client: httpx.AsyncClient


@contextlib.asynccontextmanager
async def site(ledger: Ledger) -> AsyncIterator[Site]:
    with smtp_server() as (mailbox, port):
        channels = Channels(
            {"email:finance": EmailChannel("finance", f"smtp://127.0.0.1:{port}", "signoff <s@example.com>")},
            public_url=None,
        )
        settings = Settings(token=TOKEN, public_url="http://placeholder")
        app = create_app(Agent("test"), ledger, settings, policy=Policy(), channels=channels)
        async with in_loop(app) as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
            yield Site(f"http://{address}", ledger, mailbox, client)


async def people(ledger: Ledger) -> None:
    for name in ("bob", "carol", "dave"):
        await ledger.principals.register(name, ["finance"], actor="setup")
        await ledger.principals.link(name, email=f"{name}@example.com", actor="setup")
    await ledger.principals.register("erin", ["ops"], actor="setup")
    await ledger.principals.link("erin", email="erin@example.com", actor="setup")


async def ask(ledger: Ledger, call_id: str = "c1", deadline: float | None = None) -> str:
    """A payment dave asked for, for two of finance to approve, dave not among them (four eyes)."""
    approval = await ledger.approvals.open(
        ToolCall(call_id, "pay", {"amount": 700, "to": "Bob\u202e"}),
        chat_id="chat",
        description="Pay 700 USD to Bob",
        rule="pay[0]",
        requester="dave",
        deadline=deadline,
        authority=Authority(approvers=("role:finance",), quorum=2, requester_may_approve=False),
        notify=("email:finance",),
    )
    return approval.id


async def mail_for(mailbox: Mailbox, address: str, count: int = 1) -> list[EmailMessage]:
    async with asyncio.timeout(10):
        while len(mailbox.to(address)) < count:
            await asyncio.sleep(0.02)
    return mailbox.to(address)


def link_in(message: EmailMessage, base: str) -> str:
    text = message.get_body(("plain",))
    assert text is not None
    found = re.search(r"Review and decide: (\S+)", text.get_content())
    assert found is not None, text.get_content()
    path = "/" + found.group(1).split("/", 3)[3]
    return base + path


async def form_nonce(client: httpx.AsyncClient, link: str) -> str:
    page = await client.get(link)
    assert page.status_code == 200, page.text
    found = re.search(r"name='nonce' value='([^']+)'", page.text)
    assert found is not None, page.text
    return found.group(1)


async def post(client: httpx.AsyncClient, link: str, base: str, **form: str) -> httpx.Response:
    return await client.post(link, data=form, headers={"origin": base})


@pytest.fixture
async def ledger() -> AsyncIterator[Ledger]:
    async with MemoryLedger() as opened:
        yield opened


async def test_each_admitted_approver_is_mailed_a_link_whose_form_decides_once(ledger: Ledger) -> None:
    await people(ledger)
    async with site(ledger) as s:
        approval_id = await ask(ledger)
        (bob,) = await mail_for(s.mailbox, "bob@example.com")
        (carol,) = await mail_for(s.mailbox, "carol@example.com")
        await asyncio.sleep(0.3)
        assert s.mailbox.to("dave@example.com") == []  # the requester, under four eyes
        assert s.mailbox.to("erin@example.com") == []  # not in finance
        assert bob["Subject"] == "Approval needed: Pay 700 USD to Bob"
        assert bob.get_body(("html",)) is not None
        plain = bob.get_body(("plain",))
        assert plain is not None and "Bob⟨U+202E⟩" in plain.get_content()  # made visible
        assert bob["Message-ID"] != carol["Message-ID"]

        link = link_in(bob, s.base)
        page = await s.client.get(link)
        assert page.status_code == 200 and "Approve" in page.text and "Pay 700 USD to Bob" in page.text
        assert page.headers["referrer-policy"] == "same-origin"
        # the page's one script is the front end's, from /static/, and its CSP runs no other
        scripts = re.findall(r"<script[^>]*>", page.text, re.IGNORECASE)
        assert len(scripts) == 1 and SCRIPT.fullmatch(scripts[0]), scripts
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe" not in policy and "form-action 'self'" in policy
        assert (await ledger.approvals.get(approval_id)).votes == ()  # GET never decides

        nonce = await form_nonce(s.client, link)
        done = await post(s.client, link, s.base, nonce=nonce, decision="approve")
        assert done.status_code == 200 and "You approved it" in done.text
        after = await ledger.approvals.get(approval_id)
        assert [(v.decision.by, v.decision.via) for v in after.votes] == [("bob", "email")]

        replay = await post(s.client, link, s.base, nonce=nonce, decision="approve")
        assert replay.status_code == 409 and "Nothing was decided" in replay.text
        assert "link was used already" in replay.text
        assert len((await ledger.approvals.get(approval_id)).votes) == 1

        carol_link = link_in(carol, s.base)
        carol_nonce = await form_nonce(s.client, carol_link)
        await post(s.client, carol_link, s.base, nonce=carol_nonce, decision="approve", reason="ok")
        decided = await ledger.approvals.get(approval_id)
        assert decided.state is State.APPROVED
        again = await post(s.client, carol_link, s.base, nonce=carol_nonce, decision="deny")
        assert again.status_code == 409 and "approved already" in again.text
        assert (await ledger.approvals.get(approval_id)).state is State.APPROVED

        # the outcome is mailed too, with no link
        decided_mail = (await mail_for(s.mailbox, "bob@example.com", 2))[1]
        assert decided_mail["Subject"].startswith("Approval decided: ")
        assert "Review and decide" not in decided_mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    refusals = [e for e in await ledger.audit.entries() if e.action == "refuse"]
    assert [e.actor for e in refusals] == ["bob", "carol"]


async def test_a_link_used_wrongly_decides_nothing_and_is_audited(ledger: Ledger) -> None:
    await people(ledger)
    async with site(ledger) as s:
        approval_id = await ask(ledger)
        (bob,) = await mail_for(s.mailbox, "bob@example.com")
        link = link_in(bob, s.base)
        nonce = await form_nonce(s.client, link)

        cross = await s.client.post(
            link, data={"nonce": nonce, "decision": "approve"}, headers={"origin": "https://evil.example"}
        )
        assert cross.status_code == 403
        no_origin = await s.client.post(link, data={"nonce": nonce, "decision": "approve"})
        assert no_origin.status_code == 403
        bad_nonce = await post(s.client, link, s.base, nonce="x" + nonce, decision="approve")
        assert bad_nonce.status_code == 403
        forged = link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")
        assert (await s.client.get(forged)).status_code == 404
        token = link.rsplit("/", 1)[1]
        body, mac = token.split(".")
        other = f"{s.base}/approvals/email/{body[:-2]}xx.{mac}"
        assert (await s.client.get(other)).status_code == 404  # a changed claim fails its MAC
        json_post = await s.client.post(
            link, json={"nonce": nonce, "decision": "approve"}, headers={"origin": s.base}
        )
        assert json_post.status_code == 400

        await ledger.principals.assign_roles("bob", ["ops"], actor="admin")  # no longer in finance
        moved = await post(s.client, link, s.base, nonce=nonce, decision="approve")
        assert moved.status_code == 403
        assert (await ledger.approvals.get(approval_id)).votes == ()
    entries = await ledger.audit.entries()
    refused = [e for e in entries if e.action == "refuse" and e.subject == approval_id]
    assert len(refused) >= 4 and all(e.actor == "bob" for e in refused)


async def test_an_expired_link_shows_a_page_and_decides_nothing() -> None:
    clock = FakeClock()
    async with MemoryLedger(clock=clock) as ledger:
        await people(ledger)
        async with site(ledger) as s:
            approval_id = await ask(ledger, deadline=600)
            (bob,) = await mail_for(s.mailbox, "bob@example.com")
            link = link_in(bob, s.base)
            nonce = await form_nonce(s.client, link)
            clock.advance(601)
            page = await s.client.get(link)
            assert page.status_code == 410 and "expired" in page.text
            late = await post(s.client, link, s.base, nonce=nonce, decision="approve")
            assert late.status_code == 410
            assert (await ledger.approvals.get(approval_id)).votes == ()
        refused = [e for e in await ledger.audit.entries() if e.action == "refuse"]
        assert refused and all(e.detail["why"] == "the link expired" for e in refused)


async def test_nobody_to_mail_is_a_failed_notice_not_a_silent_one(ledger: Ledger) -> None:
    async with site(ledger) as s:
        approval_id = await ask(ledger)
        async with asyncio.timeout(10):
            while not (notices := await ledger.outbox.query(approval_id=approval_id, state="failed")):
                await asyncio.sleep(0.02)
        assert notices[0].last_error == "no principal the rule admits has a linked email address"
        assert s.mailbox.messages == []
