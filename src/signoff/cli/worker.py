"""What `signoff serve` and `signoff demo` serve, described so that each worker process can build it.

With `--workers N` uvicorn starts N processes that share one listening socket. An open ledger (a thread,
a connection pool) cannot cross into them, so the parent checks everything once (the agent imports, the
policy loads, the ledger opens and migrates), then hands each worker a `Served` in an environment
variable, and each worker opens its own ledger when it starts. Workers share nothing but the ledger: a
blocking wait on one wakes when another records the decision, and a deferred chat continues on any.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from signoff.channels.config import Channels, load_channels
from signoff.cli.common import read_policy
from signoff.core.policy import Policy
from signoff.demo import mailbox
from signoff.demo.script import EXAMPLES
from signoff.gate import Wait
from signoff.ledger import Ledger, open_ledger
from signoff.ledger.url import TIMEOUT
from signoff.mcp import Fronting
from signoff.server.app import Settings, create_app
from signoff.server.edge import BODY_TIMEOUT, LOCAL_HOSTS
from signoff.server.loading import load_agent, load_deps
from signoff.server.login import OidcLogin
from signoff.server.mcp import gateway_app
from signoff.server.oidc import OidcSettings
from signoff.server.run import HEAD_TIMEOUT, settle

ENV = "SIGNOFF_SERVED"


class Served(msgspec.Struct, frozen=True, kw_only=True):
    """`agent` None serves the demo, unless `fronting` makes it an MCP gateway, or `inbox` serves no chat."""

    ledger: str | None
    ledger_timeout: float = TIMEOUT
    """Seconds a call may wait on the ledger (`--ledger-timeout`): each worker opens its own with it."""
    token: str
    token_from: str | None = None
    """The environment variable `token` came from, which the ready lines name instead of the token; None
    when signoff made the token, and so prints it."""
    wait: Wait
    keepalive: float
    browser_timeout: float
    agent: str | None = None
    deps: str | None = None
    """`--deps module:function`, which makes a pydantic-ai agent's deps for each run."""
    login: OidcLogin | None = None
    policy: str | None = None
    model: str | None = None
    runtime: str = "pydantic-ai"
    """The demo's agent framework (see `signoff.demo.runtime`)."""
    task_silence: float = 15.0
    anonymous: bool = False
    allow_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = LOCAL_HOSTS
    oidc: OidcSettings | None = None
    audit_checkpoints: str | None = None
    """The file signed audit checkpoints are appended to, chosen once by the parent (the one named, or by
    default the ledger's own beside the audit key: `Listening.checkpoints`); None: turned off."""
    checkpoint_every: float = 60.0
    head_timeout: float = HEAD_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_sockets: int = 64
    socket_idle: float = 600.0
    channels: str | None = None
    """The channels file, read by each worker with its own environment's secrets."""
    public_url: str = ""
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    mailbox: str | None = None
    """The demo's maildir (`--mailbox`), and the port of the SMTP server that fills it."""
    smtp_port: int = 0
    fronting: Fronting | None = None
    inbox: bool = False
    """No chat: the approvals inbox, the API, the channels and the hooks, for agents that run elsewhere
    (`signoff serve` without `--agent`)."""

    @property
    def settings(self) -> Settings:
        return Settings(
            token=self.token, wait=self.wait, keepalive=self.keepalive,
            browser_timeout=self.browser_timeout, task_silence=self.task_silence,
            task_heartbeat=min(2.0, self.task_silence / 3), anonymous=self.anonymous,
            allow_origins=self.allow_origins, allowed_hosts=self.allowed_hosts, oidc=self.oidc,
            login=self.login, audit_checkpoints=self.audit_checkpoints,
            checkpoint_every=self.checkpoint_every, body_timeout=self.body_timeout,
            max_sockets=self.max_sockets, socket_idle=self.socket_idle, public_url=self.public_url,
            metrics_port=self.metrics_port, metrics_host=self.metrics_host,
        )  # fmt: skip

    def build(self) -> tuple[Any, Policy, Channels | None]:
        """The agent, policy and channels; raises `SignoffError` or `OSError` naming what could not be
        loaded, or a rule that notifies a channel the file does not define."""
        if self.agent is None and self.fronting is None and not self.inbox:
            from signoff.demo.runtime import demo_agent_for
            from signoff.demo.walkthrough import demo_policy

            notify = (mailbox.CHANNEL,) if self.mailbox else ()
            agent, policy = demo_agent_for(self.runtime, model=self.model), demo_policy(notify)
        else:  # an MCP gateway, and an inbox alone, serve no agent
            agent = None if self.agent is None else load_agent(self.agent)
            path = self.policy
            policy = Policy() if path is None else read_policy(path)
        channels = None if self.channels is None else load_channels(self.channels, os.environ)
        if self.mailbox:
            given = channels or Channels()
            sink = mailbox.channels(self.smtp_port).by_name
            channels = Channels({**given.by_name, **sink}, given.public_url)
        (channels or Channels()).check(policy)
        return agent, policy, channels

    def app(self, ledger: Ledger) -> Starlette:
        agent, policy, channels = self.build()
        if self.fronting is not None:
            return gateway_app(self.fronting, ledger, self.settings, policy=policy, channels=channels)
        if self.inbox:
            return create_app(None, ledger, self.settings, policy=policy, channels=channels)
        model = self.model if self.agent is not None else None  # the demo agent was built with it
        routes = [mailbox.mailbox_route(self.mailbox)] if self.mailbox else []
        hint = EXAMPLES if self.agent is None else None  # the demo's grammar, for the demo only
        deps = load_deps(self.deps) if self.deps else None
        return create_app(
            agent,
            ledger,
            self.settings,
            policy=policy,
            model=model,
            deps=deps,
            hint=hint,
            channels=channels,
            routes=routes,
        )


def app() -> Worker:
    """uvicorn's app factory in each worker process (`signoff.cli.worker:app`)."""
    return Worker(msgspec.json.decode(os.environ[ENV], type=Served))


class Worker:
    """An ASGI app that opens its ledger and builds the real app when its worker starts.

    uvicorn drives the ASGI lifespan protocol; this answers it by hand because the app it serves does not
    exist until startup, which is the one thing no framework's lifespan helper covers.
    """

    def __init__(self, served: Served) -> None:
        self.served = served
        self._app: Starlette | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        assert self._app is not None, "uvicorn serves requests only after the lifespan startup"
        await self._app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with contextlib.AsyncExitStack() as stack:
            await receive()  # lifespan.startup
            try:
                opened = open_ledger(self.served.ledger, timeout=self.served.ledger_timeout)
                ledger = await stack.enter_async_context(opened)
                self._app = self.served.app(ledger)
                await stack.enter_async_context(self._app.router.lifespan_context(self._app))
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
                return
            settle()
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})
