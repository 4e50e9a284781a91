"""Serve an app with uvicorn and say where, once it is really listening."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette


async def serve(app: Starlette, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Run until the process is told to stop (Ctrl-C, SIGTERM); `on_ready` gets the base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    running = asyncio.ensure_future(server.serve())
    while not server.started and not running.done():  # noqa: ASYNC110 - uvicorn has a flag, not an event
        await asyncio.sleep(0.02)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        on_ready(f"http://{host}:{bound}")
    await running
    if not server.started:
        raise OSError(f"could not serve on {host}:{port} (is the port in use?)")
