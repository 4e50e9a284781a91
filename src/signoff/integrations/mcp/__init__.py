"""signoff in front of an MCP server: every MCP client's tool calls through the gate (see `gateway`)."""

from signoff.integrations.mcp.fronting import Fronting
from signoff.integrations.mcp.gateway import Gateway
from signoff.integrations.mcp.identity import CONVERSATION
from signoff.integrations.mcp.upstream import Upstream, UpstreamFailed, upstream_env

__all__ = ["CONVERSATION", "Fronting", "Gateway", "Upstream", "UpstreamFailed", "upstream_env"]
