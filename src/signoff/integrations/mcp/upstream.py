"""The one MCP server a gateway fronts: spawned over stdio, or reached over streamable HTTP.

The connection is held by a task of its own (the SDK's transports are anyio context managers, which must
close in the task that opened them), made on first use and made again after the upstream died: a crashed
upstream costs the calls in flight an error result, and the next call a new process. A spawned upstream
gets the SDK's short list of safe environment variables and what the operator names, never the gateway's
own: the token that makes an admin, the key files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    InputRequiredResult,
    InputResponses,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
)

from signoff.core.errors import SignoffError

log = logging.getLogger("signoff.mcp")


class UpstreamFailed(SignoffError):
    """The upstream could not be reached, died, or did not answer in time."""


def upstream_env(names: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The spawned upstream's environment: the SDK's safe defaults and each `NAME` (from the gateway's
    own environment) or `NAME=VALUE` the operator passed. Raises `UpstreamFailed` for a name the gateway's
    environment lacks, so a typo is not a silently missing key."""
    env = get_default_environment()
    for entry in names:
        name, equals, value = entry.partition("=")
        if not name:
            raise UpstreamFailed(f"--upstream-env {entry!r}: give NAME or NAME=VALUE")
        if not equals:
            if name not in environ:
                raise UpstreamFailed(f"--upstream-env {name}: the gateway's environment has no {name}")
            value = environ[name]
        env[name] = value
    return env


class Upstream:
    def __init__(self, target: StdioServerParameters | str, *, timeout: float = 60.0) -> None:
        self.target = target
        self.timeout = timeout
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Client] | None = None
        self._lock = asyncio.Lock()
        self._tools: dict[str, Tool] = {}

    @property
    def where(self) -> str:
        target = self.target
        return target if isinstance(target, str) else " ".join([target.command, *target.args])

    async def list_tools(self, params: PaginatedRequestParams | None = None) -> ListToolsResult:
        client = await self._connected()
        async with self._failures("listing its tools"):
            listed = await client.session.list_tools(params=params)
        self._tools.update({tool.name: tool for tool in listed.tools})
        return listed

    async def schema(self, name: str) -> dict[str, Any] | None:
        """The tool's input schema as the upstream lists it (listed again for a tool not seen yet): what a
        person's edit must fit. None for a tool the upstream does not list."""
        if name not in self._tools:
            with contextlib.suppress(UpstreamFailed, MCPError):
                await self.list_tools()
        return self.listed(name)

    def listed(self, name: str) -> dict[str, Any] | None:
        """The tool's input schema as the upstream last listed it, without asking it again: what the SDK
        checks a 2026-07-28 call's `Mcp-Param` headers against (it would list the tools on every call)."""
        tool = self._tools.get(name)
        return dict(tool.input_schema) if tool is not None else None

    async def call_tool(
        self,
        name: str,
        args: dict[str, Any],
        *,
        request_state: str | None = None,
        input_responses: InputResponses | None = None,
    ) -> CallToolResult | InputRequiredResult:
        """The upstream's own answer, unchanged (its JSON-RPC errors raise `MCPError`, to pass on as
        they are). Raises `UpstreamFailed` when it could not answer."""
        client = await self._connected()
        async with self._failures(f"calling {name}"):
            return await client.session.call_tool(
                name,
                args,
                read_timeout_seconds=self.timeout,
                request_state=request_state,
                input_responses=input_responses,
                allow_input_required=True,
            )

    @contextlib.asynccontextmanager
    async def _failures(self, doing: str) -> AsyncIterator[None]:
        """The upstream's failures as `UpstreamFailed`, mapped once here: its own JSON-RPC errors pass on
        as they are, a timeout leaves the connection be, and a broken connection is made afresh next time."""
        try:
            yield
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise UpstreamFailed(f"the upstream did not answer within {self.timeout:g} s") from None
            if exc.code != CONNECTION_CLOSED:
                raise
            await self._lost(exc)
            raise UpstreamFailed(f"the upstream closed its connection while {doing}") from None
        except Exception as exc:
            await self._lost(exc)
            raise UpstreamFailed(f"the upstream failed while {doing}: {_said(exc)}") from None

    async def close(self) -> None:
        holder, self._holder, self._client, self._ready = self._holder, None, None, None
        if holder is not None:
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder

    async def _connected(self) -> Client:
        if self._client is not None and self._holder is not None and not self._holder.done():
            return self._client
        async with self._lock:
            if self._client is None or self._holder is None or self._holder.done():
                self._ready = asyncio.get_running_loop().create_future()
                self._holder = asyncio.create_task(self._hold(self._ready), name="mcp upstream")
                try:
                    self._client = await asyncio.wait_for(asyncio.shield(self._ready), self.timeout)
                except Exception as exc:
                    await self.close()
                    raise UpstreamFailed(f"could not reach the upstream {self.where}: {_said(exc)}") from None
            return self._client

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        try:
            connecting = Client(self.target, mode="auto", cache=None, read_timeout_seconds=self.timeout)
            async with connecting as client:
                ready.set_result(client)
                await anyio.sleep_forever()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.warning("the upstream %s went away: %s", self.where, _said(exc))

    async def _lost(self, exc: BaseException) -> None:
        """A call found the connection broken: the next call connects afresh."""
        log.warning("the upstream %s failed (%s); it will be started again", self.where, _said(exc))
        await self.close()


def _said(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _said(exc.exceptions[0])
    return str(exc) or type(exc).__name__
