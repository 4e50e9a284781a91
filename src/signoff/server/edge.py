"""The edge every request passes before any route: what it may carry, where it may come from, who it is.

- `Host` must name this server (`Hosts`, Starlette's `TrustedHostMiddleware`): its bind address,
  `localhost`, `127.0.0.1`, `[::1]`, or an `--allowed-host`; else a 400, on the live socket's handshake
  too. A page on an attacker's name that resolves to 127.0.0.1 (DNS rebinding) is another site to the
  browser, which sends it no cookie of this server's, but it reached the credential-less chats.
- A path with control characters is a 400: no id signoff makes has them, and PostgreSQL cannot even compare
  text holding a NUL.
- Cross-site use is refused. A web page on another site can make a browser send the victim's cookie
  (SameSite=Lax still sends it between sites' ports on one host, and on every same-site subdomain), so:
  - `WS /api/live` takes only the server's own origin and `--allow-origin` ones: WebSockets have no CORS.
  - A POST must be `application/json` (else 415): that is what makes a cross-site POST need a CORS
    preflight, which this server answers only for `--allow-origin` origins. A "simple" `text/plain` POST
    from any page gets no further. The two form routes (`FORMS`) check their origin themselves.
  - A request with a foreign `Origin` is refused (403) unless it carries a bearer token, which a page can
    only send after that preflight. A request without `Origin` is not from a browser (curl, a script, the
    `ai` client in Node) and is judged by its credential alone.
- Then the request is authenticated (`auth.Authenticator`) and its principal remembered for the routes.
- A body is read here, before any route, and no further than `MAX_BODY` (the most any route takes): a
  larger one is a 413 as soon as its `content-length`, or its bytes so far, say so, so a 300 MB upload
  costs the server what 1 MiB does. One that trickles in slower than `body_timeout` seconds is a 408. A
  client that goes away meanwhile is one log line. Routes then check their own, smaller limits.

Every refusal of a cross-site attempt is audited.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from signoff.channels.review import PATH as REVIEW_PATH
from signoff.server.auth import Authenticator, client_of, remember
from signoff.server.http import (
    CHAT_BODY,
    BadInput,
    Forbidden,
    NeedsCredential,
    NotJson,
    Refusal,
    TooLarge,
    TooSlow,
    refusal,
)
from signoff.server.refusals import Refusals
from signoff.server.slack import PATH as SLACK_PATH

log = logging.getLogger("signoff.server")
_DEFAULT_PORT = {"http": 80, "https": 443, "ws": 80, "wss": 443}
MAX_BODY = CHAT_BODY
"""Bytes of the largest body any route takes (a chat request's)."""
BODY_TIMEOUT = 30.0
POLICY_VIOLATION = 1008
"""The WebSocket close code for a refused handshake."""
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The names a server always answers to, beside its bind address and the `--allowed-host` ones."""
_HOST_PASSED = "signoff.host_passed"


PROBES = frozenset({"/healthz", "/readyz"})
"""What a load balancer or an orchestrator asks, by whatever address it reaches this process at (a pod's
IP, say): the Host check keeps a browser's rebound name away from what a page could read, and these two
answer nothing a page could use."""


class Hosts:
    """Starlette's `TrustedHostMiddleware` (`allowed` takes its patterns: a name, `*.example.com`, or `*`
    for any), with each request it refuses audited as a counted `foreign-host` refusal: the middleware
    says nothing of them, so whatever it does not pass on was refused."""

    def __init__(self, app: ASGIApp, *, allowed: tuple[str, ...], refusals: Refusals) -> None:
        self.app = app
        self.refusals = refusals
        self.trusted = TrustedHostMiddleware(self._passed, allowed_hosts=allowed, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in PROBES:  # reveal nothing: any name may ask
            await self.app(scope, receive, send)
            return
        await self.trusted(scope, receive, send)
        if scope["type"] in ("http", "websocket") and not scope.get(_HOST_PASSED):
            conn = HTTPConnection(scope)
            why = f"Host {conn.headers.get('host', '')!r} is not one of this server's names"
            self.refusals.note("refuse", "host", client_of(conn), "foreign-host", why, conn.url.path)

    async def _passed(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[_HOST_PASSED] = True
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class Origins:
    """The server's own origin, whatever host it is reached by, plus the `--allow-origin` ones."""

    allowed: tuple[str, ...] = ()

    def foreign(self, conn: HTTPConnection) -> bool:
        origin = conn.headers.get("origin")
        if origin is None:
            return False
        return origin.rstrip("/") not in self.allowed and not same_origin(
            origin, conn.headers.get("host", "")
        )


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` names the host the request was sent to. Only host and port are compared: a proxy
    that ends TLS hands the server plain HTTP for an https page."""
    try:
        parts, sent = urlsplit(origin), urlsplit(f"//{host}")
        default = _DEFAULT_PORT.get(parts.scheme)
        return (
            parts.hostname is not None
            and parts.hostname == sent.hostname
            and (parts.port or default) == (sent.port or default)
        )
    except ValueError:  # a port that is no number: not this server
        return False


class Edge:
    def __init__(
        self, app: ASGIApp, *, auth: Authenticator, origins: Origins, body_timeout: float = BODY_TIMEOUT
    ) -> None:
        self.app = app
        self.auth = auth
        self.origins = origins
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        http = scope["type"] == "http"
        conn = HTTPConnection(scope)
        if http and not scope["path"].isprintable():
            await refusal(BadInput("the path must not contain control characters"))(scope, receive, send)
            return
        foreign = self.origins.foreign(conn)
        if not http and foreign:
            await self._refuse_site(conn, "a WebSocket from another site")
            await WebSocketClose(POLICY_VIOLATION, "cross-site WebSocket refused")(scope, receive, send)
            return
        try:
            principal = await self.auth.authenticate(conn)
        except NeedsCredential as exc:
            if http:
                await refusal(exc)(scope, receive, send)
            else:
                await WebSocketClose(POLICY_VIOLATION, exc.why[:100])(scope, receive, send)
            return
        if foreign and (principal is None or "authorization" not in conn.headers):  # a cookie, or nothing
            await self._refuse_site(conn, "a request from another site without a bearer token")
            await refusal(Forbidden("requests from another site need a bearer token"))(scope, receive, send)
            return
        if http and scope["method"] == "POST" and not _json(conn) and not _form(conn):
            await refusal(NotJson("send the body as application/json", "content-type"))(scope, receive, send)
            return
        remember(conn, principal)
        if http and scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            try:
                receive = await self._bounded(conn, receive)
            except Refusal as refused:
                await refusal(refused)(scope, receive, send)
                return
            except _Gone:
                log.info(
                    "%s %s: the client went away before its body arrived", scope["method"], scope["path"]
                )
                return
        await self.app(scope, receive, send)

    async def _bounded(self, conn: HTTPConnection, receive: Receive) -> Receive:
        """The body read now, within `MAX_BODY` and `body_timeout`, and a `receive` that hands it to the
        route and then passes on what the server sends next (a disconnect, for a streamed reply)."""
        declared = conn.headers.get("content-length")
        if declared is not None and not declared.isdigit():
            raise BadInput("content-length must be a number of bytes", "content-length")
        if declared is not None and int(declared) > MAX_BODY:
            raise TooLarge(f"the body is over {MAX_BODY} bytes")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Gone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > MAX_BODY:
                        raise TooLarge(f"the body is over {MAX_BODY} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise TooSlow(f"the body did not arrive within {self.body_timeout:g} s") from None
        body, handed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    async def _refuse_site(self, conn: HTTPConnection, why: str) -> None:
        origin = conn.headers.get("origin", "")
        self.auth.refusals.note(
            "refuse", "site", client_of(conn), "cross-site", why, conn.url.path, origin=origin
        )


class _Gone(Exception):
    """The client disconnected."""


FORMS = (REVIEW_PATH, SLACK_PATH)
"""The routes that take a form, not JSON: an email's review page posts its buttons as a plain HTML form, and
Slack posts its interactions so. Each checks where its request comes from itself (a same-origin `Origin`
and the page's nonce; Slack's signature)."""


def _form(conn: HTTPConnection) -> bool:
    kind = conn.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind == "application/x-www-form-urlencoded" and conn.url.path.startswith(FORMS)


def _json(conn: HTTPConnection) -> bool:
    kind = conn.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind == "application/json"
