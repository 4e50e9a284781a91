"""MCP authorization as the spec describes it (issue 42, item 7), against a real `signoff mcp-gateway`
trusting an OIDC issuer whose keys are a JWKS file, with real RSA keys.

- `/mcp` without a token is a 401 whose body is a JSON-RPC error and whose challenge names the RFC 9728
  document: `Bearer resource_metadata="…/.well-known/oauth-protected-resource/mcp"`;
- that document names this resource and the configured issuer as its authorization server;
- a JWT from that issuer for this resource (`aud`) is accepted; one for another audience is a 401 the same
  shape; a personal token still works;
- the official Python client finds the document from the 401 and goes on to the issuer.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import extract_resource_metadata_from_www_auth
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError
from pydantic import AnyUrl

from tests.servers import signoff_server
from tests.test_mcp_gateway import MODERN, POLICY, UPSTREAM, _principals, text

JSON_RPC = {"accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN}
LIST = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}


class Issuer:
    """An OIDC issuer on a local port: its authorization server metadata and client registration (what an
    MCP client asks for once it has read the resource's metadata), and the requests it was sent. Its
    signing key's public half is a JWKS file the gateway reads."""

    def __init__(self, directory: Path) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
        self.jwks = directory / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [self.key.as_dict(private=False)]}))
        self.asked: list[str] = []
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.asked.append(f"GET {self.path}")
                if self.path != "/.well-known/oauth-authorization-server":
                    self._answer(404, {})
                    return
                self._answer(200, {
                    "issuer": issuer.url,
                    "authorization_endpoint": f"{issuer.url}/authorize",
                    "token_endpoint": f"{issuer.url}/token",
                    "registration_endpoint": f"{issuer.url}/register",
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                })  # fmt: skip

            def do_POST(self) -> None:
                issuer.asked.append(f"POST {self.path}")
                sent = json.loads(self.rfile.read(int(self.headers["content-length"])))
                self._answer(201, {**sent, "client_id": "test-client"})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def token(self, **claims: Any) -> str:
        body = {"iss": self.url, "sub": "u-7", "name": "olga", "exp": int(time.time()) + 300, **claims}
        return jwt.encode({"alg": "RS256", "kid": self.key.kid}, body, self.key)


@dataclass
class Protected:
    base: str
    issuer: Issuer
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def metadata(self) -> str:
        return f"{self.base}/.well-known/oauth-protected-resource/mcp"


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Protected]:
    directory = tmp_path_factory.mktemp("mcp-auth")
    issuer = Issuer(directory)
    threading.Thread(target=issuer.server.serve_forever, daemon=True).start()
    db, policy = directory / "ledger.db", directory / "policy.toml"
    policy.write_text(POLICY)
    tokens = asyncio.run(_principals(db))
    args = [
        "mcp-gateway", "--ledger", f"sqlite:///{db}", "--policy", str(policy),
        "--oidc-issuer", issuer.url, "--oidc-jwks", str(issuer.jwks),
        "--upstream-env", "UPSTREAM_RUNS", "--state-key-file", str(directory / "state.keys"),
        "--", *UPSTREAM,
    ]  # fmt: skip
    env = {"UPSTREAM_RUNS": str(directory / "runs.jsonl")}
    try:
        with signoff_server(directory, args, "admin-" + os.urandom(8).hex(), env=env) as (base, _):
            yield Protected(base, issuer, tokens)
    finally:
        issuer.server.shutdown()


def is_json_rpc_error(answer: httpx.Response) -> bool:
    body = answer.json()
    error = body.get("error", {})
    return (
        answer.headers["content-type"].startswith("application/json")
        and body.get("jsonrpc") == "2.0"
        and "id" in body
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    )


def test_without_a_token_the_401_is_json_rpc_and_names_the_resource_metadata(protected: Protected) -> None:
    answer = httpx.post(protected.url, json=LIST, headers=JSON_RPC)
    assert answer.status_code == 401
    assert is_json_rpc_error(answer), answer.text
    assert answer.headers["www-authenticate"] == f'Bearer resource_metadata="{protected.metadata}"'


