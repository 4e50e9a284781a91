"""Signing in on the page (issue 42): a personal token, or the issuer's own login (the authorization code
flow with PKCE, at a real OpenID provider, `oidc-provider-mock`, run in a thread), each ending in a login
cookie that the edge reads like any credential, and refuses from another site.

Reproduced first: without `--anonymous-chats` a browser had no way in (`GET /api/chat/…` a 401, and no
route to sign in).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import oidc_provider_mock
import pytest
from pydantic_ai import Agent

from signoff.core.policy import Policy
from signoff.ledger import Ledger, MemoryLedger
from signoff.server.app import Settings, create_app
from signoff.server.login import LOGIN_COOKIE, OidcLogin
from tests.servers import in_loop

ADMIN = "admin-token"


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with oidc_provider_mock.run_server_in_thread() as server:
        yield f"http://localhost:{server.server_port}"


async def _site(ledger: Ledger, login: OidcLogin | None = None, token: str = ADMIN) -> AsyncIterator[str]:
    settings = Settings(token=token, login=login)
    app = create_app(Agent("test"), ledger, settings, policy=Policy())
    async with in_loop(app) as host:
        yield f"http://{host}"


async def _log_in(authorize: str, subject: str) -> httpx.Response:
    """The issuer's login form, submitted for `subject`, as its page does."""
    async with httpx.AsyncClient() as provider:
        return await provider.post(authorize, data={"sub": subject})


@pytest.fixture
async def ledger() -> AsyncIterator[Ledger]:
    async with MemoryLedger() as opened:
        yield opened


async def test_a_personal_token_signs_in_to_a_cookie_that_the_edge_honours(ledger: Ledger) -> None:
    _, token = await ledger.principals.register("alice", ["finance"], actor="setup")
    async for base in _site(ledger):
        async with httpx.AsyncClient(base_url=base) as page:
            assert (await page.get("/api/me")).status_code == 401
            before = (await page.get("/api/session")).json()
            assert before == {"principal": None, "sign_in": {"token": True}}
            wrong = await page.post("/api/session", json={"token": token + "x"})
            assert wrong.status_code == 401 and LOGIN_COOKIE not in page.cookies
            signed = await page.post("/api/session", json={"token": token})
            assert signed.status_code == 200 and signed.json()["id"] == "alice"
            cookie = signed.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=lax" in cookie and token not in cookie
            me = (await page.get("/api/me")).json()
            assert (me["id"], me["roles"], me["via"]) == ("alice", ["finance"], "token")
            foreign = await page.get("/api/me", headers={"origin": "https://evil.example"})
            assert foreign.status_code == 403, "a cookie is never a credential from another site"
            await ledger.principals.assign_roles("alice", ["ops"], actor="admin")
            assert (await page.get("/api/me")).json()["roles"] == ["ops"], "its roles as they are now"
            await ledger.principals.revoke("alice", "admin")
            assert (await page.get("/api/me")).status_code == 401, "revoked: the cookie proves nobody"
            out = await page.delete("/api/session")
            assert out.status_code == 200 and LOGIN_COOKIE not in page.cookies


async def test_the_admins_cookie_ends_with_its_token(ledger: Ledger) -> None:
    async for base in _site(ledger):
        async with httpx.AsyncClient(base_url=base) as page:
            assert (await page.post("/api/session", json={"token": ADMIN})).status_code == 200
            assert (await page.get("/api/me")).json()["id"] == "admin"
            cookie = page.cookies[LOGIN_COOKIE]
    async for base in _site(ledger, token="a-new-admin-token"):
        async with httpx.AsyncClient(base_url=base, cookies={LOGIN_COOKIE: cookie}) as page:
            assert (await page.get("/api/me")).status_code == 401


async def test_a_forged_or_altered_cookie_proves_nobody(ledger: Ledger) -> None:
    _, token = await ledger.principals.register("alice", [], actor="setup")
    async for base in _site(ledger):
        async with httpx.AsyncClient(base_url=base) as page:
            await page.post("/api/session", json={"token": token})
            body, mac = page.cookies[LOGIN_COOKIE].split(".")
        for forged in (f"{body}.{mac[:-2]}xx", f"{body[:-2]}xx.{mac}", "x.y", "", "."):
            async with httpx.AsyncClient(base_url=base, cookies={LOGIN_COOKIE: forged}) as page:
                assert (await page.get("/api/me")).status_code == 401, forged


async def test_the_issuers_login_signs_in_its_subject_with_its_roles(ledger: Ledger, issuer: str) -> None:
    """The authorization code flow with PKCE through the issuer, as a browser makes it: every redirect
    followed, the issuer's login form posted with the subject."""
    claims = {"name": "Alice Liddell", "roles": ["finance"]}
    async with httpx.AsyncClient() as provider:
        assert (await provider.put(f"{issuer}/users/alice", json=claims)).status_code == 204
    login = OidcLogin(issuer=issuer, client_id="signoff", client_secret="secret")
    async for base in _site(ledger, login):
        async with httpx.AsyncClient(base_url=base) as page:
            offered = (await page.get("/api/session")).json()["sign_in"]
            assert offered == {"token": True, "oidc": {"issuer": issuer, "login": "/auth/login"}}
            started = await page.get("/auth/login", params={"next": "/?chat=c1"})
            assert started.is_redirect
            asked = urlsplit(started.headers["location"])
            query = parse_qs(asked.query)
            assert f"{asked.scheme}://{asked.netloc}" == issuer
            assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
            assert query["redirect_uri"] == [f"{base}/auth/callback"] and "nonce" in query
            answered = await _log_in(started.headers["location"], "alice")
            assert answered.is_redirect
            back = await page.get(answered.headers["location"])
            assert back.is_redirect and back.headers["location"] == "/?chat=c1"
            me = (await page.get("/api/me")).json()
            assert me == {"id": "oidc:alice", "name": "Alice Liddell", "roles": ["finance"], "via": "oidc"}


async def test_a_callback_nobody_began_and_a_foreign_next_sign_in_nobody(ledger: Ledger, issuer: str) -> None:
    login = OidcLogin(issuer=issuer, client_id="signoff", client_secret="secret")
    async for base in _site(ledger, login):
        async with httpx.AsyncClient(base_url=base) as page:
            forged = await page.get("/auth/callback", params={"code": "made-up", "state": "made-up"})
            assert forged.status_code == 401 and LOGIN_COOKIE not in page.cookies
            started = await page.get("/auth/login", params={"next": "https://evil.example/steal"})
            answered = await _log_in(started.headers["location"], "bob")
            back = await page.get(answered.headers["location"])
            assert back.headers["location"] == "/", "never back to another site"
