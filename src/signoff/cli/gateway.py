"""`signoff mcp-gateway`: one upstream MCP server's tools, every call through the gate, for any MCP client.

Over streamable HTTP (`--host`, `--port`: `/mcp`) the same process serves the inbox and the REST API,
with `signoff serve`'s authentication, and every MCP request needs a bearer token whose principal is the
requester; with an OIDC issuer, `/mcp` is an OAuth protected resource whose audience is its own URL. It
serves no chat, so it takes none of a chat's options. Over stdio (`--stdio`, for clients that spawn their
servers) the requester is `mcp:<os user>`, and people decide from the CLI or from any `signoff serve` on
the same ledger. stdout is then the protocol's: everything this command says goes to stderr.

`--print-config CLIENT` prints what a desktop client needs to spawn this stdio gateway: it starts it with
its own PATH and working directory, so every path in it is absolute, and checked here, now.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import json
import os
import shutil
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

from signoff.cli.common import audit_key, err, fail, os_user
from signoff.cli.serving import Listening, kept, with_listening
from signoff.core.errors import SignoffError
from signoff.core.principal import Principal, Proven
from signoff.ledger import open_ledger
from signoff.ledger.keyfile import ENV_VAR as KEY_FILE_ENV
from signoff.ledger.keyfile import default_path
from signoff.ledger.url import TIMEOUT, ledger_url

# The gateway's own imports (the SDK, the server) wait for the command: every CLI call would pay for them.
if TYPE_CHECKING:
    from signoff.cli.worker import Served
    from signoff.mcp import Fronting
    from signoff.server.oidc import OidcSettings

PolicyOption = Annotated[
    str | None, typer.Option("--policy", help="A policy TOML file (default: ask for every tool).")
]
StdioOption = Annotated[
    bool,
    typer.Option("--stdio", help="Serve MCP over stdin/stdout instead of HTTP, for clients that spawn it."),
]
StateKeyOption = Annotated[
    str | None,
    typer.Option(
        "--state-key-file",
        help="The keys that seal input rounds' requestState: one per line, hex of >= 32 random bytes, newest"
        " first; made (0600) when missing. Every worker needs the same file. Default: beside the audit key.",
    ),
]
UpstreamUrlOption = Annotated[
    str | None, typer.Option("--upstream-url", help="The upstream MCP server's streamable HTTP URL.")
]
UpstreamEnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--upstream-env",
        help="NAME or NAME=VALUE to pass to the spawned upstream, besides the SDK's safe defaults; repeat"
        " for more. Nothing else of the gateway's environment reaches it.",
    ),
]
HoldOption = Annotated[
    float,
    typer.Option("--hold", min=0.0, help="Seconds a pending call is held for a decision before it answers."),
]
UpstreamTimeoutOption = Annotated[
    float, typer.Option("--upstream-timeout", min=0.1, help="Seconds the upstream has to answer a call.")
]
CommandArgument = Annotated[
    list[str] | None, typer.Argument(help="The upstream to spawn over stdio, after --: CMD ARGS...")
]


class Desktop(enum.StrEnum):
    """The clients `--print-config` writes for, each its own file's shape."""

    CLAUDE_DESKTOP = "claude-desktop"
    CURSOR = "cursor"
    VSCODE = "vscode"


PrintConfigOption = Annotated[
    Desktop | None,
    typer.Option(
        "--print-config",
        help="Print the config that makes this desktop client spawn this gateway over stdio, with the"
        " options given here (absolute paths, checked to exist), and exit.",
    ),
]
CONFIG_FILES = {
    Desktop.CLAUDE_DESKTOP: "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/;"
    " Windows: %APPDATA%\\Claude\\)",
    Desktop.CURSOR: ".cursor/mcp.json in a project, or ~/.cursor/mcp.json",
    Desktop.VSCODE: ".vscode/mcp.json in a workspace",
}
"""Where each client reads the config from."""
NAME = "signoff"
"""The server's name in a client's config."""
SCRIPT = "signoff"
"""The console script this installation put beside its interpreter."""
HOLD = 60.0
UPSTREAM_TIMEOUT = 60.0


ResourceOption = Annotated[
    str | None,
    typer.Option(
        "--oidc-audience",
        help="The URL MCP clients connect to, which the issuer's tokens must name as their audience (aud)."
        " Default: this server's, http://HOST:PORT/mcp.",
    ),
]