def test_the_resource_metadata_names_this_resource_and_the_issuer(protected: Protected) -> None:
    document = httpx.get(protected.metadata)
    assert document.status_code == 200, document.text
    assert document.json()["resource"] == protected.url
    assert document.json()["authorization_servers"] == [protected.issuer.url]
    assert document.json()["bearer_methods_supported"] == ["header"]


async def test_a_jwt_for_this_resource_is_accepted(protected: Protected) -> None:
    token = protected.issuer.token(aud=protected.url)
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(protected.url, http_client=http), mode=MODERN) as mcp:
        result = await mcp.call_tool("lookup", {"query": "by-olga"})
    assert text(result) == "found by-olga"


def test_a_jwt_for_another_audience_is_refused_in_the_same_shape(protected: Protected) -> None:
    for audience in ("signoff", f"{protected.base}/other"):
        token = protected.issuer.token(aud=audience)
        answer = httpx.post(
            protected.url, json=LIST, headers={**JSON_RPC, "authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 401, audience
        assert is_json_rpc_error(answer), answer.text
        assert f'resource_metadata="{protected.metadata}"' in answer.headers["www-authenticate"]


async def test_a_personal_token_still_works(protected: Protected) -> None:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {protected.tokens['alice']}"})
    async with Client(streamable_http_client(protected.url, http_client=http), mode=MODERN) as mcp:
        result = await mcp.call_tool("lookup", {"query": "by-alice"})
    assert text(result) == "found by-alice"


async def test_a_client_without_a_token_hears_why(protected: Protected) -> None:
    """The SDK reads a JSON-RPC error body at any status, and tells what it says (from its task group)."""
    refused = pytest.RaisesExc(MCPError, match="needs a bearer token")
    with pytest.RaisesGroup(refused, flatten_subgroups=True):
        async with Client(streamable_http_client(protected.url), mode=MODERN) as mcp:
            await mcp.list_tools()


class _Memory:
    """The OAuth client's storage: nothing yet."""

    def __init__(self) -> None:
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Never reached: the test stops at the browser."""

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class _AtTheBrowser(Exception):
    """Where a person would sign in at the issuer: as far as the test goes."""


async def test_the_official_client_reads_the_metadata_from_the_401(protected: Protected) -> None:
    refused = await httpx2.AsyncClient().post(protected.url, json=LIST, headers=JSON_RPC)
    assert extract_resource_metadata_from_www_auth(refused) == protected.metadata  # as the SDK reads it
    sent_to: list[str] = []

    async def redirect(url: str) -> None:
        sent_to.append(url)
        raise _AtTheBrowser

    async def callback() -> Any:
        raise AssertionError("the flow stops at the browser")

    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")], client_name="test")
    provider = OAuthClientProvider(
        protected.url, metadata, _Memory(), redirect_handler=redirect, callback_handler=callback
    )
    http = httpx2.AsyncClient(auth=provider)
    with pytest.RaisesGroup(_AtTheBrowser, flatten_subgroups=True):  # from the SDK's task group
        async with Client(streamable_http_client(protected.url, http_client=http), mode=MODERN) as mcp:
            await mcp.list_tools()
    found = provider.context.protected_resource_metadata
    assert found is not None and str(found.resource) == protected.url
    assert provider.context.auth_server_url == protected.issuer.url
    assert "GET /.well-known/oauth-authorization-server" in protected.issuer.asked
    assert sent_to and sent_to[0].startswith(f"{protected.issuer.url}/authorize?")
    assert httpx.URL(sent_to[0]).params["resource"] == protected.url


def test_a_session_serves_only_the_principal_that_opened_it(protected: Protected) -> None:
    """The SDK binds a session to the `AccessToken` it was opened with: the edge's proof of alice, so bob's
    own good token does not reach alice's session (its questions, its answers)."""
    legacy = {"accept": "application/json, text/event-stream"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    alice = {**legacy, "authorization": f"Bearer {protected.tokens['alice']}"}
    opened = httpx.post(protected.url, json=opening, headers=alice)
    assert opened.status_code == 200, opened.text
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    bob = {**legacy, **session, "authorization": f"Bearer {protected.tokens['bob']}"}
    assert httpx.post(protected.url, json=LIST, headers=bob).status_code == 404
    assert httpx.post(protected.url, json=LIST, headers={**alice, **session}).status_code == 200
