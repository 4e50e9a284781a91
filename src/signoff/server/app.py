"""The Starlette app: chat over SSE and over the live socket, approvals API, live feed, and the page.

The app owns the approval feed, the replies still running, and a sweeper that expires approvals past
their deadline even when no waiter is alive to notice. The caller opens the ledger first, so a ledger
that cannot be opened is a clear error before any socket listens.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.models import Model
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from signoff.approvers.callback import Approver
from signoff.channels.config import Channels, SlackChannel
from signoff.channels.review import hidden
from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.core.policy import Policy
from signoff.core.views import principal_json
from signoff.gate import Gate, Wait
from signoff.hooks.ruling import ClaudeCode
from signoff.integrations.pydantic_ai.chat import Deps
from signoff.ledger.base import Ledger
from signoff.ledger.outage import Outage
from signoff.server.approvals import ApprovalsAPI
from signoff.server.auth import (
    Authenticator,
    HostLogin,
    client_of,
    principal_of,
    set_session,
    signed_in,
)
from signoff.server.chat import ChatAPI
from signoff.server.edge import BODY_TIMEOUT, LOCAL_HOSTS, Edge, Hosts, Origins
from signoff.server.feed import ApprovalFeed, TaskFeed
from signoff.server.hooks import HooksAPI
from signoff.server.http import Forbidden, json_response, refusal
from signoff.server.live import LiveAPI
from signoff.server.loading import chat_for
from signoff.server.login import LoginCookies, OidcLogin
from signoff.server.oidc import Oidc, OidcSettings
from signoff.server.openapi import openapi
from signoff.server.owners import Owners
from signoff.server.refusals import Refusals
from signoff.server.replies import Replies
from signoff.server.review import EmailReview
from signoff.server.run import STOP_HOOK
from signoff.server.signin import SignIn
from signoff.server.slack import SlackInteractions
from signoff.server.streams import Streams
from signoff.server.tasks import TasksAPI
from signoff.server.watch import ApprovalFigures, metrics_port, watch_routes
from signoff.upkeep import Step, Upkeep


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How a server runs. `wait` is the default for requests that don't choose.

    `token` is the bootstrap admin token. `anonymous` takes chats without a credential (and gives each
    browser an anonymous session): the demo's default, `serve --anonymous-chats`. `allow_origins` are the
    other sites whose pages may use this server (CORS and the live socket); `oidc` the identity provider
    whose tokens it trusts."""

    token: str
    anonymous: bool = False
    allow_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = LOCAL_HOSTS
    """The names `Host` may give (see `edge.Hosts`): `signoff serve` adds its bind address and the
    `--allowed-host` ones; a host app that checks `Host` itself passes `("*",)`."""
    oidc: OidcSettings | None = None
    login: OidcLogin | None = None
    """The issuer people sign in at on the page (see `server.signin`); without it, only with a token."""
    audit_checkpoints: str | None = None
    """A file outside the database to append a signed audit checkpoint to, every `checkpoint_every` s."""
    checkpoint_every: float = 60.0
    body_timeout: float = BODY_TIMEOUT
    """Seconds a request's body may take to arrive (a slow client's is a 408)."""
    max_sockets: int = 64
    """Live sockets one principal may hold open in a process; an address may hold four times as many."""
    socket_idle: float = 600.0
    """Seconds a live socket may go without a frame from its client, and without a turn of its own."""
    wait: Wait = "deferred"
    keepalive: float = 15.0
    sweep: float = 1.0
    feed_interval: float = 0.2
    browser_timeout: float = 120.0
    """How long the browser has to return a browser tool's result before the model is told it failed."""
    task_heartbeat: float = 2.0
    """Seconds between a worker's heartbeats for the tasks it runs."""
    task_silence: float = 15.0
    """Seconds without a heartbeat after which a task's worker is taken for dead, and the task failed."""
    metrics_port: int | None = None
    """A port of its own for `/metrics`, with no credential, on `metrics_host` (see `watch.metrics_port`)."""
    metrics_host: str = "127.0.0.1"
    public_url: str = "http://127.0.0.1:8000"
    """Where people reach this server, for the links channels send (a channels file may say otherwise)."""


