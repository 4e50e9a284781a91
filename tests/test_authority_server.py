"""Authority over real HTTP (uvicorn in the test's loop): principals from every kind of credential, chat
owners on every chat route and over the live socket, decisions judged by the rule that asked, and no
cross-site use. The ledger-backed flows run on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey
from starlette.requests import HTTPConnection

from signoff.core.audit import AuditEntry
from signoff.core.principal import Principal
from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.ledger import Ledger
from signoff.server.app import Settings, create_app
from signoff.server.auth import HostLogin
from signoff.server.oidc import OidcSettings
from tests.conftest import SHARED, drop, make_ledger
from tests.servers import audited, in_loop

ADMIN = "admin-token"
ISSUER, AUDIENCE = "https://idp.example", "signoff"
JSON = {"content-type": "application/json"}


@dataclass
class Site:
    base: str
    ledger: Ledger
    tokens: dict[str, str]

    def client(self, who: str | None = None, **headers: str) -> httpx.AsyncClient:
        """A client carrying `who`'s personal token (`admin` for the bootstrap one), or none."""
        if who is not None:
            token = ADMIN if who == "admin" else self.tokens.get(who, who)
            headers["authorization"] = f"Bearer {token}"
        return httpx.AsyncClient(base_url=f"http://{self.base}", headers=headers, timeout=20)


@dataclass(frozen=True)
class Issuer:
    """An identity provider of the test's own: real keys, a JWKS file, tokens signed with them."""

    jwks: Path
    rsa: RSAKey
    ec: ECKey

    def token(self, sub: str = "u-1", key: RSAKey | ECKey | None = None, **claims: Any) -> str:
        key = key or self.rsa
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now + 300, "name": "Olga", **claims}
        algorithm = "ES256" if isinstance(key, ECKey) else "RS256"
        return jwt.encode({"alg": algorithm, "kid": key.kid}, body, key)


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
    ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
    jwks = tmp_path_factory.mktemp("idp") / "jwks.json"
    jwks.write_text(json.dumps(KeySet([rsa, ec]).as_dict(private=False)))
    return Issuer(jwks, rsa, ec)


async def serve(
    ledger: Ledger, issuer: Issuer, *, host: HostLogin | None = None, **settings: Any
) -> AsyncIterator[Site]:
    tokens = {}
    for name, roles in [("olivia", []), ("mallory", []), ("alice", ["finance"]), ("bob", ["finance"]),
                        ("sam", ["support"])]:  # fmt: skip
        _, tokens[name] = await ledger.principals.register(name, roles, actor="test")
    oidc = OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks=str(issuer.jwks), roles_claim="realm.roles")
    app = create_app(
        demo_agent(), ledger, Settings(token=ADMIN, oidc=oidc, keepalive=0.2, **settings),
        policy=demo_policy(), authenticate=host,
    )  # fmt: skip
    async with in_loop(app) as base:
        yield Site(base, ledger, tokens)


@pytest.fixture(params=SHARED)
async def site(request: pytest.FixtureRequest, tmp_path: Path, issuer: Issuer) -> AsyncIterator[Site]:
    async with make_ledger(str(request.param), tmp_path) as ledger:
        async for served in serve(ledger, issuer):
            yield served
    await drop(ledger)


@pytest.fixture
async def memory_site(tmp_path: Path, issuer: Issuer) -> AsyncIterator[Site]:
    async with make_ledger("sqlite", tmp_path) as ledger:
        async for served in serve(ledger, issuer):
            yield served


