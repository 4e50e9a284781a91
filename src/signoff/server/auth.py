"""Who a request is from: every request is authenticated once, at the edge, before any route runs.

A credential comes from one of these, tried in this order:
- `Authorization: Bearer <token>`: the bootstrap admin token (`SIGNOFF_API_TOKEN`, principal `admin`), a
  personal token (`sop_…`, looked up by its hash in the ledger on every request, so a revocation counts at
  once on every worker), or an OIDC/JWT token when the server trusts an issuer. A bearer token that proves
  nothing is a 401, never a fall-back to anonymous: a typo must not silently act as nobody.
- the host app's own login, when signoff is mounted in another ASGI app (`authenticate=`).
- the anonymous browser session: a signed, HttpOnly, SameSite=Lax cookie that the chat page hands out on
  its first load, when the server takes chats without a login (`signoff demo`, `serve --anonymous-chats`).
  Its MAC is keyed from the audit key file's random keys (`derived`), never from the admin token: every
  browser holds a cookie, and a MAC keyed from a human-chosen token let anyone test guesses at it offline.

No credential at all is `None`: the routes decide whether that is the anonymous principal (a credential-less
chat) or a 401. Refusals are audited: someone probing the API is what an operator wants to see.
"""

from __future__ import annotations

import base64
import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
from starlette.requests import HTTPConnection
from starlette.responses import Response

from signoff.core.principal import ADMIN, ANONYMOUS, TOKEN_PREFIX, Principal, Proven
from signoff.ledger.base import Ledger
from signoff.server.http import NeedsCredential
from signoff.server.login import LOGIN_COOKIE, LoginCookies, Signed, bound_to
from signoff.server.oidc import Oidc, Unverified
from signoff.server.refusals import Kind, Refusals

HostLogin = Callable[[HTTPConnection], Awaitable[Principal | None] | Principal | None]
"""The host app's own login: the principal of a request, or None when it has no login."""

SESSION_COOKIE = "signoff_session"
SESSION_AGE = 400 * 24 * 3600
"""Seconds a browser keeps its session: the most a browser allows, since losing it loses the chats."""
BOOTSTRAP = Principal(id=ADMIN, name=ADMIN, roles=(ADMIN,), via="bootstrap")
_STATE_KEY = "signoff.principal"


