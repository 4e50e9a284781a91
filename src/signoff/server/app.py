"""The Starlette app: chat over SSE and over the live socket, approvals API, live feed, and the page.

The app owns the approval feed, the replies still running, and a sweeper that expires approvals past
their deadline even when no waiter is alive to notice. The caller opens the ledger first, so a ledger
that cannot be opened is a clear error before any socket listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.models import Model
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from signoff.approvers.callback import Approver
from signoff.core.errors import LedgerUnavailable, Unstorable
from signoff.core.policy import Policy
from signoff.gate import Gate, Wait
from signoff.ledger.base import Ledger
from signoff.server.approvals import ApprovalsAPI
from signoff.server.chat import ChatAPI
from signoff.server.feed import ApprovalFeed, TaskFeed
from signoff.server.http import error
from signoff.server.live import LiveAPI
from signoff.server.loading import chat_for
from signoff.server.streams import Streams
from signoff.server.tasks import TasksAPI

log = logging.getLogger("signoff.server")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How a server runs. `wait` is the default for requests that don't choose."""

    token: str
    wait: Wait = "deferred"
    keepalive: float = 15.0
    sweep: float = 1.0
    feed_interval: float = 0.2
    frontend_timeout: float = 120.0
    """How long the browser has to return a browser tool's result before the model is told it failed."""
    task_heartbeat: float = 2.0
    """Seconds between a worker's heartbeats for the tasks it runs."""
    task_silence: float = 15.0
    """Seconds without a heartbeat after which a task's worker is taken for dead, and the task failed."""

    @property
    def signing_key(self) -> bytes:
        """Derived from the token, so every worker started with the same token signs alike."""
        return hashlib.sha256(b"signoff approval signature\n" + self.token.encode()).digest()


def create_app(
    agent: Any,
    ledger: Ledger,
    settings: Settings,
    *,
    policy: Policy | None = None,
    approvers: Sequence[Approver] = (),
    model: Model | str | None = None,
) -> Starlette:
    """Serve `agent` (a pydantic-ai or a Google ADK agent) with every tool call gated, over an opened
    `ledger`."""
    gate = Gate(ledger, policy, approvers, actor="signoff:server")
    gate.tasks.heartbeat = settings.task_heartbeat
    feed = ApprovalFeed(ledger, interval=settings.feed_interval)
    task_feed = TaskFeed(ledger, interval=settings.feed_interval)
    streams = Streams(ledger)
    agent_chat = chat_for(
        agent, gate, model=model, signing_key=settings.signing_key, frontend_timeout=settings.frontend_timeout
    )
    chat = ChatAPI(agent_chat, streams, feed, task_feed, wait=settings.wait, keepalive=settings.keepalive)
    approvals = ApprovalsAPI(ledger, settings.token, feed, ping=settings.keepalive)
    tasks = TasksAPI(gate.tasks, settings.token, task_feed, ping=settings.keepalive)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await feed.start()
        await task_feed.start()
        sweeper = asyncio.get_running_loop().create_task(_sweep(ledger, chat, streams, settings))
        try:
            yield
        finally:
            sweeper.cancel()
            await streams.close()
            await gate.tasks.close()
            await task_feed.close()
            await feed.close()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper

    pages = [Route(path, _page(html), methods=["GET"]) for path, html in PAGES.items()]
    static = Mount("/static", StaticFiles(directory=STATIC), name="static")
    return Starlette(
        routes=[
            *chat.routes(),
            *LiveAPI(chat).routes(),
            *approvals.routes(),
            *tasks.routes(),
            *pages,
            static,
        ],
        lifespan=lifespan,
        middleware=[Middleware(_PrintablePaths)],
        exception_handlers={LedgerUnavailable: _unavailable, Unstorable: _unstorable},
    )


class _PrintablePaths:
    """Refuse a path with control characters (`/api/chat/a%00b`) before any route reads an id from it:
    no id signoff makes has them, and PostgreSQL cannot even compare text holding a NUL."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].isprintable():
            await error(400, "the path must not contain control characters")(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _unavailable(request: Request, exc: Exception) -> Response:
    """The ledger's server is down or restarting: a 503 the client can retry, never a 500."""
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return error(503, str(exc))


async def _unstorable(request: Request, exc: Exception) -> Response:
    """Input the ledger's database refuses is the client's fault: a 400."""
    return error(400, str(exc))


STATIC = Path(__file__).with_name("static")
"""The built front end (see frontend/), committed so that installing signoff needs no Node."""
PAGES = {"/": "index.html", "/approvals": "approvals.html"}


async def _sweep(ledger: Ledger, chat: ChatAPI, streams: Streams, settings: Settings) -> None:
    while True:
        try:
            await ledger.expire_due()
            await ledger.abandon_tasks(settings.task_silence)
            await chat.sweep()
            await streams.forget_logs()
        except Exception:  # the next sweep tries again; a hiccup must not stop deadlines for good
            log.exception("the sweep failed")
        await asyncio.sleep(settings.sweep)


def _page(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def page(request: Request) -> Response:
        html = (STATIC / name).read_text()
        return HTMLResponse(html, headers={"cache-control": "no-cache"})

    return page
