"""The Slack channel, with `slack_sdk` against a local server that records `chat.postMessage`,
`chat.update` and `chat.postEphemeral`, and clicks signed as Slack signs them: a payment two of finance
must approve is approved by one by email and one by Slack and runs once; the requester's own click, an
unlinked user's, a forged, a stale and a replayed interaction decide nothing and are audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from pydantic_ai import Agent
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from signoff.channels.config import Channels, EmailChannel, SlackChannel
from signoff.channels.slack import APPROVE, DENY, REASON
from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyConsumed
from signoff.core.policy import Policy
from signoff.core.principal import Authority
from signoff.ledger import Ledger, MemoryLedger
from signoff.server.app import Settings, create_app
from tests.servers import in_loop
from tests.test_email import form_nonce, link_in, mail_for, post, smtp_server

SIGNING = "8f742231b10e8888abcd99yyyzzz85a5"


@dataclass
class SlackApi:
    """Slack's Web API as far as the channel uses it: each call recorded, each post given a new `ts`."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)

    async def method(self, request: Request) -> Response:
        name = request.path_params["method"]
        self.tokens.add(request.headers.get("authorization", ""))
        raw = await request.body()
        body = json.loads(raw) if raw.startswith(b"{") else dict((await request.form()).items())
        self.calls.append((name, body))
        ts = body.get("ts") or f"1700000000.{len(self.calls):06d}"
        return JSONResponse({"ok": True, "channel": body.get("channel"), "ts": ts})

    def made(self, name: str) -> list[dict[str, Any]]:
        return [body for called, body in self.calls if called == name]


@dataclass
class Site:
    base: str
    ledger: Ledger
    api: SlackApi
    client: httpx.AsyncClient
    mailbox: Any


@contextlib.asynccontextmanager
async def site(ledger: Ledger) -> AsyncIterator[Site]:
    api = SlackApi()
    stub = Starlette(routes=[Route("/api/{method}", api.method, methods=["POST"])])
    with smtp_server() as (mailbox, port):
        async with in_loop(stub) as slack_address:
            channels = Channels(
                {
                    "slack:payments": SlackChannel(
                        "payments", "C0PAY", "xoxb-test", SIGNING, f"http://{slack_address}/api/"
                    ),
                    "email:finance": EmailChannel("finance", f"smtp://127.0.0.1:{port}", "s@example.com"),
                }
            )
            app = create_app(
                Agent("test"), ledger, Settings(token="admin"), policy=Policy(), channels=channels
            )
            async with in_loop(app) as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
                yield Site(f"http://{address}", ledger, api, client, mailbox)


async def people(ledger: Ledger) -> None:
    for name, roles, email, slack in (
        ("bob", ["finance"], "bob@example.com", None),
        ("carol", ["finance"], None, "U0CAROL"),
        ("dave", ["finance"], None, "U0DAVE"),
        ("erin", ["ops"], None, "U0ERIN"),
    ):
        await ledger.principals.register(name, roles, actor="setup")
        await ledger.principals.link(name, email=email, slack=slack, actor="setup")


async def ask(ledger: Ledger) -> str:
    approval = await ledger.approvals.open(
        ToolCall("c1", "pay", {"amount": 700, "to": "<@U0ALL> & co"}),
        chat_id="chat",
        description="Pay 700 USD",
        rule="pay[0]",
        requester="dave",
        authority=Authority(approvers=("role:finance",), quorum=2, requester_may_approve=False),
        notify=("slack:payments", "email:finance"),
    )
    return approval.id


def click(
    user: str, action: str, approval_id: str, reason: str = "", *, age: float = 0.0
) -> tuple[bytes, dict[str, str]]:
    """A block action as Slack sends it, signed with the app's signing secret `age` seconds ago."""
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": "C0PAY"},
        "actions": [{"action_id": action, "value": approval_id, "type": "button"}],
        "state": {"values": {"reason": {REASON: {"type": "plain_text_input", "value": reason}}}},
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time() - age))
    signature = SignatureVerifier(SIGNING).generate_signature(timestamp=stamp, body=body)
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature,
    }
    return body, headers


async def send(s: Site, signed: tuple[bytes, dict[str, str]]) -> httpx.Response:
    body, headers = signed
    return await s.client.post("/api/channels/slack/interactions", content=body, headers=headers)


