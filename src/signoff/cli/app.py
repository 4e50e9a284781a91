"""`signoff`: serve agents, and decide and inspect approvals from a terminal, against any ledger URL.

Every failure is one line on stderr and a non-zero exit: a person at a terminal needs the reason, not a
traceback.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from signoff.cli.approvals import approvals_app, grants_app
from signoff.cli.audit import audit_app
from signoff.cli.common import LedgerOption, audit_key, err, fail, out
from signoff.cli.principals import principals_app
from signoff.cli.tasks import tasks_app
from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.ledger import MemoryLedger, open_ledger
from signoff.server.edge import BODY_TIMEOUT
from signoff.server.run import HEAD_TIMEOUT

if TYPE_CHECKING:
    from signoff.cli.worker import Served

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
db_app = typer.Typer(no_args_is_help=True, help="The ledger's database schema.")
app.add_typer(approvals_app, name="approvals")
app.add_typer(grants_app, name="grants")
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")
app.add_typer(tasks_app, name="tasks")
app.add_typer(principals_app, name="principals")


@db_app.command("upgrade")
def db_upgrade(ledger: LedgerOption = None) -> None:
    """Create or migrate the ledger's schema to this signoff's version; safe to run twice, or at once
    from several machines."""

    async def go() -> tuple[int, int]:
        return await open_ledger(ledger).upgrade()

    try:
        before, after = asyncio.run(go())
    except SignoffError as exc:
        fail(str(exc))
    change = f"migrated from version {before} to {after}" if before != after else f"already at {after}"
    out.print(f"ledger schema {change}", highlight=False)


@app.command("walkthrough")
def walkthrough_command(ledger: LedgerOption = None) -> None:
    """Walk through one approval in the terminal: the agent asks, you decide from another terminal."""
    from signoff.demo.walkthrough import walkthrough

    try:
        asyncio.run(walkthrough(ledger))
    except SignoffError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("interrupted: the approval stays pending; resume with `signoff walkthrough`")
        raise typer.Exit(130) from None


HostOption = Annotated[str, typer.Option("--host", help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option("--port", help="Port to listen on (0 picks a free one).")]
WaitOption = Annotated[
    str,
    typer.Option("--wait", help="How tools wait for a person, unless a request says: deferred or blocking."),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="A model string: openai:gpt-5.2 for pydantic-ai, gemini-2.5-flash for ADK (needs its key).",
    ),
]
KeepaliveOption = Annotated[
    float, typer.Option("--keepalive", help="Seconds between SSE keep-alive comments.")
]
BrowserTimeoutOption = Annotated[
    float,
    typer.Option(
        "--browser-timeout",
        min=0.1,
        help="Seconds the page has to return a browser tool's result before the model is told it failed.",
    ),
]
TaskSilenceOption = Annotated[
    float,
    typer.Option(
        "--task-silence",
        min=0.5,
        help="Seconds without a heartbeat after which a long-running task's worker is taken for dead, and"
        " the task failed.",
    ),
]
WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        help="Worker processes on the one port. More than one needs a ledger they share:"
        " sqlite://, postgresql:// or redis://.",
    ),
]
AllowOriginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-origin",
        help="Another site whose pages may use this server (CORS and the live socket), such as"
        " https://app.example.com; repeat for more. Closed by default.",
    ),
]
AllowedHostOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        help="Another name this server is reached by (Host), such as signoff.example.com or *.example.com;"
        " repeat for more. Besides them: the --host address, localhost, 127.0.0.1 and [::1]; any other"
        " Host is a 400.",
    ),
]
OidcIssuerOption = Annotated[
    str | None, typer.Option("--oidc-issuer", help="Trust JWT bearer tokens from this issuer (iss).")
]
OidcAudienceOption = Annotated[
    str | None, typer.Option("--oidc-audience", help="The audience (aud) those tokens must name.")
]
OidcJwksOption = Annotated[
    str | None, typer.Option("--oidc-jwks", help="The issuer's keys: a JWKS file or http(s) URL.")
]
CheckpointsOption = Annotated[
    str | None,
    typer.Option(
        "--audit-checkpoints",
        help="A file outside the database to append a signed audit checkpoint to, every"
        " --audit-checkpoint-every seconds (when the audit grew): `audit verify --checkpoint` reads it.",
    ),
]
CheckpointEveryOption = Annotated[
    float, typer.Option("--audit-checkpoint-every", min=1.0, help="Seconds between audit checkpoints.")
]
HeadTimeoutOption = Annotated[
    float,
    typer.Option(
        "--head-timeout", min=0.1, help="Seconds a request's head may take to arrive (slow clients)."
    ),
]
BodyTimeoutOption = Annotated[
    float, typer.Option("--body-timeout", min=0.1, help="Seconds a request's body may take to arrive.")
]
MaxSocketsOption = Annotated[
    int,
    typer.Option(
        "--max-sockets",
        min=1,
        help="Live sockets one principal may hold open (per worker); one address may hold four times as"
        " many. A socket over either is closed with 1013.",
    ),
]
SocketIdleOption = Annotated[
    float,
    typer.Option(
        "--socket-idle",
        min=0.1,
        help="Seconds after which a live socket with no frame from its client, and no turn of its own"
        " running, is closed.",
    ),
]
OidcRolesOption = Annotated[
    str,
    typer.Option("--oidc-roles-claim", help="The claim holding a token's roles; dotted for a nested one."),
]


@app.command("demo")
def demo(
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    ledger: LedgerOption = None,
    wait: WaitOption = "deferred",
    model: ModelOption = None,
    keepalive: KeepaliveOption = 15.0,
    browser_timeout: BrowserTimeoutOption = 120.0,
    task_silence: TaskSilenceOption = 15.0,
    workers: WorkersOption = 1,
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime", help="The agent framework: pydantic-ai, or adk (Google ADK, needs signoff[adk])."
        ),
    ] = "pydantic-ai",
    allow_origin: AllowOriginOption = None,
    allowed_host: AllowedHostOption = None,
    oidc_issuer: OidcIssuerOption = None,
    oidc_audience: OidcAudienceOption = None,
    oidc_jwks: OidcJwksOption = None,
    oidc_roles_claim: OidcRolesOption = "roles",
    audit_checkpoints: CheckpointsOption = None,
    audit_checkpoint_every: CheckpointEveryOption = 60.0,
    head_timeout: HeadTimeoutOption = HEAD_TIMEOUT,
    body_timeout: BodyTimeoutOption = BODY_TIMEOUT,
    max_sockets: MaxSocketsOption = 64,
    socket_idle: SocketIdleOption = 600.0,
) -> None:
    """Serve the demo chat offline: a scripted model, payments that need approval, and the approvals API.
    Chats need no login: each browser gets an anonymous session, and credential-less clients share one."""
    from signoff.demo.runtime import RUNTIMES

    if runtime not in RUNTIMES:
        raise typer.BadParameter(f"must be one of {', '.join(RUNTIMES)}", param_hint="--runtime")
    if runtime == "adk" and workers > 1:  # its sessions live in each worker's memory
        raise typer.BadParameter(
            "the ADK demo keeps its sessions in memory: one worker", param_hint="--workers"
        )
    served = _served(
        ledger, wait, keepalive, browser_timeout, model=model, runtime=runtime, task_silence=task_silence,
        anonymous=True, allow_origins=tuple(allow_origin or ()), allowed_hosts=_hosts(host, allowed_host),
        oidc=_oidc(oidc_issuer, oidc_audience, oidc_jwks, oidc_roles_claim),
        audit_checkpoints=audit_checkpoints, checkpoint_every=audit_checkpoint_every,
        head_timeout=head_timeout, body_timeout=body_timeout,
        max_sockets=max_sockets, socket_idle=socket_idle,
    )  # fmt: skip
    _serve("demo", served, host, port, workers)


@app.command("serve")
def serve_command(
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="The pydantic-ai Agent or Google ADK agent to serve, as module:attribute."
        ),
    ],
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    ledger: LedgerOption = None,
    wait: WaitOption = "deferred",
    policy: Annotated[
        str | None, typer.Option("--policy", help="A policy TOML file (default: ask for every tool).")
    ] = None,
    model: ModelOption = None,
    keepalive: KeepaliveOption = 15.0,
    browser_timeout: BrowserTimeoutOption = 120.0,
    task_silence: TaskSilenceOption = 15.0,
    workers: WorkersOption = 1,
    anonymous_chats: Annotated[
        bool,
        typer.Option(
            "--anonymous-chats",
            help="Take chats without a credential: each browser gets an anonymous session, and"
            " credential-less clients share one chat owner. Off: every chat needs a credential.",
        ),
    ] = False,
    allow_origin: AllowOriginOption = None,
    allowed_host: AllowedHostOption = None,
    oidc_issuer: OidcIssuerOption = None,
    oidc_audience: OidcAudienceOption = None,
    oidc_jwks: OidcJwksOption = None,
    oidc_roles_claim: OidcRolesOption = "roles",
    audit_checkpoints: CheckpointsOption = None,
    audit_checkpoint_every: CheckpointEveryOption = 60.0,
    head_timeout: HeadTimeoutOption = HEAD_TIMEOUT,
    body_timeout: BodyTimeoutOption = BODY_TIMEOUT,
    max_sockets: MaxSocketsOption = 64,
    socket_idle: SocketIdleOption = 600.0,
) -> None:
    """Serve an agent as an AI SDK chat with every tool call gated."""
    served = _served(
        ledger, wait, keepalive, browser_timeout, model=model, agent=agent, policy=policy,
        task_silence=task_silence, anonymous=anonymous_chats, allow_origins=tuple(allow_origin or ()),
        allowed_hosts=_hosts(host, allowed_host),
        oidc=_oidc(oidc_issuer, oidc_audience, oidc_jwks, oidc_roles_claim),
        audit_checkpoints=audit_checkpoints, checkpoint_every=audit_checkpoint_every,
        head_timeout=head_timeout, body_timeout=body_timeout,
        max_sockets=max_sockets, socket_idle=socket_idle,
    )  # fmt: skip
    _serve("serve", served, host, port, workers)


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


def _oidc(issuer: str | None, audience: str | None, jwks: str | None, roles_claim: str) -> Any:
    from signoff.server.oidc import OidcSettings

    given = {"--oidc-issuer": issuer, "--oidc-audience": audience, "--oidc-jwks": jwks}
    if not any(given.values()):
        return None
    if missing := [name for name, value in given.items() if not value]:
        raise typer.BadParameter(f"OIDC also needs {', '.join(missing)}", param_hint=missing[0])
    return OidcSettings(
        issuer=issuer or "", audience=audience or "", jwks=jwks or "", roles_claim=roles_claim
    )


def _served(ledger: str | None, wait: str, keepalive: float, browser_timeout: float, **what: Any) -> Served:
    import os

    from signoff.cli.worker import Served
    from signoff.server.auth import new_admin_token

    if wait not in ("deferred", "blocking"):
        raise typer.BadParameter("must be deferred or blocking", param_hint="--wait")
    return Served(
        ledger=ledger,
        token=os.environ.get("SIGNOFF_API_TOKEN") or new_admin_token(),
        wait=wait,  # type: ignore[arg-type]
        keepalive=keepalive,
        browser_timeout=browser_timeout,
        **what,
    )


def _serve(name: str, served: Served, host: str, port: int, workers: int) -> None:
    import os

    from signoff.cli.worker import ENV
    from signoff.ledger.keyfile import ENV_VAR as KEY_FILE
    from signoff.server.run import serve, serve_workers

    try:
        key = audit_key()
    except SignoffError as exc:
        fail(str(exc))
    os.environ[KEY_FILE] = str(key.path)  # the workers prove with the same key

    def ready(url: str) -> None:
        out.print(f"signoff {name}: {url}", highlight=False, soft_wrap=True)
        out.print(f"approvals inbox: {url}/approvals", highlight=False, soft_wrap=True)
        out.print(f"approvals API token: {served.token}", highlight=False, soft_wrap=True)
        out.print(f"audit key: {key.path}", highlight=False, soft_wrap=True)
        out.print("Ctrl-C to stop", highlight=False)

    async def run() -> None:
        async with open_ledger(served.ledger, keyring=key.keyring) as opened:
            if workers == 1:
                await serve(served.app(opened), host, port, ready, head_timeout=served.head_timeout)
            elif isinstance(opened, MemoryLedger):
                raise LedgerUnavailable("--workers needs a ledger they can share, not memory://")
            else:
                served.build()  # a bad --agent or --policy fails here, once, not in every worker

    try:
        asyncio.run(run())
        if workers > 1:
            os.environ[ENV] = msgspec.json.encode(served).decode()
            serve_workers(
                "signoff.cli.worker:app", host, port, workers, ready, head_timeout=served.head_timeout
            )
    except (SignoffError, OSError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("stopped: pending approvals stay in the ledger")


def main() -> None:
    """Run the CLI; anything unexpected still ends as one line, never a traceback."""
    try:
        app()
    except Exception as exc:
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
        raise SystemExit(1) from None
