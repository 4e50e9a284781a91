"""The options of the commands that serve (`signoff serve`, `demo`, `mcp-gateway`), each declared once as a
Typer option type, with its help."""

from __future__ import annotations

from typing import Annotated

import typer

CLIENT_SECRET_ENV = "SIGNOFF_OIDC_CLIENT_SECRET"
"""The environment variable that gives the OIDC client's secret, which a command line would show to every
user of the machine."""

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
LedgerTimeoutOption = Annotated[
    float,
    typer.Option(
        "--ledger-timeout",
        min=0.1,
        help="Seconds a request may wait on the ledger (a connection, its server, another process's write"
        " lock) before it is answered 503, to be retried.",
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
        " --audit-checkpoint-every seconds (when the audit grew): `audit verify --checkpoint` reads it."
        " Default: this ledger's own file beside the audit key, which `audit verify` reads by itself.",
    ),
]
NoCheckpointsOption = Annotated[
    bool,
    typer.Option(
        "--no-audit-checkpoints",
        help="Append no audit checkpoints: `audit verify` can then not tell an audit cut short, or a ledger"
        " emptied.",
    ),
]
RedisVolatileOption = Annotated[
    bool,
    typer.Option(
        "--redis-volatile",
        help='Serve on a redis:// ledger whose server keeps nothing on disk (appendonly no, save ""), or'
        " won't say (CONFIG refused): every approval is lost when it restarts. Without it such a Redis is"
        " refused at start-up. Other ledgers ignore it.",
    ),
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=1,
        max=65535,
        help="Serve GET /metrics on this port too, on --host, with no credential (for a Prometheus on an"
        " internal network); on the main port it is the admin's.",
    ),
]
ChannelsOption = Annotated[
    str | None,
    typer.Option(
        "--channels",
        help="A TOML file of channels (webhooks, email, Slack) that policy rules notify; secrets come from"
        " the environment variables it names.",
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
OidcClientOption = Annotated[
    str | None,
    typer.Option(
        "--oidc-client-id",
        help="Let people sign in on the pages at --oidc-issuer (the authorization code flow with PKCE), as"
        f" this client of it; a confidential client's secret comes from ${CLIENT_SECRET_ENV}.",
    ),
]
