"""The approvals API's bearer token.

One shared secret, compared in constant time. A wrong or missing token is audited: someone probing the
approvals API is exactly what an operator wants to see in the log.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from signoff.ledger.base import Ledger
from signoff.server.http import error


def new_token() -> str:
    return secrets.token_urlsafe(24)


async def refuse_without_token(request: Request, token: str, ledger: Ledger) -> Response | None:
    """None when the request carries the token; otherwise the 401 to send."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), token.encode()):
        return None
    client = request.client.host if request.client else "unknown"
    await ledger.record("unauthorized", "api", f"client:{client}", path=request.url.path, given=bool(given))
    response = error(401, "a valid 'Authorization: Bearer <token>' header is required")
    response.headers["www-authenticate"] = "Bearer"
    return response


Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Handler, token: str, ledger: Ledger) -> Handler:
    """`handler`, answering only requests that carry the token."""

    async def guard(request: Request) -> Response:
        return await refuse_without_token(request, token, ledger) or await handler(request)

    return guard
