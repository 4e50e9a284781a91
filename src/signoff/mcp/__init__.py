"""signoff in front of an MCP server: every MCP client's tool calls through the gate (see `gateway`)."""

from signoff.mcp.fronting import Fronting
from signoff.mcp.gateway import Gateway
from signoff.mcp.identity import CONVERSATION
from signoff.mcp.upstream import Upstream, UpstreamFailed, upstream_env

__all__ = ["CONVERSATION", "Fronting", "Gateway", "Upstream", "UpstreamFailed", "upstream_env"]
