"""`signoff mcp-gateway`: one upstream MCP server's tools, every call through the gate, for any MCP client.

Over streamable HTTP (`--host`, `--port`: `/mcp`) the same process serves the inbox and the REST API,
with `signoff serve`'s authentication, and every MCP request needs a bearer token whose principal is the
requester. Over stdio (`--stdio`, for clients that spawn their servers) the requester is `mcp:<os user>`,
and people decide from the CLI or from any `signoff serve` on the same ledger. stdout is then the
protocol's: everything this command says goes to stderr.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from signoff.cli.common import audit_key, err, fail, os_user
from signoff.cli.serving import Serving, with_serving
from signoff.core.errors import SignoffError
from signoff.core.principal import Principal, Proven
from signoff.ledger import open_ledger

# The gateway's own imports (the SDK, the server) wait for the command: every CLI call would pay for them.
if TYPE_CHECKING:
    from signoff.cli.worker import Served
    from signoff.integrations.mcp import Fronting

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


@with_serving
def mcp_gateway(
    command: CommandArgument = None,
    policy: PolicyOption = None,
    stdio: StdioOption = False,
    state_key_file: StateKeyOption = None,
    upstream_url: UpstreamUrlOption = None,
    upstream_env: UpstreamEnvOption = None,
    hold: HoldOption = 60.0,
    upstream_timeout: UpstreamTimeoutOption = 60.0,
    *,
    serving: Serving,
) -> None:
    """Front one upstream MCP server: every MCP client's tool calls pass signoff's gate."""
    from signoff.integrations.mcp import Fronting

    if (upstream_url is None) == (not command):
        raise typer.BadParameter(
            "give either --upstream-url URL or -- CMD ARGS...", param_hint="--upstream-url"
        )
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
        asyncio.run(_stdio(serving.served(policy=policy, fronting=fronting), fronting))
    except SignoffError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("stopped: pending approvals stay in the ledger")


async def _stdio(served: Served, fronting: Fronting) -> None:
    """A stdio gateway tends its ledger as a server does (`Upkeep`): it may be the only process on it."""
    from mcp.server.stdio import stdio_server

    from signoff.upkeep import Upkeep

    _, policy, channels = served.build()
    user = os_user()
    principal = Principal(id=f"mcp:{user}", name=user, via="mcp")
    proven = Proven(principal=principal)  # the OS user this process runs as, as the CLI's operator is
    key = audit_key()
    async with open_ledger(served.ledger, keyring=key.keyring) as ledger:
        gateway = fronting.gateway(ledger, policy, lambda ctx: proven, None)
        err.print(f"signoff mcp-gateway: stdio, requester {principal.id}, upstream {gateway.upstream.where}")
        checkpoints = Path(served.audit_checkpoints) if served.audit_checkpoints else None
        upkeep = Upkeep(ledger, channels, served.public_url, checkpoints=checkpoints)
        async with upkeep.running():
            try:  # no sessions opened ahead: which protocol the one client speaks is not known yet
                async with stdio_server() as (read, write):
                    options = gateway.server.create_initialization_options()
                    await gateway.server.run(read, write, options)
            finally:
                await gateway.upstream.close()
