"""The MCP gateway over streamable HTTP, behind the server's edge (`Hosts`, `Edge`): the same process serves
the inbox and the REST API that people decide its calls in, and no chat.

Every MCP request needs a bearer token (a personal token, an OIDC token, or `SIGNOFF_API_TOKEN`): its
principal is the call's requester, so a rule's "the requester" means whoever the token says. A browser's
anonymous session, or a login cookie, is nobody's request here.

MCP's authorization (the spec's, RFC 9728's): with an OIDC issuer, `/mcp` is a protected resource whose URL
is its tokens' audience (`OidcSettings.audience`). Its metadata document, the SDK's own route, names that
issuer as its authorization server, and every 401 of `/mcp` points at it:
`WWW-Authenticate: Bearer resource_metadata="…/.well-known/oauth-protected-resource/mcp"`, with a
JSON-RPC error as its body, so that an MCP client says why. The edge has verified the token before any
route runs (one authentication path: the admin token, a personal token in the ledger, an OIDC JWT through
`server.oidc`); the SDK learns its proof as the SDK's own `AccessToken`, so that a session serves only the
principal that opened it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.channels.config import Channels
from signoff.core.policy import Policy
from signoff.core.principal import Principal, Proven
from signoff.ledger.base import Ledger
from signoff.mcp import Fronting, Gateway
from signoff.server.app import Settings, create_app
from signoff.server.auth import proven_of
from signoff.server.http import STATUS, NeedsCredential
from signoff.server.oidc import OidcSettings

PATH = "/mcp"
UNAUTHORIZED = STATUS[NeedsCredential]
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))
"""URLs as written: an issuer is compared as a string (RFC 8414), so `https://idp` gains no slash."""


def requester(ctx: ServerRequestContext[Any, Any]) -> Proven | None:
    """The principal the edge proved for the HTTP request that carried this MCP request."""
    request = ctx.request
    return proven_of(request) if isinstance(request, HTTPConnection) else None


def gateway_app(
    fronting: Fronting, ledger: Ledger, settings: Settings, *, policy: Policy, channels: Channels | None
) -> Starlette:
    """The gateway for `fronting`, served with the inbox and the REST API people decide its calls in, and
    no chat (see `create_app`); with `settings.oidc`, as the protected resource its audience names."""
    gateway = fronting.gateway(ledger, policy, requester, settings.public_url)
    routes, running = gateway_routes(gateway, settings.oidc)
    app = create_app(
        None, ledger, settings, policy=policy, channels=channels, routes=routes, services=[running]
    )
    app.add_middleware(_Challenged, challenge=_challenge(settings.oidc))
    return app


def gateway_routes(
    gateway: Gateway, oidc: OidcSettings | None
) -> tuple[list[BaseRoute], Callable[[], contextlib.AbstractAsyncContextManager[None]]]:
    """The `/mcp` route (and with `oidc`, its RFC 9728 metadata document), and the service it needs
    running (the SDK's session manager; at its end, the upstream closed). The edge has checked `Host`,
    `Origin` and the body's size already, so the SDK's own DNS-rebinding check is not asked to do it again
    with a list of its own."""
    manager = StreamableHTTPSessionManager(app=gateway.server, security_settings=None)
    served = AuthContextMiddleware(StreamableHTTPASGIApp(manager))  # the SDK's `get_access_token()`
    routes: list[BaseRoute] = [Route(PATH, _BearerOnly(served))]
    if oidc is not None:
        resource, issuer = _URL.validate_python(oidc.audience), _URL.validate_python(oidc.issuer)
        routes += create_protected_resource_routes(resource, [issuer])

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        try:
            await gateway.upstream.start()
            async with manager.run():
                yield
        finally:
            await gateway.upstream.close()

    return routes, running


def _challenge(oidc: OidcSettings | None) -> str:
    """`/mcp`'s `WWW-Authenticate`: where its metadata is, when it has an authorization server to name."""
    if oidc is None:
        return "Bearer"
    return f'Bearer resource_metadata="{build_resource_metadata_url(_URL.validate_python(oidc.audience))}"'


class _BearerOnly:
    """Only a request the edge proved with its bearer token reaches the SDK, which gets that proof as its
    own `AccessToken` (`scope["user"]`, as its bearer backend would set it): the SDK then binds each
    session to the principal that opened it. A refusal is the server's `NeedsCredential`, which its one
    handler answers and audits, as on every other route (counted per source and second when nobody
    answers for it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        conn = HTTPConnection(scope)
        proven = proven_of(conn)
        if proven is None or "authorization" not in conn.headers:  # nobody, or a cookie's
            raise NeedsCredential("an MCP request needs a bearer token: Authorization: Bearer <token>")
        scope["auth"], scope["user"] = AuthCredentials(), AuthenticatedUser(_access(conn, proven.principal))
        await self.app(scope, receive, send)


def _access(conn: HTTPConnection, principal: Principal) -> AccessToken:
    """The SDK's view of the edge's proof: the principal's id names the session's owner."""
    token = conn.headers["authorization"].partition(" ")[2].strip()
    return AccessToken(token=token, client_id=principal.id, subject=principal.id, scopes=[])


class _Challenged:
    """Every 401 of `/mcp`, the edge's (a token that proves nobody) as the route's (no token), answered in
    MCP's terms: a JSON-RPC error with the refusal's message, and `/mcp`'s challenge. The status is still
    the one table's (`server.http.STATUS`), and the refusal still audited where it was made; only its words
    change, since a refusal at the edge is made before anything knows the request is MCP's."""

    def __init__(self, app: ASGIApp, *, challenge: str) -> None:
        self.app = app
        self.challenge = challenge.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        refused: Message | None = None

        async def answer(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == UNAUTHORIZED:
                refused = message  # its body, the refusal's words, comes next, in one message
            elif refused is not None and message["type"] == "http.response.body":
                body = _json_rpc(message.get("body", b""))
                kept = [
                    (k, v) for k, v in refused["headers"] if k not in (b"content-length", b"www-authenticate")
                ]
                headers = [
                    *kept,
                    (b"content-length", b"%d" % len(body)),
                    (b"www-authenticate", self.challenge),
                ]
                await send({**refused, "headers": headers})
                await send({"type": "http.response.body", "body": body})
            else:
                await send(message)

        await self.app(scope, receive, answer)


class _Said(msgspec.Struct):
    message: str


class _Refusal(msgspec.Struct):
    """What `server.http.refusal` answers: `{"error": {"message", …}}`."""

    error: _Said


def _json_rpc(refusal: bytes) -> bytes:
    """A refusal's body as a JSON-RPC error of no request, as the SDK's own transport answers a request it
    refuses before reading it."""
    said = msgspec.json.decode(refusal, type=_Refusal).error.message
    error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=said))
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode()
