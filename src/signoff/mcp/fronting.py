"""The upstream MCP server a gateway fronts, as the command line described it: what each worker process
builds its `Gateway` from (`signoff mcp-gateway`), so the CLI knows none of the gateway's parts."""

from __future__ import annotations

from pathlib import Path

import msgspec
from mcp.client.stdio import StdioServerParameters

from signoff.core.policy import Policy
from signoff.gate import Gate
from signoff.ledger.base import Ledger
from signoff.mcp.gateway import Gateway, Requester
from signoff.mcp.statekeys import state_keys
from signoff.mcp.upstream import Upstream, upstream_env


class Fronting(msgspec.Struct, frozen=True, kw_only=True):
    """A URL, or a command to spawn with the SDK's safe environment and the `upstream_env` entries (`NAME`
    or `NAME=VALUE`)."""

    upstream_url: str | None = None
    command: tuple[str, ...] = ()
    upstream_env: tuple[str, ...] = ()
    state_keys: str | None = None
    hold: float = 60.0
    upstream_timeout: float = 60.0

    def gateway(
        self, ledger: Ledger, policy: Policy, requester: Requester, inbox: str | None, url: str | None = None
    ) -> Gateway:
        """`url` names `ledger` in the hints a gateway without an inbox gives. Raises `SignoffError` for an
        `upstream_env` name the environment lacks, or a state key file that can't be used."""
        if self.upstream_url is not None:
            target: StdioServerParameters | str = self.upstream_url
        else:
            env = upstream_env(self.upstream_env)
            target = StdioServerParameters(command=self.command[0], args=list(self.command[1:]), env=env)
        keys, _ = state_keys(Path(self.state_keys) if self.state_keys else None)
        gate = Gate(ledger, policy, actor="signoff:mcp-gateway")
        upstream = Upstream(target, timeout=self.upstream_timeout)
        return Gateway(
            gate, upstream, requester, state_keys=keys, hold=self.hold, inbox=inbox, ledger_url=url
        )