def user(chat: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {"id": "u-" + text[:8], "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat, "trigger": "submit-message", "messages": [message], **extra}


def said(body: str) -> str:
    chunks = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


async def pending(client: httpx.AsyncClient, chat: str) -> dict[str, Any]:
    for _ in range(500):
        found = (await client.get(f"/api/approvals?state=pending&chat={chat}")).json()["approvals"]
        if found:
            return dict(found[0])
        await asyncio.sleep(0.01)
    raise AssertionError(f"no pending approval appeared in {chat}")


async def refusals(ledger: Ledger, actor: str) -> list[dict[str, Any]]:
    return [
        e.detail for e in await ledger.audit.entries(0, 10_000) if e.action == "refuse" and e.actor == actor
    ]


# -- principals and decisions ----------------------------------------------------------------------------


async def test_two_finance_approvers_four_eyes_and_what_each_sees(site: Site) -> None:
    async with (
        site.client("olivia") as olivia, site.client("alice") as alice, site.client("bob") as bob,
        site.client("sam") as sam, site.client("admin") as admin, site.client() as nobody,
    ):  # fmt: skip
        me = (await olivia.get("/api/me")).json()
        assert me == {"id": "olivia", "name": "olivia", "roles": [], "via": "token"}
        assert (await nobody.get("/api/me")).status_code == 401
        reply = asyncio.ensure_future(
            olivia.post("/api/chat", json=user("big", "pay 600 USD to Hanako", wait="blocking"))
        )
        asked = await pending(admin, "big")
        assert (asked["requester"], asked["awaiting"], asked["tally"]) == ("olivia", "finance", "0 of 2")
        assert asked["approvers"] == ["role:finance"] and asked["requester_may_approve"] is False

        seen = {name: (await c.get("/api/approvals?state=pending")).json()["approvals"]
                for name, c in [("olivia", olivia), ("alice", alice), ("sam", sam)]}  # fmt: skip
        assert [a["may_decide"] for a in seen["olivia"]] == [False], "the owner sees it and may not decide"
        assert [a["may_decide"] for a in seen["alice"]] == [True]
        assert seen["sam"] == [], "support may neither decide it nor owns the chat"
        assert (await sam.get(f"/api/approvals/{asked['id']}")).status_code == 404

        url = f"/api/approvals/{asked['id']}/decision"
        role = await sam.post(url, json={"approved": True})
        assert role.status_code == 404, "deciding one it may not see is as unknown as reading it"
        assert list(role.json()) == ["error"] and "Hanako" not in role.text, "and no body shows the record"
        own = await olivia.post(f"/api/chat/big/approvals/{asked['id']}", json={"approved": True})
        assert own.status_code == 403, "four eyes: the requester never counts"
        named = await alice.post(url, json={"approved": True, "by": "api:CFO Alice (second approver)"})
        assert named.status_code == 422 and "by" in named.json()["error"]["message"]
        first = await alice.post(url, json={"approved": True, "reason": "ok"})
        assert first.status_code == 200 and first.json()["state"] == "pending"
        assert first.json()["tally"] == "1 of 2: alice" and first.json()["may_decide"] is False
        twice = await alice.post(url, json={"approved": True})
        assert twice.status_code == 409 and twice.json()["approval"]["tally"] == "1 of 2: alice"
        assert not reply.done(), "one approval of two runs nothing"
        second = await bob.post(url, json={"approved": True})
        assert second.status_code == 200 and second.json()["state"] == "approved"
        assert second.json()["decision"]["by"] == "bob" and second.json()["decision"]["via"] == "token"
        assert "Paid 600 USD to Hanako" in said((await reply).text)

    refused = await refusals(site.ledger, "sam") + await refusals(site.ledger, "olivia")
    assert [r["why"].split(" approval")[0] for r in refused] == [
        "not an", "not an", "olivia may not decide"
    ]  # fmt: skip
    entries = [e for e in await site.ledger.audit.entries(0, 10_000) if e.subject == asked["id"]]
    assert [(e.action, e.actor) for e in entries if e.action in ("approve", "consume")] == [
        ("approve", "alice"), ("approve", "bob"), ("consume", "signoff:server"),
    ]  # fmt: skip


async def test_oidc_tokens_good_expired_wrong_audience_wrong_key(site: Site, issuer: Issuer) -> None:
    impostor = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})  # the issuer's kid, another key
    cases = {
        "good": (issuer.token(realm={"roles": ["finance"]}), 200),
        "ec": (issuer.token(key=issuer.ec), 200),
        "expired": (issuer.token(exp=int(time.time()) - 3600), 401),
        "audience": (issuer.token(aud="another-app"), 401),
        "issuer": (issuer.token(iss="https://evil.example"), 401),
        "key": (issuer.token(key=impostor), 401),
        "garbage": ("a.b.c", 401),
    }
    for name, (token, status) in cases.items():
        async with site.client(token) as client:
            response = await client.get("/api/me")
        assert response.status_code == status, (name, response.text)
        if status == 401:
            assert response.json()["error"]["message"].startswith("the OIDC token is not valid"), name
    async with site.client(cases["good"][0]) as olga:
        assert (await olga.get("/api/me")).json() == {
            "id": "oidc:u-1", "name": "Olga", "roles": ["finance"], "via": "oidc"
        }  # fmt: skip

    def unauthorized(entries: list[AuditEntry]) -> list[AuditEntry]:
        return [e for e in entries if e.action == "unauthorized"]

    def refused(entries: list[AuditEntry]) -> int:
        return sum(e.detail["count"] for e in unauthorized(entries))

    found = unauthorized(await audited(site.ledger, lambda entries: refused(entries) >= 5))
    assert refused(found) == 5 and {e.detail["kind"] for e in found} == {"oidc-invalid"}, "five, of one kind"
    assert len(found) <= 2, "counted together, whatever each verifier said (at most split by a second's end)"


