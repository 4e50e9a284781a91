"""Serve an app with uvicorn, in this process or in several, and say where once it is listening."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette
from uvicorn.supervisors import Multiprocess


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


def serve_workers(factory: str, host: str, port: int, workers: int, on_ready: Callable[[str], None]) -> None:
    """Run `workers` processes, each building its app with the factory `module:function`, on one listening
    socket, until the process is told to stop. uvicorn's own supervisor restarts a worker that dies.
    `on_ready` gets the base URL once the socket listens; connections wait in its backlog meanwhile."""
    config = uvicorn.Config(
        factory, factory=True, host=host, port=port, workers=workers, log_level="warning", lifespan="on"
    )
    sock = config.bind_socket()
    sock.listen(config.backlog)  # uvicorn listens only in the workers; until they are up, connections queue
    on_ready(f"http://{host}:{sock.getsockname()[1]}")
    Multiprocess(config, sockets=[sock]).run()
