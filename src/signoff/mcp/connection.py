"""One session with the upstream, on the terms of the clients it serves.

The upstream must see what the client behind the gateway can do, as if it spoke to it alone: a server
asks only for the input its client declared it can give, and a tool written for the older protocol asks
mid-call (`elicitation/create`), which only an older session can carry. So the gateway keeps one session
per kind of client (`Caller.terms`): its protocol's era, and which of elicitation, sampling and roots it
declared. On an older session the upstream's mid-call requests are relayed to the client whose call is
running; the SDK does not say which call a server's request belongs to, so such a session runs one call at
a time.

A session is held by a task of its own (the SDK's transports are anyio context managers, which must close in
the task that opened them), made on first use and made again after the upstream died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_REQUEST,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    ListRootsRequest,
    ListRootsResult,
    Result,
    ServerRequest,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

log = logging.getLogger("signoff.mcp")
R = TypeVar("R", bound=Result)

Terms = tuple[bool, frozenset[str]]
"""A session's terms: whether it speaks the older protocol, and the kinds of input its client can give."""
KINDS = ("elicitation", "sampling", "roots")


def where(target: StdioServerParameters | str) -> str:
    """An upstream as an operator reads it in a log line: its URL, without what may be a secret in it (a
    password, a key in its query), or the command that spawns it."""
    if not isinstance(target, str):
        return " ".join([target.command, *target.args])
    parts = urlsplit(target)  # hosted MCP servers take their API key in the query
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment="").geturl()


@dataclass(frozen=True, slots=True)
class Caller:
    """The client behind a request: its session's context, to relay the upstream's questions to."""

    ctx: ServerRequestContext[Any, Any]

    @property
    def terms(self) -> Terms:
        declared = self.ctx.session.client_capabilities
        kinds = frozenset(k for k in KINDS if declared is not None and getattr(declared, k) is not None)
        return self.ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS, kinds


class Connection:
    def __init__(self, target: StdioServerParameters | str, terms: Terms, timeout: float) -> None:
        self.target = target
        self.legacy, self.kinds = terms
        self.timeout = timeout
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._connecting = asyncio.Lock()
        self._one_call = asyncio.Lock()
        self._caller: Caller | None = None

    @contextlib.asynccontextmanager
    async def serving(self, caller: Caller | None) -> AsyncIterator[Client]:
        """The session, for one request of `caller`'s: on an older session, the only one running, with the
        upstream's questions relayed to `caller`."""
        client = await self.connect()
        if not self.legacy:
            yield client
            return
        async with self._one_call:
            self._caller = caller
            try:
                yield client
            finally:
                self._caller = None

    async def close(self) -> None:
        holder, self._holder, self._client = self._holder, None, None
        if holder is not None:
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder

    async def connect(self) -> Client:
        if self._client is not None and self._holder is not None and not self._holder.done():
            return self._client
        async with self._connecting:
            if self._client is None or self._holder is None or self._holder.done():
                ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
                self._holder = asyncio.create_task(self._hold(ready), name="mcp upstream")
                try:
                    self._client = await asyncio.wait_for(asyncio.shield(ready), self.timeout)
                except Exception:
                    await self.close()
                    raise
            return self._client

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        relays: dict[str, tuple[str, Any]] = {
            "elicitation": ("elicitation_callback", self._elicit),
            "sampling": ("sampling_callback", self._sample),
            "roots": ("list_roots_callback", self._roots),
        }
        callbacks = {option: relay for kind, (option, relay) in relays.items() if kind in self.kinds}
        mode = "legacy" if self.legacy else "auto"
        try:
            connecting = Client(
                self.target, mode=mode, cache=None, read_timeout_seconds=self.timeout, **callbacks
            )
            async with connecting as client:
                ready.set_result(client)
                await anyio.sleep_forever()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.warning("the upstream %s went away: %s", where(self.target), exc)

    async def _elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        return await self._relay(ElicitRequest(params=params), ElicitResult)

    async def _sample(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        return await self._relay(CreateMessageRequest(params=params), CreateMessageResult)

    async def _roots(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        return await self._relay(ListRootsRequest(), ListRootsResult)

    async def _relay(self, request: ServerRequest, answer: type[R]) -> R | ErrorData:
        """The upstream's question, asked of the client whose call is running, and its answer."""
        caller = self._caller
        if caller is None:
            return ErrorData(code=INVALID_REQUEST, message="no call of this client is running to ask about")
        related = ServerMessageMetadata(related_request_id=caller.ctx.request_id)
        try:
            return await caller.ctx.session.send_request(request, answer, metadata=related)
        except MCPError as exc:
            return exc.error
        except NoBackChannelError:
            return ErrorData(code=INVALID_REQUEST, message="the client can't be asked during this call")
