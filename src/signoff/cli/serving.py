"""What every command that serves takes (`signoff demo`, `signoff serve`, `signoff mcp-gateway`): the
server's own options, and the start of a server from them.

The options a server's edge, its identities and its audit need are the same for every such command, so
they are declared once, as `Listening`, and `@with_listening` adds them to a command's own. A server with a
chat (`demo`, `serve`) takes a chat's options too, `Serving` (`@with_serving`); the MCP gateway serves no
chat, so its help shows none of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

import msgspec
import typer

from signoff.cli.common import LedgerOption, audit_key, err, fail, out
from signoff.cli.options import (
    CLIENT_SECRET_ENV,
    AllowedHostOption,
    AllowOriginOption,
    BodyTimeoutOption,
    BrowserTimeoutOption,
    ChannelsOption,
    CheckpointEveryOption,
    CheckpointsOption,
    HeadTimeoutOption,
    HostOption,
    KeepaliveOption,
    LedgerTimeoutOption,
    MaxSocketsOption,
    MetricsPortOption,
    ModelOption,
    NoCheckpointsOption,
    OidcAudienceOption,
    OidcClientOption,
    OidcIssuerOption,
    OidcJwksOption,
    OidcRolesOption,
    PortOption,
    RedisVolatileOption,
    SocketIdleOption,
    TaskSilenceOption,
    WaitOption,
    WorkersOption,
)
from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.ledger import Ledger, MemoryLedger, open_ledger
from signoff.ledger.base import volatile
from signoff.ledger.url import TIMEOUT
from signoff.server.edge import BODY_TIMEOUT
from signoff.server.run import HEAD_TIMEOUT

if TYPE_CHECKING:
    from signoff.cli.worker import Served
    from signoff.server.login import OidcLogin
    from signoff.server.oidc import OidcSettings

TOKEN_ENV = "SIGNOFF_API_TOKEN"
"""The environment variable that gives the bootstrap admin token. A token given there is never printed, since
a server's stdout lands in systemd's journal and in Kubernetes' logs; only one signoff made, which nobody
could know otherwise, is shown, once."""


@dataclasses.dataclass(frozen=True)
class Chatting:
    """A chat's options: how its tools wait, its model, its stream and its live sockets."""

    wait: WaitOption = "deferred"
    model: ModelOption = None
    keepalive: KeepaliveOption = 15.0
    browser_timeout: BrowserTimeoutOption = 120.0
    task_silence: TaskSilenceOption = 15.0
    max_sockets: MaxSocketsOption = 64
    socket_idle: SocketIdleOption = 600.0

    def chat_settings(self) -> dict[str, Any]:
        """These options as `Served` takes them."""
        if self.wait not in ("deferred", "blocking"):
            raise typer.BadParameter("must be deferred or blocking", param_hint="--wait")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Chatting)}


