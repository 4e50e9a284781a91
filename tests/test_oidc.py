"""OIDC keys fetched from the issuer's JWKS URL, served by a real HTTP server: verified tokens, a key
rotation picked up when a token names the new key, and a flood of unknown key ids that never hammers it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from signoff.server.oidc import Oidc, OidcSettings, Unverified


class Jwks:
    """The issuer: its signing keys, published at a URL; counts the fetches."""

    def __init__(self) -> None:
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "k1"})]
        self.fetches = 0

    def document(self) -> bytes:
        self.fetches += 1
        return json.dumps({"keys": [k.as_dict(private=False) for k in self.keys]}).encode()

    def token(self, key: RSAKey, **claims: Any) -> str:
        body = {"iss": "https://idp", "aud": "signoff", "sub": "u1", "exp": int(time.time()) + 60, **claims}
        return jwt.encode({"alg": "RS256", "kid": key.kid}, body, key)


@pytest.fixture
def issuer() -> Iterator[tuple[Jwks, str]]:
    jwks = Jwks()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = jwks.document()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield jwks, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()


async def test_keys_from_a_url_rotation_and_no_hammering(issuer: tuple[Jwks, str]) -> None:
    jwks, url = issuer
    now = [time.time()]
    oidc = Oidc(OidcSettings(issuer="https://idp", audience="signoff", jwks=url), clock=lambda: now[0])
    assert (await oidc.verify(jwks.token(jwks.keys[0]))).id == "oidc:u1"
    assert jwks.fetches == 1

    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    jwks.keys.append(rotated)
    now[0] += 61  # past the refresh interval: a token with a new key id fetches the keys again
    assert (await oidc.verify(jwks.token(rotated))).id == "oidc:u1"
    assert jwks.fetches == 2

    stranger = RSAKey.generate_key(2048, parameters={"kid": "made-up"})
    for _ in range(20):
        with pytest.raises(Unverified, match="InvalidKeyIdError"):
            await oidc.verify(jwks.token(stranger))
    assert jwks.fetches == 2, "unknown key ids within the refresh interval fetch nothing"


async def test_an_unreachable_issuer_is_a_clear_refusal() -> None:
    oidc = Oidc(OidcSettings(issuer="https://idp", audience="signoff", jwks="http://127.0.0.1:9/jwks.json"))
    with pytest.raises(Unverified, match="the issuer's keys could not be loaded"):
        await oidc.verify("a.b.c")