@dataclasses.dataclass(frozen=True)
class Gatewaying(Listening):
    """A gateway's server options. With an OIDC issuer, `/mcp` is an OAuth protected resource: the
    tokens its issuer makes for it name its URL as their audience, so `--oidc-audience` is that URL, and
    by default the one this server listens at."""

    oidc_audience: ResourceOption = None

    def oidc(self) -> OidcSettings | None:
        from signoff.server.mcp import PATH

        given = self.oidc_audience
        if given is None and (self.oidc_issuer or self.oidc_jwks):
            return dataclasses.replace(self, oidc_audience=f"{self.public_url}{PATH}").oidc()
        parts = urlsplit(given or "")
        if given is not None and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise typer.BadParameter(
                f"a gateway's audience is the URL MCP clients connect to, such as https://host{PATH},"
                f" not {given!r}",
                param_hint="--oidc-audience",
            )
        return super().oidc()


@functools.partial(with_listening, options=Gatewaying)
def mcp_gateway(
    command: CommandArgument = None,
    policy: PolicyOption = None,
    stdio: StdioOption = False,
    state_key_file: StateKeyOption = None,
    upstream_url: UpstreamUrlOption = None,
    upstream_env: UpstreamEnvOption = None,
    hold: HoldOption = HOLD,
    upstream_timeout: UpstreamTimeoutOption = UPSTREAM_TIMEOUT,
    print_config: PrintConfigOption = None,
    *,
    serving: Gatewaying,
) -> None:
    """Front one upstream MCP server: every MCP client's tool calls pass signoff's gate."""
    if (upstream_url is None) == (not command):
        raise typer.BadParameter(
            "give either --upstream-url URL or -- CMD ARGS...", param_hint="--upstream-url"
        )
    if print_config is not None:
        args = _stdio_args(
            command or [], policy, serving, state_key_file, upstream_url, upstream_env or [], hold,
            upstream_timeout,
        )  # fmt: skip
        _print(print_config, args, _env(upstream_env or []))
        return
    from signoff.mcp import Fronting

    fronting = Fronting(
        upstream_url=upstream_url,
        command=tuple(command or ()),
        upstream_env=tuple(upstream_env or ()),
        state_keys=state_key_file,
        hold=hold,
        upstream_timeout=upstream_timeout,
    )
    if not stdio:
        serving.start("mcp-gateway", policy=policy, fronting=fronting)
        return
    if serving.workers > 1:
        raise typer.BadParameter("a stdio gateway is one process", param_hint="--workers")
    try:
        asyncio.run(
            _stdio(serving.served(policy=policy, fronting=fronting), fronting, serving.redis_volatile)
        )
    except SignoffError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("stopped: pending approvals stay in the ledger")


async def _stdio(served: Served, fronting: Fronting, volatile_ok: bool) -> None:
    """A stdio gateway tends its ledger as a server does (`Upkeep`): it may be the only process on it, and
    refuses a volatile Redis as a server does."""
    from mcp.server.stdio import stdio_server

    from signoff.ledger.evidence import ready_to_append
    from signoff.upkeep import Upkeep

    _, policy, channels = served.build()
    user = os_user()
    principal = Principal(id=f"mcp:{user}", name=user, via="mcp")
    proven = Proven(principal=principal)  # the OS user this process runs as, as the CLI's operator is
    key = audit_key()
    checkpoints = Path(served.audit_checkpoints) if served.audit_checkpoints else None
    if checkpoints is not None:  # by default beside the key, whose folder is made by now
        ready_to_append(checkpoints)
    opened = open_ledger(served.ledger, keyring=key.keyring, timeout=served.ledger_timeout)
    await kept(opened, volatile_ok)
    async with opened as ledger:
        gateway = fronting.gateway(ledger, policy, lambda ctx: proven, None, served.ledger)
        err.print(f"signoff mcp-gateway: stdio, requester {principal.id}, upstream {gateway.upstream.where}")
        err.print(f"audit checkpoints: {checkpoints or 'off'}", highlight=False, markup=False)
        upkeep = Upkeep(
            ledger, channels, served.public_url, checkpoints=checkpoints,
            checkpoint_every=served.checkpoint_every,
        )  # fmt: skip
        async with upkeep.running():
            try:  # no sessions opened ahead: which protocol the one client speaks is not known yet
                async with stdio_server() as (read, write):
                    options = gateway.server.create_initialization_options()
                    await gateway.server.run(read, write, options)
            finally:
                await gateway.upstream.close()


# -- --print-config ----------------------------------------------------------------------------------------


