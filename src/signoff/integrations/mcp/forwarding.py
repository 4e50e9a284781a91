"""A call the gate let through, to the upstream and back: its answer unchanged, its own input rounds
included.

An upstream on 2026-07-28 asks for input by answering with an `InputRequiredResult`. A client on the same
protocol takes it as it is: its retry comes back with the upstream's state, sealed in the gateway's
(`asking.Passed`), so it goes straight to the upstream (the call's claim was taken in its first round). A
client on an older protocol can't read that result, so the gateway asks it the upstream's questions
mid-call (`elicitation/create`) and retries upstream with the answers, as the SDK's own client would.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import NoBackChannelError
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    InputResponse,
    InputResponses,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.integrations.mcp.asking import Passed, seal_later
from signoff.integrations.mcp.upstream import Upstream, UpstreamFailed

Result = CallToolResult | InputRequiredResult

MAX_ROUNDS = 10
"""Input rounds the gateway drives for an older client before it gives up on an upstream that keeps
asking (the SDK's own client stops at the same count)."""


async def forward(
    upstream: Upstream,
    ctx: ServerRequestContext[Any, Any],
    tool: str,
    args: dict[str, Any],
    state: str | None = None,
    responses: InputResponses | None = None,
) -> Result:
    try:
        result = await upstream.call_tool(tool, args, request_state=state, input_responses=responses)
        for _ in range(MAX_ROUNDS):
            if (
                not isinstance(result, InputRequiredResult)
                or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            ):
                break
            answers = await _asked_mid_call(ctx, result)
            if answers is None:
                return error("the upstream asked for input that this client cannot give")
            result = await upstream.call_tool(
                tool, args, request_state=result.request_state, input_responses=answers
            )
        else:
            return error(f"the upstream asked for input more than {MAX_ROUNDS} times")
    except UpstreamFailed as exc:
        return error(str(exc))
    if isinstance(result, InputRequiredResult):  # its retry comes back past the gate, to the upstream
        return result.model_copy(update={"request_state": seal_later(Passed(result.request_state or ""))})
    return result


async def _asked_mid_call(
    ctx: ServerRequestContext[Any, Any], result: InputRequiredResult
) -> dict[str, InputResponse] | None:
    """The older client's answers to the upstream's questions, or None for a question it can't take
    (sampling, roots, or no way to ask it)."""
    answers: dict[str, InputResponse] = {}
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, ElicitRequest):
            return None
        question = request.params
        try:
            if isinstance(question, ElicitRequestURLParams):
                answer: ElicitResult = await ctx.session.elicit_url(
                    question.message, question.url, question.elicitation_id or key, ctx.request_id
                )
            else:
                answer = await ctx.session.elicit_form(
                    question.message, question.requested_schema, ctx.request_id
                )
        except NoBackChannelError:
            return None
        answers[key] = answer
    return answers


def error(text: str) -> CallToolResult:
    """A result the model reads as a failed call, with why."""
    return CallToolResult(content=[TextContent(text=text)], is_error=True)
