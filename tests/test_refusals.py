"""Refusals of requests nobody answers for are counted by source and kind, never by text the sender chose:
2,000 OIDC tokens with 2,000 key ids, and 500 credential-less decisions and reads on made-up chats and
approvals, are a few audit entries a second, each keeping its first example and the count. A real uvicorn
serves the app; the issuer's keys are a JWKS file of the test's own."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from signoff.core.audit import AuditEntry
from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.ledger import Ledger, MemoryLedger
from signoff.server.app import Settings, create_app
from signoff.server.oidc import OidcSettings
from tests.servers import in_loop

ISSUER, AUDIENCE = "https://idp.example", "signoff"
ADMIN = {"authorization": "Bearer admin-token"}


async def serve(ledger: Ledger, jwks: Path) -> AsyncIterator[httpx.AsyncClient]:
    oidc = OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks=str(jwks))
    settings = Settings(token="admin-token", anonymous=True, oidc=oidc)
    app = create_app(demo_agent(), ledger, settings, policy=demo_policy())
    async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=30) as client:
        yield client


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Ledger]]:
    issuer = RSAKey.generate_key(2048, parameters={"kid": "issuer-1"})
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(KeySet([issuer]).as_dict(private=False)))
    async with MemoryLedger() as ledger:
        async for client in serve(ledger, jwks):
            yield client, ledger


async def burst(requests: list[Any]) -> list[httpx.Response]:
    answers: list[httpx.Response] = []
    for start in range(0, len(requests), 100):
        answers += await asyncio.gather(*requests[start : start + 100])
    return answers


async def counted(ledger: Ledger, before: int, total: int) -> list[AuditEntry]:
    """The refusal entries written since `before`, once their counts add up to `total` (each second's are
    written when it ends)."""
    deadline = time.monotonic() + 10
    while True:
        entries = [
            e
            for e in (await ledger.audit.entries(0, 100_000))[before:]
            if e.action in ("refuse", "unauthorized")
        ]
        if sum(e.detail.get("count", 1) for e in entries) >= total or time.monotonic() > deadline:
            return entries
        await asyncio.sleep(0.1)


def busiest_second(entries: list[AuditEntry]) -> int:
    """The most entries written within any one second."""
    times = sorted(e.at for e in entries)
    return max(sum(1 for t in times if start <= t < start + 1) for start in times)


async def test_two_thousand_key_ids_are_a_few_entries_a_second(
    site: tuple[httpx.AsyncClient, Ledger],
) -> None:
    client, ledger = site
    before = len(await ledger.audit.entries(0, 100_000))
    stranger = RSAKey.generate_key(2048)
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u-1", "exp": int(time.time()) + 300}
    tokens = [jwt.encode({"alg": "RS256", "kid": f"kid-{n:04}"}, claims, stranger) for n in range(2000)]
    answers = await burst([client.get("/api/me", headers={"authorization": f"Bearer {t}"}) for t in tokens])
    assert {a.status_code for a in answers} == {401}

    entries = await counted(ledger, before, 2000)
    assert sum(e.detail["count"] for e in entries) == 2000
    assert {e.detail["kind"] for e in entries} == {"oidc-invalid"}
    assert busiest_second(entries) <= 4, [(e.at, e.detail["count"]) for e in entries]
    first = entries[0].detail
    assert first["why"].startswith("the OIDC token is not valid") and len(first["why"]) <= 200
    assert first["paths"] == ["/api/me"]


async def test_credential_less_requests_on_made_up_chats_and_approvals_are_counted_by_kind(
    site: tuple[httpx.AsyncClient, Ledger],
) -> None:
    client, ledger = site
    browser = httpx.AsyncClient(base_url=client.base_url, timeout=30)
    async with browser:
        await browser.get("/")  # its session cookie: the chat it starts is this browser's
        await browser.post("/api/chat", json={"id": "mine", "messages": [user("pay 50 USD to Hanako")]})
    [approval] = await ledger.approvals.query(chat_id="mine")
    before = len(await ledger.audit.entries(0, 100_000))

    def attempt(n: int) -> Any:
        match n % 4:
            case 0:  # an approval nobody asked for, in a chat nobody started
                return client.post(
                    f"/api/chat/made-up-{n}/approvals/apr_made_up_{n}", json={"approved": True}
                )
            case 1:  # a real approval, claimed for a chat it is not in
                return client.post(f"/api/chat/made-up-{n}/approvals/{approval.id}", json={"approved": True})
            case 2:  # the browser's chat
                return client.get(f"/api/chat/mine?n={n}")
            case _:  # a route that needs a credential
                return client.get(f"/api/approvals/apr_made_up_{n}")

    answers = await burst([attempt(n) for n in range(500)])
    assert [a.status_code for a in answers[:4]] == [404, 403, 404, 401]
    assert {a.status_code for a in answers} == {401, 403, 404}

    entries = await counted(ledger, before, 500)
    assert sum(e.detail.get("count", 1) for e in entries) == 500
    assert len({e.detail.get("kind") for e in entries}) == 4
    assert busiest_second(entries) <= 4, f"{len(entries)} entries for 500 refusals"
    assert {e.subject for e in entries} <= {"api", "chat"}, "no entry is about a name the sender made up"
    assert (await ledger.approvals.get(approval.id)).state == "pending"


def user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
