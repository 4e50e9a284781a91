"""The MCP gateway over streamable HTTP, behind the server's edge (`Hosts`, `Edge`): the same process serves
the inbox and the REST API that people decide its calls in.

Every MCP request needs a bearer token (a personal token, an OIDC token, or `SIGNOFF_API_TOKEN`): its
principal is the call's requester, so a rule's "the requester" means whoever the token says. A browser's
anonymous session is nobody's request here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from signoff.channels.config import Channels
from signoff.core.policy import Policy
from signoff.core.principal import Proven
from signoff.integrations.mcp import Fronting, Gateway
from signoff.ledger.base import Ledger
from signoff.server.app import Settings, create_app
from signoff.server.auth import principal_of, proven_of
from signoff.server.http import NeedsCredential

PATH = "/mcp"
_BEARERS = ("token", "bootstrap", "oidc")


def requester(ctx: ServerRequestContext[Any, Any]) -> Proven | None:
    """The principal the edge proved for the HTTP request that carried this MCP request."""
    request = ctx.request
    return proven_of(request) if isinstance(request, HTTPConnection) else None


def gateway_app(
    fronting: Fronting, ledger: Ledger, settings: Settings, *, policy: Policy, channels: Channels | None
) -> Starlette:
    """The gateway for `fronting`, served with the inbox and the REST API people decide its calls in, and
    no chat (see `create_app`)."""
    gateway = fronting.gateway(ledger, policy, requester, settings.public_url)
    routes, running = gateway_routes(gateway)
    return create_app(
        None, ledger, settings, policy=policy, channels=channels, routes=routes, services=[running]
    )


def gateway_routes(
    gateway: Gateway,
) -> tuple[list[BaseRoute], Callable[[], contextlib.AbstractAsyncContextManager[None]]]:
    """The `/mcp` route, and the service it needs running (the SDK's session manager; at its end, the
    upstream closed). The edge has checked `Host`, `Origin` and the body's size already, so the SDK's own
    DNS-rebinding check is not asked to do it again with a list of its own."""
    manager = StreamableHTTPSessionManager(app=gateway.server, security_settings=None)
    route = Route(PATH, _BearerOnly(StreamableHTTPASGIApp(manager)))

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        try:
            await gateway.upstream.start()
            async with manager.run():
                yield
        finally:
            await gateway.upstream.close()

    return [route], running


class _BearerOnly:
    """Only a bearer's request reaches the SDK. A refusal is the server's `NeedsCredential`, which its one
    handler answers and audits, as on every other route (counted per source and second when nobody
    answers for it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = principal_of(HTTPConnection(scope))
        if principal is None or principal.via not in _BEARERS:
            raise NeedsCredential("an MCP request needs a bearer token: Authorization: Bearer <token>")
        await self.app(scope, receive, send)
