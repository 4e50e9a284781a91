"""The one MCP server a gateway fronts: spawned over stdio, or reached over streamable HTTP.

It is reached through sessions on the terms of the clients it serves (see `connection`), each made on first
use and made again after the upstream died: a crashed upstream costs the requests in flight an error
result, and the next request a new process. A spawned upstream gets the SDK's short list of safe
environment variables and what the operator names, never the gateway's own: the token that makes an
admin, the key files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    InputRequiredResult,
    InputResponses,
    ListToolsResult,
    PaginatedRequestParams,
    Request,
    Tool,
)
from pydantic import TypeAdapter

from signoff.core.errors import SignoffError
from signoff.mcp.connection import Caller, Connection, Terms, where

log = logging.getLogger("signoff.mcp")

WARM: tuple[Terms, ...] = ((False, frozenset()), (False, frozenset({"elicitation"})))


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
        self._connections: dict[Terms, Connection] = {}
        self._tools: dict[str, Tool] = {}

    @property
    def where(self) -> str:
        return where(self.target)

    async def list_tools(
        self, params: PaginatedRequestParams | None = None, caller: Caller | None = None
    ) -> ListToolsResult:
        connection = self._connection(caller)
        async with self._failures(connection, "listing its tools"), connection.serving(caller) as client:
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
        caller: Caller | None = None,
        *,
        request_state: str | None = None,
        input_responses: InputResponses | None = None,
        progress: ProgressFnT | None = None,
    ) -> CallToolResult | InputRequiredResult:
        """The upstream's own answer, unchanged (its JSON-RPC errors raise `MCPError`, to pass on as
        they are), with its progress told to `progress`. Raises `UpstreamFailed` when it could not answer."""
        connection = self._connection(caller)
        async with self._failures(connection, f"calling {name}"), connection.serving(caller) as client:
            return await client.session.call_tool(
                name,
                args,
                read_timeout_seconds=self.timeout,
                progress_callback=progress,
                request_state=request_state,
                input_responses=input_responses,
                allow_input_required=True,
            )

    async def ask(
        self, request: Request[Any, Any], answer: type[Any] | TypeAdapter[Any], caller: Caller
    ) -> Any:
        """Any other request of the client's (resources, prompts, completions), as the upstream answers it."""
        connection = self._connection(caller)
        async with self._failures(connection, request.method), connection.serving(caller) as client:
            return await client.session.send_request(
                request, answer, request_read_timeout_seconds=self.timeout
            )

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    async def start(self) -> None:
        """Open now the sessions most clients need (on 2026-07-28, with elicitation and without), so that a
        first call does not wait for a spawned upstream to start. One that fails is made again, and
        reported, on first use."""
        opening = [self._connection(terms).connect() for terms in WARM]
        for failed in await asyncio.gather(*opening, return_exceptions=True):
            if isinstance(failed, Exception):
                log.warning("the upstream %s did not start: %s", self.where, _said(failed))

    def _connection(self, caller: Caller | Terms | None) -> Connection:
        terms = caller.terms if isinstance(caller, Caller) else caller or (False, frozenset())
        if (found := self._connections.get(terms)) is None:
            found = self._connections[terms] = Connection(self.target, terms, self.timeout)
        return found

    @contextlib.asynccontextmanager
    async def _failures(self, connection: Connection, doing: str) -> AsyncIterator[None]:
        """The upstream's failures as `UpstreamFailed`, mapped once here: its own JSON-RPC errors pass on
        as they are, a timeout leaves the session be, and a broken one is made afresh next time."""
        try:
            yield
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise UpstreamFailed(f"the upstream did not answer within {self.timeout:g} s") from None
            if exc.code != CONNECTION_CLOSED:
                raise
            await self._lost(connection, exc)
            raise UpstreamFailed(f"the upstream closed its connection while {doing}") from None
        except Exception as exc:
            await self._lost(connection, exc)
            raise UpstreamFailed(f"the upstream failed while {doing}: {_said(exc)}") from None

    async def _lost(self, connection: Connection, exc: BaseException) -> None:
        """A request found the session broken: the next one connects afresh."""
        log.warning("the upstream %s failed (%s); it will be started again", self.where, _said(exc))
        await connection.close()


def _said(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _said(exc.exceptions[0])
    return str(exc) or type(exc).__name__
