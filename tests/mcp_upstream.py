"""A small MCP server the gateway's tests front: run as `python mcp_upstream.py [--http PORT]`.

Every call that runs appends a line to the file `$UPSTREAM_RUNS` names, so a test counts how often the
upstream really ran a tool. `env` reports which of the names it is asked about are in its environment.
With `$UPSTREAM_STATE_KEY`, its own input rounds are sealed with that key rather than one of its own: so
one spawned by each of two gateway workers answers a round the other began, as the SDK asks of an upstream
run as several instances."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

_shared_key = os.environ.get("UPSTREAM_STATE_KEY")
_sealing = RequestStateSecurity(keys=[_shared_key], audience="upstream") if _shared_key else None
server = MCPServer("upstream", request_state_security=_sealing)


def _ran(tool: str, args: dict[str, object]) -> None:
    with open(os.environ["UPSTREAM_RUNS"], "a") as runs:
        runs.write(json.dumps({"tool": tool, "args": args}) + "\n")


@server.tool()
def pay(amount: float, to: str) -> str:
    """Pay someone."""
    _ran("pay", {"amount": amount, "to": to})
    return f"paid {amount} to {to}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(query: str) -> str:
    """Look something up."""
    _ran("lookup", {"query": query})
    return f"found {query}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def peek(path: str) -> str:
    """Claims to only read: the policy has no rule for it, so its calls ask all the same."""
    _ran("peek", {"path": path})
    return f"peeked at {path}"


@server.tool()
def env(names: list[str]) -> str:
    """Which of these environment variables this process has."""
    return json.dumps({name: os.environ.get(name) for name in names})


class Sure(BaseModel):
    sure: bool


@server.tool()
async def confirm(what: str, ctx: Context) -> Any:
    """Asks its own question first, then does `what`: in an input round of its own on 2026-07-28,
    mid-call (`elicitation/create`) on an older protocol."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        asked = await ctx.elicit(f"Really {what}?", Sure)
        sure = asked.action == "accept" and asked.data is not None and asked.data.sure
    else:
        answer = (ctx.input_responses or {}).get("sure")
        if not isinstance(answer, ElicitResult):
            question = ElicitRequestFormParams(
                message=f"Really {what}?", requested_schema=Sure.model_json_schema()
            )
            return InputRequiredResult(
                input_requests={"sure": ElicitRequest(params=question)}, request_state="asked"
            )
        sure = answer.action == "accept" and bool((answer.content or {}).get("sure"))
    if not sure:
        return f"did not {what}"
    _ran("confirm", {"what": what})
    return f"did {what}"


@server.tool()
def crash() -> str:
    """Exit the process mid-call."""
    os._exit(3)


@server.tool()
def sleep(seconds: float) -> str:
    """Take a while."""
    time.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run("stdio")