async def test_revoked_and_unknown_personal_tokens_are_refused(site: Site) -> None:
    async with site.client("alice") as alice:
        assert (await alice.get("/api/me")).status_code == 200
        await site.ledger.principals.revoke("alice", "test")
        refused = await alice.get("/api/me")
        assert (
            refused.status_code == 401
            and refused.json()["error"]["message"] == "the token is unknown or revoked"
        )
    async with site.client("sop_" + "x" * 43) as made_up:
        assert (await made_up.get("/api/approvals")).status_code == 401


async def test_the_host_apps_login_decides_who_a_request_is_from(tmp_path: Path, issuer: Issuer) -> None:
    def host(conn: HTTPConnection) -> Principal | None:
        user = conn.headers.get("x-host-user")
        return Principal(id=f"host:{user}", name=user.title(), roles=("finance",)) if user else None

    async with make_ledger("memory", tmp_path) as ledger:
        async for served in serve(ledger, issuer, host=host):
            async with served.client(**{"x-host-user": "hana"}) as hana, served.client() as nobody:
                me = (await hana.get("/api/me")).json()
                assert me == {"id": "host:hana", "name": "Hana", "roles": ["finance"], "via": "host"}
                assert (await nobody.get("/api/me")).status_code == 401


# -- chat owners -----------------------------------------------------------------------------------------


async def test_another_principal_can_use_no_route_of_a_chat(site: Site) -> None:
    async with site.client("olivia") as olivia, site.client("mallory") as mallory, site.client() as nobody:
        first = await olivia.post("/api/chat", json=user("mine", "pay 50 USD to Hanako"))
        assert first.status_code == 200 and "tool-approval-request" in first.text
        async with site.client("admin") as admin:
            asked = await pending(admin, "mine")
        unknown = {"error": {"message": "no chat mine", "field": "id"}}
        attempts = {
            "post": await mallory.post("/api/chat", json=user("mine", "pay 77 USD to Mallory")),
            "get": await mallory.get("/api/chat/mine"),
            "stream": await mallory.get("/api/chat/mine/stream"),
            "events": await mallory.get("/api/chat/mine/events"),
            "tasks": await mallory.get("/api/chat/mine/tasks"),
            "cancel": await mallory.post("/api/chat/mine/tasks/task_x/cancel", json={}),
            "decide": await mallory.post(f"/api/chat/mine/approvals/{asked['id']}", json={"approved": True}),
        }
        for route, response in attempts.items():
            assert (response.status_code, response.json()) == (404, unknown), route
        assert (await nobody.get("/api/chat/mine")).status_code == 401, "serve needs a credential"
        assert len(await refusals(site.ledger, "mallory")) == len(attempts)

        own = await olivia.get("/api/chat/mine")
        assert own.status_code == 200 and own.json()["approvals"][0]["state"] == "pending"
        assert (await olivia.get("/api/chat/mine/tasks")).json() == {"tasks": []}
        decided = await olivia.post(f"/api/chat/mine/approvals/{asked['id']}", json={"approved": False})
        assert decided.status_code == 200 and decided.json()["decision"]["by"] == "olivia"


async def test_the_live_socket_speaks_for_its_principal_only(site: Site) -> None:
    async with site.client("olivia") as olivia:
        await olivia.post("/api/chat", json=user("owned", "weather in Tokyo"))
    url = f"ws://{site.base}/api/live"
    headers = {"authorization": f"Bearer {site.tokens['mallory']}"}
    async with websockets.connect(url, additional_headers=headers) as socket:
        for frame in (
            json.dumps({"type": "message", **user("owned", "pay 77 USD to Mallory")}),
            json.dumps({"type": "resume", "id": "owned"}),
        ):
            await socket.send(frame)
            got = json.loads(await socket.recv())
            assert got == {"type": "error", "errorText": "no chat owned"}, frame
            if json.loads(frame)["type"] == "message":
                assert await socket.recv() == "[DONE]"
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with websockets.connect(url):
            pass
    assert refused.value.response.status_code == 403, "serve takes no credential-less socket"
    assert len(await refusals(site.ledger, "mallory")) == 2