def new_admin_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Authenticator:
    ledger: Ledger
    refusals: Refusals
    token: str
    """The bootstrap admin token."""
    session_keys: tuple[bytes, ...]
    """The first makes new session cookies; any of them proves one, so rotating the audit key signs nobody
    out."""
    sessions: bool = False
    """Whether anonymous browser sessions are honoured (and handed out by the page)."""
    oidc: Oidc | None = None
    host: HostLogin | None = None
    logins: LoginCookies | None = None
    """Login cookies (see `server.login`), from signing in on the page."""

    async def authenticate(self, conn: HTTPConnection) -> Principal | None:
        """The request's principal; None without a credential; `NeedsCredential` for a bad one (audited,
        counted per source and second)."""
        scheme, _, given = conn.headers.get("authorization", "").partition(" ")
        if scheme:
            return await self._bearer(conn, scheme, given.strip())
        if self.host is not None:
            found = self.host(conn)
            principal = await found if inspect.isawaitable(found) else found
            if principal is not None:
                return msgspec.structs.replace(principal, via="host")
        signed = self.logins.read(conn.cookies.get(LOGIN_COOKIE, "")) if self.logins is not None else None
        if signed is not None and (principal := await self._signed_in(signed)) is not None:
            return principal
        if self.sessions and (browser := self._session(conn.cookies.get(SESSION_COOKIE, ""))):
            return browser
        return None

    async def sign_in(self, conn: HTTPConnection, token: str) -> Principal:
        """The principal `token` proves, as a bearer header would: for a page to sign in with, and keep
        as a login cookie. `NeedsCredential` (audited) for one that proves nobody."""
        return await self._bearer(conn, "Bearer", token)

    async def _signed_in(self, signed: Signed) -> Principal | None:
        """Who a login cookie names now: a registered principal as its record stands (None once revoked
        or unproven), the admin while the admin token is the one it signed in with."""
        principal = signed.principal
        if principal.via == "token":
            return await self.ledger.principals.standing(principal)
        if principal.via == "bootstrap":
            return BOOTSTRAP if secrets.compare_digest(signed.bound, bound_to(self.token)) else None
        return principal

    async def _bearer(self, conn: HTTPConnection, scheme: str, given: str) -> Principal:
        if scheme.lower() != "bearer" or not given:
            raise self.refused(conn, "bad-scheme", "the Authorization header must be 'Bearer <token>'")
        if secrets.compare_digest(given.encode(), self.token.encode()):
            return BOOTSTRAP
        if given.startswith(TOKEN_PREFIX):
            principal = await self.ledger.principals.authenticate(given)
            if principal is None:
                raise self.refused(conn, "unknown-token", "the token is unknown or revoked")
            return principal
        if self.oidc is not None and given.count(".") == 2:
            try:
                return await self.oidc.verify(given)
            except Unverified as exc:
                raise self.refused(conn, "oidc-invalid", f"the OIDC token is not valid: {exc}") from None
        raise self.refused(conn, "bad-token", "the bearer token is not valid")

    def refused(self, conn: HTTPConnection, kind: Kind, why: str) -> NeedsCredential:
        """The refusal of a credential that proves nobody, counted in the audit per source and second."""
        self.refusals.note("unauthorized", "api", client_of(conn), kind, why, conn.url.path)
        return NeedsCredential(why, kind)

    # -- anonymous browser sessions -------------------------------------------------------------------------

    def new_session(self) -> tuple[Principal, str]:
        """A new browser's principal and the cookie value that proves it."""
        browser_id = secrets.token_urlsafe(16)
        return _browser(browser_id), f"{browser_id}.{_mac(self.session_keys[0], browser_id)}"

    def _session(self, cookie: str) -> Principal | None:
        browser_id, _, mac = cookie.partition(".")
        if not browser_id or not any(
            hmac.compare_digest(mac.encode(), _mac(key, browser_id).encode()) for key in self.session_keys
        ):
            return None  # forged, another server's or a retired key's: the page hands out a new one
        return _browser(browser_id)


def _mac(key: bytes, browser_id: str) -> str:
    digest = hmac.digest(key, browser_id.encode(), "sha256")
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def client_of(conn: HTTPConnection) -> str:
    """An unauthenticated request's source, as the audit names it."""
    return f"client:{conn.client.host if conn.client else 'unknown'}"


def _browser(browser_id: str) -> Principal:
    return Principal(id=f"browser:{browser_id}", name=f"browser {browser_id[:6]}", via="session")


def set_session(response: Response, cookie: str, *, secure: bool) -> None:
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=SESSION_AGE, httponly=True, samesite="lax", secure=secure, path="/"
    )


def remember(conn: HTTPConnection, principal: Principal | None) -> None:
    """Keep the principal the edge authenticated, proven by the credential it checked, for the routes."""
    conn.scope[_STATE_KEY] = None if principal is None else Proven(principal=principal)


def proven_of(conn: HTTPConnection) -> Proven | None:
    """The principal the edge authenticated for this request, as the one thing a decision may be made by
    (see `ledger.approvals.decide`); None when it sent no credential."""
    found: Proven | None = conn.scope.get(_STATE_KEY)
    return found


def principal_of(conn: HTTPConnection) -> Principal | None:
    """The principal the edge authenticated for this request; None when it sent no credential."""
    found = proven_of(conn)
    return None if found is None else found.principal


def signed_in(conn: HTTPConnection) -> Principal:
    """The request's principal; `NeedsCredential` without a credential."""
    return deciding(conn).principal


def deciding(conn: HTTPConnection) -> Proven:
    """The request's principal as proven at the edge, to decide as; `NeedsCredential` without a
    credential."""
    proven = proven_of(conn)
    if proven is None:
        raise NeedsCredential("a credential is required: 'Authorization: Bearer <token>'")
    return proven


def chatter(conn: HTTPConnection, anonymous: bool) -> Principal:
    """Who talks in a chat: the request's principal, or, without a credential, the anonymous principal
    where the server takes credential-less chats; `NeedsCredential` otherwise."""
    principal = principal_of(conn)
    if principal is not None:
        return principal
    if anonymous:
        return ANONYMOUS
    raise NeedsCredential("this server takes chats only with a credential (--anonymous-chats allows them)")
