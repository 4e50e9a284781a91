"""`can_use_tool` for the Claude Agent SDK (the `claude` extra): every tool call the agent
would make is ruled on by signoff, and a person asked where the policy says so, before the SDK runs it.

```python
from claude_agent_sdk import ClaudeAgentOptions
from signoff.claude import can_use_tool

options = ClaudeAgentOptions(can_use_tool=can_use_tool(server="https://signoff.example", token="sop_…"))
```

With `server` and `token` it makes the command hook's one call to a signoff server (`signoff.hooks.client`);
with `gate` it rules in this process, against that gate's ledger and policy, for `requester`. Either way
it answers the SDK's own types: `PermissionResultAllow(updated_input=…)`, the call's input or the one a
person edited it to, or `PermissionResultDeny(message=…)` with the reason. A server that can't be reached
or refuses is a deny: the call never runs for want of an answer.

The SDK names no session to the callback: each `can_use_tool(...)` is one chat, `claude-code:<session>`,
a new one unless `session` names it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext
from claude_agent_sdk.types import CanUseTool, PermissionResult

from signoff.gate import Gate
from signoff.hooks.client import DEFAULT_TIMEOUT, HookFailed, asked, send, verdict
from signoff.hooks.events import HookEvent, Verdict
from signoff.hooks.ruling import ClaudeCode


def can_use_tool(
    *,
    server: str | None = None,
    token: str = "",
    gate: Gate | None = None,
    requester: str = "code",
    session: str | None = None,
    cwd: str = "",
    timeout: float = DEFAULT_TIMEOUT,
) -> CanUseTool:
    """The SDK's `can_use_tool` callback, asking the signoff server at `server` as the principal `token`
    proves, or `gate` for `requester`; `timeout` bounds how long a call waits for a person, and `cwd` is
    where the agent works, shown with each call."""
    if (server is None) == (gate is None):
        raise ValueError("can_use_tool needs a server (with its token) or a gate, and not both")
    chat = session or f"sdk-{uuid.uuid4().hex}"
    ruling = ClaudeCode(gate) if gate is not None else None

    async def decide(
        tool: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        event = asked(chat, tool, tool_input, context.tool_use_id or f"sdk_{uuid.uuid4().hex}", cwd)
        try:
            if ruling is not None:
                found = await ruling.ask(HookEvent(**event), requester, hook_timeout=timeout)
            else:
                assert server is not None
                allow, reason, edited = verdict(
                    await asyncio.to_thread(send, server, token, event, timeout=timeout)
                )
                found = Verdict(allow=allow, reason=reason, updated_input=edited)
        except HookFailed as exc:
            return PermissionResultDeny(message=f"signoff: {exc}")
        if not found.allow:
            return PermissionResultDeny(message=found.reason)
        return PermissionResultAllow(updated_input=found.updated_input or tool_input)

    return decide