def create_app(
    agent: Any,
    ledger: Ledger,
    settings: Settings,
    *,
    policy: Policy | None = None,
    approvers: Sequence[Approver] = (),
    model: Model | str | None = None,
    deps: Deps | None = None,
    hint: str | None = None,
    authenticate: HostLogin | None = None,
    channels: Channels | None = None,
    routes: Sequence[BaseRoute] = (),
    services: Sequence[Callable[[], contextlib.AbstractAsyncContextManager[None]]] = (),
) -> Starlette:
    """Serve `agent` (a pydantic-ai or a Google ADK agent), as its author wrote it, with every tool call
    gated, over an opened `ledger`.

    `deps` makes a pydantic-ai agent's deps for each run (without it, its `deps_type()` does, or serving it
    is refused now); `hint` is what the page's message box suggests writing. `authenticate` lets a host
    app that mounts this one decide who a request is from with its own login: it gets the request and
    returns a `Principal`, or None to fall back to signoff's own credentials. `channels` are where the
    policy's rules announce approvals (see `signoff.channels`), `routes` more that the host serves beside
    signoff's (the demo's `/mailbox`), and `services` what those need running while the app runs. With no
    `agent` it serves no chat: the approvals, their inbox and API, for an MCP gateway's calls (see
    `signoff.server.mcp`)."""
    gate = Gate(ledger, policy, approvers, actor="signoff:server")
    gate.tasks.heartbeat = settings.task_heartbeat
    feed = ApprovalFeed(ledger, interval=settings.feed_interval)
    task_feed = TaskFeed(ledger, interval=settings.feed_interval)
    streams = Streams(ledger)
    signing_key = ledger.audit.keyring.derived("approval signature")[0]
    refusals = Refusals(ledger)
    auth = Authenticator(
        ledger,
        refusals,
        settings.token,
        ledger.audit.keyring.derived("browser session"),
        sessions=settings.anonymous,
        oidc=Oidc(settings.oidc) if settings.oidc else None,
        host=authenticate,
        logins=LoginCookies(ledger.audit.keyring.derived("login"), ledger.approvals.clock),
    )
    assert auth.logins is not None
    signing_in = SignIn(auth, auth.logins, settings.login)
    owners = Owners(ledger, refusals, anonymous=settings.anonymous)
    replies: Replies | None = None
    live: LiveAPI | None = None
    chatting: list[BaseRoute] = []
    if agent is not None:
        agent_chat = chat_for(
            agent, gate, model=model, deps=deps, signing_key=signing_key,
            browser_timeout=settings.browser_timeout,
        )  # fmt: skip
        replies = Replies(agent_chat, streams, wait=settings.wait)
        chat = ChatAPI(replies, owners, feed, task_feed, keepalive=settings.keepalive, hint=hint)
        live = LiveAPI(replies, owners, refusals, max_sockets=settings.max_sockets, idle=settings.socket_idle)
        chatting = [*chat.routes(), *live.routes()]
    approvals = ApprovalsAPI(ledger, feed, policy=gate.policy, ping=settings.keepalive)
    tasks = TasksAPI(gate.tasks, task_feed, owners, ping=settings.keepalive)
    figures = ApprovalFigures(ledger)
    upkeep = Upkeep(
        ledger, channels, settings.public_url, every=settings.sweep, task_silence=settings.task_silence,
        checkpoints=Path(settings.audit_checkpoints) if settings.audit_checkpoints else None,
        checkpoint_every=settings.checkpoint_every, steps=_steps(replies, streams, live),
        registry=figures.registry,
    )  # fmt: skip
    slack_channels = [
        c for c in (channels.by_name.values() if channels else ()) if isinstance(c, SlackChannel)
    ]

    def stop() -> None:
        """uvicorn began its graceful shutdown (see `server.run.STOP_HOOK`): end every reply's streams and
        sockets now, each told what it still waits on, so that the shutdown need not wait on a person."""
        if replies is not None:
            replies.stop()
        streams.stop()
        if live is not None:
            live.stop()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        await feed.start()
        await task_feed.start()
        warming = asyncio.get_running_loop().create_task(figures.warm())
        try:
            async with contextlib.AsyncExitStack() as stack:
                await stack.enter_async_context(upkeep.running())
                if settings.metrics_port is not None:
                    port, host = settings.metrics_port, settings.metrics_host
                    await stack.enter_async_context(metrics_port(figures, host, port))
                for service in services:
                    await stack.enter_async_context(service())
                yield {STOP_HOOK: stop}
        finally:
            warming.cancel()
            await refusals.close()
            stop()
            await streams.close()
            await gate.tasks.close()
            await task_feed.close()
            await feed.close()

    pages = [
        Route(path, _page(html, auth), methods=["GET"])
        for path, html in PAGES.items()
        if agent is not None or path != CHAT_PAGE  # no chat page where nobody answers in it
    ]
    if agent is None:  # whoever opens the server's address finds the inbox
        pages.append(Route(CHAT_PAGE, _to_inbox, methods=["GET"]))
    static = Mount("/static", StaticFiles(directory=STATIC), name="static")
    cors = [
        Middleware(
            CORSMiddleware,
            allow_origins=list(settings.allow_origins),
            allow_credentials=True,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["authorization", "content-type", "x-ai-sdk-version"],
        )
    ]
    return Starlette(
        routes=[
            *chatting,
            *approvals.routes(),
            *tasks.routes(),
            *HooksAPI(ClaudeCode(gate)).routes(),
            Route("/api/me", _me, methods=["GET"]),
            *signing_in.routes(),
            Route("/api/openapi.json", _described(), methods=["GET"]),
            *watch_routes(figures, upkeep),
            *EmailReview(ledger, gate.policy, refusals).routes(),
            *SlackInteractions(ledger, gate.policy, refusals, slack_channels).routes(),
            *pages,
            *routes,
            static,
        ],
        lifespan=lifespan,
        middleware=[
            Middleware(Hosts, allowed=settings.allowed_hosts, refusals=refusals),
            *(cors if settings.allow_origins else []),  # closed unless a site is named
            Middleware(
                Edge,
                auth=auth,
                origins=Origins(tuple(o.rstrip("/") for o in settings.allow_origins)),
                body_timeout=settings.body_timeout,
            ),
            *([signing_in.state(ledger.audit.keyring.derived("login state")[0])] if settings.login else []),
        ],
        exception_handlers={
            SignoffError: _refused,
            LedgerUnavailable: _unavailable(upkeep.outage),
            Forbidden: _refuser(ledger, refusals),
        },
    )


