"""The SDK's `requestState` boundary, audited: a tampered, expired or foreign state is an attack or a bug an
operator should see, and the SDK only logs it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError

from signoff.core.principal import Principal, Proven

Refused = Callable[[Principal | None, str, str], Awaitable[None]]
"""Records a refusal: of whom (None when nobody could be told), of which tool, and why."""


class Audited:
    """`boundary`, with each state it refuses before the handler is entered recorded by `refused`."""

    def __init__(
        self,
        boundary: RequestStateBoundary,
        requester: Callable[[ServerRequestContext[Any, Any]], Proven | None],
        refused: Refused,
    ) -> None:
        self.boundary = boundary
        self.requester = requester
        self.refused = refused

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        entered = False

        async def inner(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
            nonlocal entered
            entered = True
            return await call_next(ctx)

        try:
            return await self.boundary(ctx, inner)
        except MCPError:
            if not entered:
                tool = str((ctx.params or {}).get("name", ""))
                proven = self.requester(ctx)
                why = "a tampered, expired or foreign requestState"
                await self.refused(proven.principal if proven else None, tool, why)
            raise