async def test_two_principals_racing_to_start_one_chat_id_get_one_owner(memory_site: Site) -> None:
    async with memory_site.client("olivia") as olivia, memory_site.client("mallory") as mallory:
        answers = await asyncio.gather(
            olivia.post("/api/chat", json=user("race", "weather in Tokyo")),
            mallory.post("/api/chat", json=user("race", "weather in Paris")),
        )
        assert sorted(r.status_code for r in answers) in ([200, 404], [200, 409])
        owner = "olivia" if answers[0].status_code == 200 else "mallory"
        assert (await memory_site.ledger.chats.load("race")).owner == owner  # type: ignore[union-attr]


# -- cross-site use ----------------------------------------------------------------------------------------


@pytest.fixture
async def demo_like(tmp_path: Path, issuer: Issuer) -> AsyncIterator[Site]:
    """A server that takes chats without a login, as `signoff demo` does."""
    async with make_ledger("memory", tmp_path) as ledger:
        async for served in serve(ledger, issuer, anonymous=True):
            yield served


async def test_a_page_on_another_site_gets_nothing_even_with_the_cookie(demo_like: Site) -> None:
    site = demo_like
    async with site.client() as browser:
        page = await browser.get("/")
        cookie = page.headers["set-cookie"]
        assert (
            "signoff_session=" in cookie
            and "HttpOnly" in cookie
            and "SameSite=lax" in cookie.replace("Lax", "lax")
        )
        me = (await browser.get("/api/me")).json()
        assert me["id"].startswith("browser:") and me["via"] == "session"
        assert (await browser.post("/api/chat", json=user("b1", "pay 50 USD to Hanako"))).status_code == 200

        evil = {"origin": "http://evil.example:8000"}
        for method, path, body in [
            ("GET", "/api/chat/b1", None),
            ("GET", "/api/chat/b1/events", None),
            ("POST", "/api/chat", user("b1", "hi")),
        ]:
            response = await browser.request(method, path, json=body, headers=evil)
            assert response.status_code == 403, (method, path)
        simple = await browser.post(
            "/api/chat", content=json.dumps(user("b1", "hi")), headers={"content-type": "text/plain"}
        )
        assert simple.status_code == 415, "a text/plain POST is a simple cross-site request"
        preflight = await browser.options(
            "/api/chat", headers={**evil, "access-control-request-method": "POST"}
        )
        assert "access-control-allow-origin" not in preflight.headers, "CORS stays closed"
        same = await browser.get("/api/chat/b1", headers={"origin": f"http://{site.base}"})
        assert same.status_code == 200

    async with site.client() as curl:  # no cookie, no credential: the anonymous principal
        assert (await curl.get("/api/chat/b1")).status_code == 404, "a browser's chat is not anonymous"
        assert (await curl.post("/api/chat", json=user("c1", "weather in Tokyo"))).status_code == 200
    async with site.client("admin", origin="http://evil.example") as scripted:
        assert (await scripted.get("/api/me")).status_code == 200, "a bearer token is judged on its own"

    def sites(entries: list[AuditEntry]) -> int:
        return sum(e.detail["count"] for e in entries if e.subject == "site")

    await audited(site.ledger, lambda entries: sites(entries) >= 4)
    assert sites(await site.ledger.audit.entries(0, 1000)) == 4, "the preflight too, counted in one entry"


async def test_the_live_socket_refuses_other_sites(demo_like: Site) -> None:
    url = f"ws://{demo_like.base}/api/live"
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with websockets.connect(url, origin="http://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403
    async with websockets.connect(url, origin=f"http://{demo_like.base}") as socket:  # type: ignore[arg-type]
        await socket.send('{"type":"ping"}')
        assert json.loads(await socket.recv()) == {"type": "pong"}
    entries = await audited(demo_like.ledger, lambda entries: any(e.subject == "site" for e in entries))
    assert [e.detail["origin"] for e in entries if e.subject == "site"] == ["http://evil.example"]


async def test_allow_origin_opens_cors_and_the_socket_to_that_site(tmp_path: Path, issuer: Issuer) -> None:
    friend = "https://app.example.com"
    async with make_ledger("memory", tmp_path) as ledger:
        async for site in serve(ledger, issuer, anonymous=True, allow_origins=(friend,)):
            async with site.client() as browser:
                preflight = await browser.options(
                    "/api/chat", headers={"origin": friend, "access-control-request-method": "POST"}
                )
                assert preflight.headers["access-control-allow-origin"] == friend
                assert preflight.headers["access-control-allow-credentials"] == "true"
                ok = await browser.post(
                    "/api/chat", json=user("f1", "weather in Tokyo"), headers={"origin": friend}
                )
                assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == friend
            async with websockets.connect(f"ws://{site.base}/api/live", origin=friend) as socket:  # type: ignore[arg-type]
                await socket.send('{"type":"ping"}')
                assert json.loads(await socket.recv()) == {"type": "pong"}