@dataclasses.dataclass(frozen=True)
class Listening:
    """The options every command that serves takes, after its own."""

    host: HostOption = "127.0.0.1"
    port: PortOption = 8000
    ledger: LedgerOption = None
    ledger_timeout: LedgerTimeoutOption = TIMEOUT
    redis_volatile: RedisVolatileOption = False
    workers: WorkersOption = 1
    allow_origin: AllowOriginOption = None
    allowed_host: AllowedHostOption = None
    oidc_issuer: OidcIssuerOption = None
    oidc_audience: OidcAudienceOption = None
    oidc_jwks: OidcJwksOption = None
    oidc_roles_claim: OidcRolesOption = "roles"
    oidc_client_id: OidcClientOption = None
    audit_checkpoints: CheckpointsOption = None
    no_audit_checkpoints: NoCheckpointsOption = False
    audit_checkpoint_every: CheckpointEveryOption = 60.0
    head_timeout: HeadTimeoutOption = HEAD_TIMEOUT
    body_timeout: BodyTimeoutOption = BODY_TIMEOUT
    channels: ChannelsOption = None
    metrics_port: MetricsPortOption = None

    def __post_init__(self) -> None:
        """Both checkpoint options at once is said now, rather than one of them silently ignored."""
        if self.no_audit_checkpoints and self.audit_checkpoints is not None:
            raise typer.BadParameter(
                "turns off the checkpoints --audit-checkpoints names a file for",
                param_hint="--no-audit-checkpoints",
            )

    def start(self, name: str, **what: Any) -> None:
        """Serve as the command `name` until stopped; `what` is what only that command sets. Port 0 is a
        free port chosen now, so that the links channels send name the port the server listens on."""
        chosen = self if self.port else dataclasses.replace(self, port=_free_port(self.host))
        _run(name, chosen.served(**what), chosen.host, chosen.port, chosen.workers, chosen.redis_volatile)

    def served(self, **what: Any) -> Served:
        """These options as the server's settings, with `what`."""
        import os

        from signoff.cli.worker import Served
        from signoff.server.auth import new_admin_token

        given = os.environ.get(TOKEN_ENV)
        chat = self if isinstance(self, Chatting) else Chatting()  # no chat: its defaults (the inbox's ping)
        return Served(
            ledger=self.ledger,
            ledger_timeout=self.ledger_timeout,
            token=given or new_admin_token(),
            token_from=TOKEN_ENV if given else None,
            **chat.chat_settings(),
            allow_origins=tuple(self.allow_origin or ()),
            allowed_hosts=_hosts(self.host, self.allowed_host),
            oidc=self.oidc(),
            login=self.login(),
            audit_checkpoints=self.checkpoints(),
            checkpoint_every=self.audit_checkpoint_every,
            head_timeout=self.head_timeout,
            body_timeout=self.body_timeout,
            channels=self.channels,
            metrics_port=self.metrics_port,
            metrics_host=self.host,
            public_url=self.public_url,
            **what,
        )

    @property
    def public_url(self) -> str:
        return _public_url(self.host, self.port)

    def checkpoints(self) -> str | None:
        """The file signed audit checkpoints are appended to: the one named, else this ledger's own beside
        the audit key (`ledger.evidence.default_checkpoints`), so that `audit verify` knows, with no
        option, how long the audit was; None when turned off, or for a memory ledger."""
        from signoff.ledger.evidence import default_checkpoints

        if self.no_audit_checkpoints:
            return None
        path = self.audit_checkpoints or default_checkpoints(self.ledger)
        return None if path is None else str(path)

    def oidc(self) -> OidcSettings | None:
        """The OIDC settings the options give, or None; `typer.BadParameter` for half of them."""
        return _oidc(self.oidc_issuer, self.oidc_audience, self.oidc_jwks, self.oidc_roles_claim)

    def login(self) -> OidcLogin | None:
        """Signing in on the pages at the issuer, where a client id is given; `typer.BadParameter` without
        the issuer."""
        import os

        from signoff.server.login import OidcLogin

        if self.oidc_client_id is None:
            return None
        if not self.oidc_issuer:
            raise typer.BadParameter(
                "needs --oidc-issuer, the issuer people sign in at", param_hint="--oidc-client-id"
            )
        secret = os.environ.get(CLIENT_SECRET_ENV, "")
        return OidcLogin(
            issuer=self.oidc_issuer, client_id=self.oidc_client_id, client_secret=secret,
            roles_claim=self.oidc_roles_claim,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Serving(Chatting, Listening):
    """A chat's server's options: every server's, then a chat's."""


def with_serving(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with `Serving`'s options after its own, handed to it as one `serving` argument."""
    return with_listening(command, Serving)


def with_listening(command: Callable[..., None], options: type[Listening] = Listening) -> Callable[..., None]:
    """`command` with the options of `options` (a `Listening`) after its own, handed to it as one `serving`
    argument.

    Typer reads a command's options from its signature, and has no way to share a set of them between
    commands; this gives the command a signature with both, which Typer reads like any other."""
    hints = get_type_hints(options, include_extras=True)
    shared = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(options)
    ]
    own = inspect.signature(command, eval_str=True)
    signature = own.replace(
        parameters=[*(p for p in own.parameters.values() if p.name != "serving"), *shared]
    )

    @functools.wraps(command)
    def run(**given: Any) -> None:
        chosen = options(**{p.name: given.pop(p.name) for p in shared})
        command(**given, serving=chosen)

    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return run


def _hosts(bind: str, given: list[str] | None) -> tuple[str, ...]:
    """The names `Host` may give: the bind address (bracketed when it is IPv6, as `Host` writes it), the
    local names, and `--allowed-host`, whose patterns Starlette's own check judges."""
    from starlette.applications import Starlette
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    from signoff.server.edge import LOCAL_HOSTS

    named = (f"[{bind}]" if ":" in bind else bind, *LOCAL_HOSTS, *(given or ()))
    try:
        TrustedHostMiddleware(Starlette(), allowed_hosts=named)
    except AssertionError as exc:
        raise typer.BadParameter(str(exc), param_hint="--allowed-host") from None
    return tuple(dict.fromkeys(named))


def _oidc(
    issuer: str | None, audience: str | None, jwks: str | None, roles_claim: str
) -> OidcSettings | None:
    from signoff.server.oidc import OidcSettings

    given = {"--oidc-issuer": issuer, "--oidc-audience": audience, "--oidc-jwks": jwks}
    if not any(given.values()):
        return None
    if missing := [name for name, value in given.items() if not value]:
        raise typer.BadParameter(f"OIDC also needs {', '.join(missing)}", param_hint=missing[0])
    return OidcSettings(
        issuer=issuer or "", audience=audience or "", jwks=jwks or "", roles_claim=roles_claim
    )


def _public_url(host: str, port: int) -> str:
    """Where links reach this server, as far as its options say (a channels file's `public_url` says
    better): the bind address, or this machine's loopback for a wildcard one."""
    name = "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
    return f"http://{name}:{port}"


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


async def kept(ledger: Ledger, volatile_ok: bool) -> None:
    """Refuse, before it starts, a ledger whose server would forget every approval when it restarts (a
    Redis that keeps nothing on disk, or won't say), unless `--redis-volatile` accepts that: such a Redis,
    restarted, lost 20 pending approvals and nothing said so. Raises `LedgerUnavailable` naming the fix."""
    if not volatile_ok and (why := await volatile(ledger)) is not None:
        raise LedgerUnavailable(
            f"{why}: turn on appendonly yes, or pass --redis-volatile to accept losing every approval on a"
            " restart"
        )


def _run(name: str, served: Served, host: str, port: int, workers: int, volatile_ok: bool) -> None:
    import os

    from signoff.cli.worker import ENV
    from signoff.ledger.evidence import ready_to_append
    from signoff.ledger.keyfile import ENV_VAR as KEY_FILE
    from signoff.server import run as server

    try:
        key = audit_key()
        if served.audit_checkpoints is not None:  # after the key, whose folder it may be in
            ready_to_append(Path(served.audit_checkpoints))
    except SignoffError as exc:
        fail(str(exc))
    os.environ[KEY_FILE] = str(key.path)  # the workers prove with the same key

    def ready(url: str) -> None:
        out.print(f"signoff {name}: {url}", highlight=False, soft_wrap=True)
        out.print(f"approvals inbox: {url}/approvals", highlight=False, soft_wrap=True)
        if served.mailbox:
            out.print(f"mailbox: {url}/mailbox", highlight=False, soft_wrap=True)
        token = f"from {served.token_from}" if served.token_from else served.token
        out.print(f"approvals API token: {token}", highlight=False, soft_wrap=True)
        out.print(f"audit key: {key.path}", highlight=False, soft_wrap=True)
        marks = served.audit_checkpoints or "off"
        out.print(f"audit checkpoints: {marks}", highlight=False, soft_wrap=True)
        out.print("Ctrl-C to stop", highlight=False)

    async def run() -> None:
        ledger = open_ledger(served.ledger, keyring=key.keyring, timeout=served.ledger_timeout)
        await kept(ledger, volatile_ok)
        async with ledger as opened:
            if served.mailbox:
                from signoff.demo.mailbox import register_approvers

                await register_approvers(opened)
            if workers == 1:
                await server.serve(served.app(opened), host, port, ready, head_timeout=served.head_timeout)
            elif isinstance(opened, MemoryLedger):
                raise LedgerUnavailable("--workers needs a ledger they can share, not memory://")
            else:
                served.build()  # a bad --agent, --policy or --channels fails here, once, not in every worker

    try:
        if served.metrics_port is not None:  # taken by another program: say so now, not in each worker
            from signoff.server.watch import metrics_listener

            metrics_listener(served.metrics_host, served.metrics_port).close()
        asyncio.run(run())
        if workers > 1:
            os.environ[ENV] = msgspec.json.encode(served).decode()
            server.serve_workers(
                "signoff.cli.worker:app", host, port, workers, ready, head_timeout=served.head_timeout
            )
    except (SignoffError, OSError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("stopped: pending approvals stay in the ledger")
