"""A call the gate let through, to the upstream and back: its answer unchanged, its progress and its own
input rounds included.

The upstream sees the call on the terms of the client behind it (see `connection`). On 2026-07-28 it asks
for input by answering with an `InputRequiredResult`, which the client takes as it is: its retry comes back
with the upstream's state sealed in the gateway's (`asking.Passed`, bound to the approval whose claim let
the call run), and goes to the upstream once. On an older protocol it asks mid-call, relayed to the client.
"""

from __future__ import annotations

from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp_types import CallToolResult, InputRequiredResult, InputResponses, TextContent

from signoff.mcp.asking import KEY, Passed, seal_later
from signoff.mcp.connection import Caller
from signoff.mcp.upstream import Upstream, UpstreamFailed

Result = CallToolResult | InputRequiredResult
T = TypeVar("T")


async def forward(
    upstream: Upstream,
    ctx: ServerRequestContext[Any, Any],
    tool: str,
    args: dict[str, Any],
    state: str | None = None,
    responses: InputResponses | None = None,
) -> Result:
    """`responses` are the client's answers to the upstream's questions: signoff's own are not passed on."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    theirs = {key: answer for key, answer in (responses or {}).items() if key != KEY} or None
    try:
        result = await upstream.call_tool(
            tool, args, Caller(ctx), request_state=state, input_responses=theirs, progress=progress
        )
    except UpstreamFailed as exc:
        return error(str(exc))
    return result


def passed(result: T, *, approval: str = "", call: str = "") -> T:
    """The upstream's answer, its input round's state (if it asks) sealed so the retry finds it again:
    bound to `approval`'s claim of `call`, where one let the call run, under a nonce of its own."""
    if isinstance(result, InputRequiredResult):
        state = Passed(result.request_state or "", approval=approval, call=call)
        return result.model_copy(update={"request_state": seal_later(state)})
    return result


def error(text: str) -> CallToolResult:
    """A result the model reads as a failed call, with why."""
    return CallToolResult(content=[TextContent(text=text)], is_error=True)
