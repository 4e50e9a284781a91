"""What the gateway passes on without ruling: the upstream's resources, prompts and completions, answered
as the upstream would answer its client. Only a tool call acts on the world; the gate rules on those."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    CompleteRequest,
    CompleteRequestParams,
    CompleteResult,
    GetPromptRequest,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsRequest,
    ListPromptsResult,
    ListResourcesRequest,
    ListResourcesResult,
    ListResourceTemplatesRequest,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequest,
    ReadResourceRequestParams,
    ReadResourceResult,
)
from pydantic import BaseModel, TypeAdapter

from signoff.mcp.asking import Passed, refused_state, round_state
from signoff.mcp.connection import Caller
from signoff.mcp.forwarding import passed
from signoff.mcp.upstream import Upstream, UpstreamFailed

Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]

PASSED: dict[str, tuple[type[BaseModel], type[Any], type[Any] | TypeAdapter[Any]]] = {
    "resources/list": (PaginatedRequestParams, ListResourcesRequest, ListResourcesResult),
    "resources/templates/list": (
        PaginatedRequestParams, ListResourceTemplatesRequest, ListResourceTemplatesResult
    ),
    "resources/read": (
        ReadResourceRequestParams, ReadResourceRequest, TypeAdapter(ReadResourceResult | InputRequiredResult)
    ),
    "prompts/list": (PaginatedRequestParams, ListPromptsRequest, ListPromptsResult),
    "prompts/get": (
        GetPromptRequestParams, GetPromptRequest, TypeAdapter(GetPromptResult | InputRequiredResult)
    ),
    "completion/complete": (CompleteRequestParams, CompleteRequest, CompleteResult),
}  # fmt: skip
"""Each method the gateway passes on: its params, the request it makes of the upstream, and what it reads
back."""


def pass_through(server: Server[Any], upstream: Upstream) -> None:
    """Register the SDK `Server`'s handlers for what passes through (so it declares them, too)."""
    for method, (params, request, answer) in PASSED.items():
        server.add_request_handler(method, params, _passing(upstream, request, answer))


def _passing(upstream: Upstream, request: type[Any], answer: type[Any] | TypeAdapter[Any]) -> Handler:
    async def handle(ctx: ServerRequestContext[Any, Any], params: BaseModel) -> Any:
        sent = params.model_copy(update={"meta": None, **_their_state(params)})
        try:
            return passed(await upstream.ask(request(params=sent), answer, Caller(ctx)))
        except UpstreamFailed as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from None

    return handle


def _their_state(params: BaseModel) -> dict[str, Any]:
    """A retry's state back as the upstream wrote it: only the upstream's own rounds pass here."""
    plain = getattr(params, "request_state", None)
    if plain is None:
        return {}
    state = round_state(plain)
    if not isinstance(state, Passed):
        raise refused_state()
    return {"request_state": state.state or None}