def _stdio_args(
    command: list[str],
    policy: str | None,
    serving: Gatewaying,
    state_key_file: str | None,
    upstream_url: str | None,
    upstream_env: list[str],
    hold: float,
    upstream_timeout: float,
) -> list[str]:
    """The arguments of this stdio gateway as a client spawns it: every path absolute and checked now, since
    the client starts it in a directory of its own and a missing file would only show in its log."""
    args = ["mcp-gateway", "--stdio"]
    if policy is not None:
        args += ["--policy", _file(policy, "--policy")]
    args += ["--ledger", _ledger(serving.ledger)]
    if serving.ledger_timeout != TIMEOUT:
        args += ["--ledger-timeout", f"{serving.ledger_timeout:g}"]
    if serving.redis_volatile:
        args.append("--redis-volatile")
    if serving.channels is not None:
        args += ["--channels", _file(serving.channels, "--channels")]
    for option, made in (
        ("--state-key-file", state_key_file),
        ("--audit-checkpoints", serving.audit_checkpoints),
    ):
        if made is not None:  # made when missing: its directory must be there
            args += [option, _in_a_directory(made, option)]
    if serving.no_audit_checkpoints:
        args.append("--no-audit-checkpoints")
    if hold != HOLD:
        args += ["--hold", f"{hold:g}"]
    if upstream_timeout != UPSTREAM_TIMEOUT:
        args += ["--upstream-timeout", f"{upstream_timeout:g}"]
    for entry in upstream_env:
        args += ["--upstream-env", entry]
    if upstream_url is not None:
        return [*args, "--upstream-url", upstream_url]
    found = shutil.which(command[0])
    if found is None:
        fail(f"{command[0]}: not found on PATH: give the upstream's command as an absolute path")
    return [*args, "--", str(Path(found).absolute()), *command[1:]]


def _env(upstream_env: list[str]) -> dict[str, str]:
    """The environment the client must give the gateway: the audit key this shell's signoff uses (a
    client's environment may lack the `XDG_DATA_HOME` that finds it), and the value of each
    `--upstream-env NAME` from this shell (a client passes on little of its own)."""
    env = {KEY_FILE_ENV: str(default_path().absolute())}
    for entry in upstream_env:
        if "=" in entry:  # NAME=VALUE rides in the arguments
            continue
        if entry not in os.environ:
            fail(f"--upstream-env {entry}: not set here: set it, or give {entry}=VALUE")
        env[entry] = os.environ[entry]
        err.print(f"the config holds the value of {entry}: keep it private", highlight=False, markup=False)
    return env


def _print(client: Desktop, args: list[str], env: dict[str, str]) -> None:
    """The config on stdout, and where it goes on stderr."""
    server: dict[str, Any] = {"command": _this_signoff(), "args": args, "env": env}
    if client is Desktop.VSCODE:
        config = {"servers": {NAME: {"type": "stdio", **server}}}
    else:
        config = {"mcpServers": {NAME: server}}
    print(json.dumps(config, indent=2))
    err.print(f"add the {NAME!r} server to {CONFIG_FILES[client]}", highlight=False, markup=False)


def _this_signoff() -> str:
    """This installation's `signoff` script, by its absolute path: a desktop client's PATH rarely holds a
    virtualenv's bin directory."""
    places = (sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user"))
    found = next(filter(None, (shutil.which(SCRIPT, path=scripts) for scripts in places)), None)
    if found is None:
        fail("cannot find this installation's signoff script: install signoff with pip, pipx or uv")
    return found


def _file(path: str, option: str) -> str:
    absolute = Path(path).expanduser().absolute()
    if not absolute.is_file():
        fail(f"{option}: no file at {absolute}")
    return str(absolute)


def _in_a_directory(path: str, option: str) -> str:
    absolute = Path(path).expanduser().absolute()
    if not absolute.parent.is_dir():
        fail(f"{option}: no directory {absolute.parent}")
    return str(absolute)


def _ledger(url: str | None) -> str:
    """The ledger's URL, a SQLite file's by its absolute path, in a directory that exists (the database
    is made at the first start, and said so here)."""
    url = ledger_url(url)
    parts = urlsplit(url)
    if parts.scheme == "memory":
        fail("--ledger: a memory ledger lives and dies with the gateway, and nobody could decide its calls")
    if parts.scheme != "sqlite":
        return url
    path = Path(parts.path[1:] if parts.path.startswith("/") else parts.path).expanduser().absolute()
    if not path.parent.is_dir():
        fail(f"--ledger: no directory {path.parent}")
    if not path.exists():
        err.print(f"the ledger {path} does not exist yet: the gateway makes it at its start", markup=False)
    return f"sqlite:///{path}" + (f"?{parts.query}" if parts.query else "")