async def eventually(check: Any, within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not check():
            await asyncio.sleep(0.02)


@pytest.fixture
async def ledger() -> AsyncIterator[Ledger]:
    async with MemoryLedger() as opened:
        yield opened


async def test_one_approves_by_email_one_by_slack_the_requester_is_refused_and_it_runs_once(
    ledger: Ledger,
) -> None:
    await people(ledger)
    async with site(ledger) as s:
        approval_id = await ask(ledger)
        await eventually(lambda: s.api.made("chat.postMessage"))
        (posted,) = s.api.made("chat.postMessage")
        assert posted["channel"] == "C0PAY" and s.api.tokens == {"Bearer xoxb-test"}
        blocks = json.dumps(posted["blocks"])
        assert "&lt;@U0ALL&gt; &amp; co" in blocks and "<@U0ALL>" not in blocks  # no mention, no link
        buttons = next(b for b in posted["blocks"] if b["type"] == "actions")["elements"]
        assert [(b["action_id"], b["value"]) for b in buttons] == [
            (APPROVE, approval_id),
            (DENY, approval_id),
        ]

        own = await send(s, click("U0DAVE", APPROVE, approval_id))  # the requester, under four eyes
        assert own.status_code == 200
        nobody = await send(s, click("U0NOBODY", APPROVE, approval_id))
        assert nobody.status_code == 200
        outsider = await send(s, click("U0ERIN", APPROVE, approval_id))  # ops, not finance
        assert outsider.status_code == 200
        await eventually(lambda: len(s.api.made("chat.postEphemeral")) == 3)
        told = {e["user"]: e["text"] for e in s.api.made("chat.postEphemeral")}
        assert all(text.startswith("You may not decide this") for text in told.values()), told
        assert (await ledger.approvals.get(approval_id)).votes == ()

        (bob,) = await mail_for(s.mailbox, "bob@example.com")
        link = link_in(bob, s.base)
        await post(s.client, link, s.base, nonce=await form_nonce(s.client, link), decision="approve")
        carol = click("U0CAROL", APPROVE, approval_id, "fine by me")
        assert (await send(s, carol)).status_code == 200
        approved = await ledger.approvals.get(approval_id)
        assert approved.state is State.APPROVED
        assert [(v.decision.by, v.decision.via) for v in approved.votes] == [
            ("bob", "email"),
            ("carol", "slack"),
        ]
        assert approved.decision is not None and approved.decision.reason == "fine by me"

        replay = await send(s, carol)  # the same signed click, again within five minutes
        assert replay.status_code == 200
        await eventually(lambda: len(s.api.made("chat.postEphemeral")) == 5)
        assert s.api.made("chat.postEphemeral")[-1]["text"].startswith("Nothing was decided")

        await ledger.approvals.consume(approval_id, approved.call, "signoff:server")
        with pytest.raises(AlreadyConsumed):
            await ledger.approvals.consume(approval_id, approved.call, "signoff:server")

        await eventually(lambda: s.api.made("chat.update"))
        (edited,) = s.api.made("chat.update")[:1]
        assert edited["ts"] == "1700000000.000001" and edited["channel"] == "C0PAY"
        assert not [b for b in edited["blocks"] if b["type"] == "actions"]  # the buttons go
        assert "Approved by" in edited["text"]
        assert len(s.api.made("chat.postMessage")) == 1
    refused = [(e.actor, e.subject) for e in await ledger.audit.entries() if e.action == "refuse"]
    assert ("dave", approval_id) in refused and ("erin", approval_id) in refused
    assert ("slack:U0NOBODY", approval_id) in refused and ("carol", approval_id) in refused


async def test_a_forged_or_stale_interaction_is_401_and_audited(ledger: Ledger) -> None:
    await people(ledger)
    async with site(ledger) as s:
        approval_id = await ask(ledger)
        body, headers = click("U0CAROL", APPROVE, approval_id)
        forged = await send(s, (body.replace(b"U0CAROL", b"U0DAVE0"), headers))
        assert forged.status_code == 401
        stale = await send(s, click("U0CAROL", APPROVE, approval_id, age=6 * 60))
        assert stale.status_code == 401
        unsigned = await s.client.post(
            "/api/channels/slack/interactions",
            content=body,
            headers={"content-type": headers["content-type"]},
        )
        assert unsigned.status_code == 401
        assert (await ledger.approvals.get(approval_id)).votes == ()
    entries = [e for e in await ledger.audit.entries() if e.action == "unauthorized" and e.subject == "slack"]
    assert entries and entries[0].detail["count"] >= 3
