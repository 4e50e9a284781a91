"""`--permission-prompt-tool mcp__signoff__approve`: a stdio MCP server (the official SDK's) with one tool,
`approve`, which Claude Code calls with `{tool_name, input, tool_use_id}` where it would ask its terminal.

It makes the command hook's one call (`client.send`) and answers in the shape Claude Code takes from such a
tool: `{"behavior": "allow", "updatedInput": …}` or `{"behavior": "deny", "message": …}`. A call that
fails (the server down, a refusal) is a deny with the reason: the tool never allows for want of an answer.

The tool hears no session: each server process (Claude Code starts one per session) names its own, so the
session's calls are one chat in the inbox.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from mcp.server.mcpserver import MCPServer

from signoff.hooks.client import DEFAULT_TIMEOUT, HookFailed, asked, permission, send

NAME = "signoff"
TOOL = "approve"


def prompt_server(server: str, token: str, *, timeout: float = DEFAULT_TIMEOUT, cwd: str = "") -> MCPServer:
    """The MCP server for `--permission-prompt-tool mcp__signoff__approve`, asking the signoff server at
    `server` as the principal `token` proves; `cwd` is where Claude Code runs, shown with each call."""
    session = f"prompt-{uuid.uuid4().hex}"
    mcp = MCPServer(NAME)

    @mcp.tool(
        name=TOOL, description="Ask signoff whether Claude Code may make this call.", structured_output=False
    )
    async def approve(tool_name: str, input: dict[str, Any], tool_use_id: str = "") -> str:
        """The answer, as the JSON text Claude Code reads from a permission-prompt tool."""
        call_id = tool_use_id or f"prompt_{uuid.uuid4().hex}"
        event = asked(session, tool_name, input, call_id, cwd)
        try:
            answer = await asyncio.to_thread(send, server, token, event, timeout=timeout)
            said = permission(answer, input)
        except HookFailed as exc:
            said = {"behavior": "deny", "message": f"signoff: {exc}"}
        return json.dumps(said)

    return mcp
