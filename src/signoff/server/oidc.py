"""OIDC / JWT bearer tokens: principals proven by an identity provider the server trusts.

joserfc verifies the signature against the issuer's published keys (a JWKS file or URL) and the registered
claims (`iss`, `aud`, `exp`, `nbf`); this module only picks the keys and turns the claims into a principal.
Only asymmetric algorithms are accepted: with an HMAC algorithm, anyone holding the public JWKS could sign.

A JWKS given as a URL is fetched when the server starts verifying, and again when a token names a key it
does not know (the issuer rotated its keys), at most once every `refresh` seconds, so a flood of tokens
with made-up key ids cannot make the server hammer the issuer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from signoff.core.errors import SignoffError
from signoff.core.principal import Principal

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
LEEWAY = 30
"""Seconds of clock skew allowed on `exp` and `nbf`."""


class Unverified(SignoffError):
    """A token that does not prove a principal; the message says why."""


class OidcSettings(msgspec.Struct, frozen=True, kw_only=True):
    """`jwks` is a file path or an http(s) URL; `roles_claim` a claim name, dotted for a nested one
    (`realm_access.roles`), holding a list of roles or a space-separated string."""

    issuer: str
    audience: str
    jwks: str
    roles_claim: str = "roles"


class Oidc:
    def __init__(
        self, settings: OidcSettings, *, refresh: float = 60.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.refresh = refresh
        self.clock = clock
        self._keys: KeySet | None = None
        self._loaded = -refresh
        self._lock = asyncio.Lock()

    async def verify(self, token: str) -> Principal:
        keys = await self._key_set(stale=False)
        try:
            try:
                decoded = jwt.decode(token, keys, algorithms=ALGORITHMS)
            except InvalidKeyIdError:  # signed with a key the issuer published since
                decoded = jwt.decode(token, await self._key_set(stale=True), algorithms=ALGORITHMS)
            self._claims().validate(decoded.claims)
        except (JoseError, ValueError) as exc:
            raise Unverified(_reason(exc)) from None
        return claimed(decoded.claims, self.settings.roles_claim)

    def _claims(self) -> jwt.JWTClaimsRegistry:
        return jwt.JWTClaimsRegistry(
            now=lambda: int(self.clock()),
            leeway=LEEWAY,
            iss={"essential": True, "value": self.settings.issuer},
            aud={"essential": True, "value": self.settings.audience},
            exp={"essential": True},
            sub={"essential": True},
        )

    async def _key_set(self, *, stale: bool) -> KeySet:
        """The issuer's keys; with `stale`, fetched again if the last fetch is older than `refresh`."""
        async with self._lock:
            due = self._keys is None or (stale and self.clock() - self._loaded >= self.refresh)
            if due:
                try:
                    self._keys = KeySet.import_key_set(await self._fetch())
                except (OSError, httpx.HTTPError, ValueError, JoseError) as exc:
                    if self._keys is None:
                        raise Unverified(f"the issuer's keys could not be loaded: {exc}") from None
                self._loaded = self.clock()
            assert self._keys is not None
            return self._keys

    async def _fetch(self) -> Any:
        source = self.settings.jwks
        if source.startswith(("http://", "https://")):
            async with httpx.AsyncClient(timeout=5.0) as client:
                answer = await client.get(source)
                answer.raise_for_status()
                return answer.json()
        return msgspec.json.decode(await asyncio.to_thread(Path(source).read_bytes))


def claimed(claims: dict[str, Any], roles_claim: str) -> Principal:
    """The principal verified claims name, `oidc:<sub>`, with the roles `roles_claim` holds: one mapping for
    a bearer JWT and for a login at the issuer (see `server.signin`)."""
    subject = str(claims["sub"])
    names = (claims.get(k) for k in ("name", "preferred_username", "email"))
    name = next((n for n in names if isinstance(n, str) and n), "")
    return Principal(
        id=f"oidc:{subject}", name=name or subject, roles=_roles(claims, roles_claim), via="oidc"
    )


def _roles(claims: dict[str, Any], roles_claim: str) -> tuple[str, ...]:
    value: Any = claims
    for part in roles_claim.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list):
        return ()
    return tuple(dict.fromkeys(role for role in value if isinstance(role, str) and role))


def _reason(exc: Exception) -> str:
    """joserfc's errors name the claim or the failure; say which in words."""
    kind = type(exc).__name__
    detail = str(exc)
    return f"{kind}: {detail}" if detail and detail != kind else kind
