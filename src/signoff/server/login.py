"""The login cookie: what signing in on the page leaves in the browser (see `server.signin`).

A page can't send a bearer token on the live socket, and shouldn't keep one where a script can read it, so
every way of signing in ends the same way: a signed, HttpOnly, SameSite=Lax cookie naming the principal,
which the edge reads like any other credential (after a bearer token, before an anonymous session). It is
a cookie, so the edge refuses it from another site's page, as it refuses a browser session.

What a cookie names is checked again on every request where it can be: a personal token's principal is
read from the ledger (revoked or unproven, and the cookie proves nobody), the admin's is bound to the admin
token it signed in with (a new token signs it out), and an issuer's login carries the roles its ID token
gave, until the cookie ends (`LOGIN_AGE`), as an OIDC bearer token does until its `exp`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from urllib.parse import urlsplit

import msgspec
from starlette.responses import Response

from signoff.core.principal import Principal
from signoff.core.sealed import seal, unseal

LOGIN_COOKIE = "signoff_login"
LOGIN_AGE = 12 * 3600
"""Seconds a sign-in lasts: a working day, after which the page asks again."""


class OidcLogin(msgspec.Struct, frozen=True, kw_only=True):
    """The issuer people sign in at, and this server as its client: `client_secret` is empty for a public
    client (PKCE alone); `roles_claim` as `OidcSettings` reads it."""

    issuer: str
    client_id: str
    client_secret: str = ""
    roles_claim: str = "roles"


class Signed(msgspec.Struct, frozen=True, array_like=True):
    """What a login cookie names, until when, and what it is bound to (the admin token's digest)."""

    principal: Principal
    expires: float
    bound: str = ""


class LoginCookies:
    """Login cookies under `keys` (see `core.sealed`): rotating the audit key signs nobody out before their
    cookie ends."""

    def __init__(self, keys: tuple[bytes, ...], clock: Callable[[], float]) -> None:
        self.keys = keys
        self.clock = clock

    def make(self, principal: Principal, *, bound: str = "") -> str:
        return seal(self.keys, Signed(principal, self.clock() + LOGIN_AGE, bound))

    def read(self, cookie: str) -> Signed | None:
        """What a genuine, unexpired cookie names; None for anything else."""
        signed = unseal(self.keys, cookie, Signed)
        return signed if signed is not None and signed.expires > self.clock() else None


def bound_to(token: str) -> str:
    """What an admin's cookie is bound to: its token's digest, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def set_login(response: Response, cookie: str, *, secure: bool) -> None:
    response.set_cookie(
        LOGIN_COOKIE, cookie, max_age=LOGIN_AGE, httponly=True, samesite="lax", secure=secure, path="/"
    )


def local_path(given: str | None) -> str:
    """Where to go back to after signing in: a path on this server, never another site."""
    parts = urlsplit(given or "/")
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return "/"
    return parts.path + (f"?{parts.query}" if parts.query else "")