def _described() -> Callable[[Request], Awaitable[Response]]:
    document = json_response(openapi()).body

    async def described(request: Request) -> Response:
        return Response(document, media_type="application/json")

    return described


async def _me(request: Request) -> Response:
    """Who the request's credential says it is."""
    return json_response(principal_json(signed_in(request)))


def _refuser(ledger: Ledger, refusals: Refusals) -> Callable[[Request, Exception], Awaitable[Response]]:
    """Answers a route's refusal of who a request is from, and audits it: a principal's at once, an
    unauthenticated source's counted per second."""

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Forbidden)
        principal = principal_of(request)
        if principal is None:
            refusals.note(exc.action, exc.subject, client_of(request), exc.kind, exc.why, request.url.path)
        else:
            path = hidden(request.url.path)
            await ledger.audit.record(exc.action, exc.subject, principal.id, path=path, why=exc.why)
        return refusal(exc)

    return refused


async def _refused(request: Request, exc: Exception) -> Response:
    """A route's refusal as its status (`server.http.STATUS`); any other error signoff raises is a bug,
    and a 500."""
    assert isinstance(exc, SignoffError)
    return refusal(exc)


def _unavailable(outage: Outage) -> Callable[[Request, Exception], Awaitable[Response]]:
    """Answers a request the ledger could not take (its server is down or restarting, its disk full): a 503
    the client can retry after `Retry-After`, never a 500. The ledger's outage is told, and says it once:
    a line per request would say the same thing as often as clients retry."""

    async def unavailable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LedgerUnavailable)
        outage.failed(exc)
        return refusal(exc)

    return unavailable


STATIC = Path(__file__).with_name("static")
"""The built front end (see frontend/), committed so that installing signoff needs no Node."""
CHAT_PAGE = "/"
PAGES = {CHAT_PAGE: "index.html", "/approvals": "approvals.html"}


def _steps(replies: Replies | None, streams: Streams, live: LiveAPI | None) -> list[Step]:
    """What a server's sweep does beside the ledger's upkeep: the replies and sockets it holds, and the
    reply logs it keeps."""
    own: list[Step] = [streams.forget_logs]
    if replies is not None and live is not None:
        sockets = live.sockets

        async def collect() -> None:
            sockets.collect()

        own = [replies.sweep, collect, *own]
    return own


async def _to_inbox(request: Request) -> Response:
    return RedirectResponse("/approvals")


def _page(name: str, auth: Authenticator) -> Callable[[Request], Awaitable[Response]]:
    async def page(request: Request) -> Response:
        html = (STATIC / name).read_text()
        response = HTMLResponse(html, headers={"cache-control": "no-cache"})
        if auth.sessions and principal_of(request) is None:  # a browser without a login: its own session
            _, cookie = auth.new_session()
            set_session(response, cookie, secure=request.url.scheme == "https")
        return response

    return page
