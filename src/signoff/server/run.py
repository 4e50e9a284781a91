"""Serve an app with uvicorn, in this process or in several, and say where once it is listening.

uvicorn's own HTTP/1.1 protocol waits for a request's head for ever on a fresh connection (its keep-alive
timer starts only after a first response), so a slow client that opens connections and sends its headers
a byte at a time, or nothing, holds them for good. `Bounded` closes such a connection `head_timeout`
seconds after its head began. Bodies have their deadline at the edge (`edge.BODY_TIMEOUT`), idle
connections uvicorn's keep-alive timeout, and WebSocket messages a size limit (1009 above it).

uvicorn closes a WebSocket whose text frame is not UTF-8 with 1007, as RFC 6455 says, but logs the decode
error's traceback with it: a screenful per frame, for anyone who cares to send them. `Utf8Refused` keeps
the line and drops the traceback.

A server that stops (SIGTERM, Ctrl-C) waits for its open connections to end before the app's lifespan
hears of it, and a reply may wait hours on a person. So both protocols here first call the app's stop hook
(`STOP_HOOK` in the lifespan state): the app ends its streams at once, each with an `error` chunk saying
what is still pending and `[DONE]`, and closes its sockets itself, with their reason; a socket the app has
not closed within `CLOSE_WITHIN` seconds uvicorn closes as it would have (1012).

WebSocket frames go uncompressed: per-message deflate kept about 40 KB of zlib state per socket, open or
idle (5,000 idle sockets: 436 MB with it, 239 MB without), which the C allocator kept after they closed,
for frames of a few hundred bytes of JSON.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import h11
import uvicorn
from starlette.applications import Starlette
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.supervisors import Multiprocess

from signoff.channels.review import hidden
from signoff.server.http import CHAT_BODY

STOP_HOOK = "signoff.stop"
"""The key of the app's stop hook in the lifespan state: a function the protocols call once the server
begins to shut down, before they end their connections."""
CLOSE_WITHIN = 5.0
"""Seconds a stopping server leaves the app to close a live socket itself."""
HEAD_TIMEOUT = 10.0
"""Seconds a request's head may take to arrive, from the first byte of it (or from the connection)."""
KEEP_ALIVE = 5
"""Seconds an idle keep-alive connection stays open."""


class Bounded(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.head_timeout: float = getattr(config, "head_timeout", HEAD_TIMEOUT)
        self._head: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # a head begins (on a kept-alive connection too)
            self._await_head()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        _tell_stopping(self.app_state)
        super().shutdown()

    def _await_head(self) -> None:
        if self._head is None:
            self._head = self.loop.call_later(self.head_timeout, self._too_slow)

    def _cancel_head(self) -> None:
        if self._head is not None:
            self._head.cancel()
            self._head = None

    def _too_slow(self) -> None:
        self._head = None
        if not self.transport.is_closing():
            self.transport.close()


class Told(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (the one it picks itself), leaving the app to close a socket when the
    server stops, after it told its client why (see the module)."""

    def shutdown(self) -> None:
        if not self.handshake_complete or self.close_sent or not _tell_stopping(self.app_state):
            super().shutdown()
            return
        self.loop.call_later(CLOSE_WITHIN, self._close_late)

    def _close_late(self) -> None:
        if not self.transport.is_closing():
            super().shutdown()


def _tell_stopping(app_state: dict[str, Any]) -> bool:
    """Call the app's stop hook, if it has one: whether it had."""
    hook = app_state.get(STOP_HOOK)
    if hook is None:
        return False
    hook()
    return True


def _no_delay(transport: asyncio.Transport) -> None:
    """Send each write at once. asyncio turns Nagle's algorithm off only for sockets made with
    `IPPROTO_TCP` as their protocol, and a listening socket from `socket.create_server` (`listen`) has 0, as
    have the connections it accepts: with Nagle on, every chunk of a streamed reply after the first waited
    for the client's delayed ACK, about 40 ms, so a reply arrived in bursts."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Utf8Refused(logging.Filter):
    """Drops the traceback from uvicorn's line about a WebSocket text frame that is not UTF-8."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UnicodeDecodeError) and "UTF-8" in record.msg:
            record.exc_info = record.exc_text = None
        return True


class ReviewLinks(logging.Filter):
    """Hides the token of every email review link a log line names, as `/approvals/email/<token>`. The
    token is a credential (whoever holds it may decide that approval once, as its approver) and it is in
    the path, which uvicorn's access line and a warning about a request both quote."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _hidden(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_hidden(arg) for arg in record.args)
        return True


def _hidden(value: object) -> object:
    return hidden(value) if isinstance(value, str) else value


def _logging() -> dict[str, Any]:
    """uvicorn's own logging, with `Utf8Refused` on the logger its protocols write to, and `ReviewLinks`
    on every handler. Every other logger (signoff's, the libraries') gets a handler at the root that writes
    what Python's last resort wrote, the message on stderr from warnings up, so their lines pass the filter
    too. psycopg's pool says only its errors: it warns at every failed try to connect, twice a second while
    the database is down, where the ledger's outage says it once (`ledger.outage`)."""
    made = copy.deepcopy(LOGGING_CONFIG)
    made["filters"] = {"utf8": {"()": Utf8Refused}, "links": {"()": ReviewLinks}}
    made["loggers"]["uvicorn.error"]["filters"] = ["utf8"]
    made["formatters"]["plain"] = {"format": "%(message)s"}
    made["handlers"]["root"] = {
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
        "formatter": "plain",
        "level": "WARNING",
    }
    made["root"] = {"handlers": ["root"]}
    made["loggers"]["psycopg.pool"] = {"level": "ERROR"}
    for handler in made["handlers"].values():
        handler["filters"] = ["links"]
    return made


def config(
    app: Any, host: str, port: int, *, head_timeout: float = HEAD_TIMEOUT, **more: Any
) -> uvicorn.Config:
    made = uvicorn.Config(
        app, host=host, port=port, log_level="warning", log_config=_logging(), lifespan="on", http=Bounded,
        ws=Told, timeout_keep_alive=KEEP_ALIVE, ws_max_size=CHAT_BODY + 1024, ws_per_message_deflate=False,
        **more,
    )  # fmt: skip
    made.head_timeout = head_timeout  # type: ignore[attr-defined]  # read by Bounded, in each worker too
    return made


def listen(host: str, port: int) -> socket.socket:
    """The listening socket; a taken port is one clear `OSError`, never uvicorn's exit."""
    try:
        sock = socket.create_server((host, port), reuse_port=False, backlog=2048)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(f"could not listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


async def serve(
    app: Starlette,
    host: str,
    port: int,
    on_ready: Callable[[str], None],
    *,
    head_timeout: float = HEAD_TIMEOUT,
) -> None:
    """Run until the process is told to stop (Ctrl-C, SIGTERM); `on_ready` gets the base URL."""
    sock = listen(host, port)
    server = uvicorn.Server(config(app, host, port, head_timeout=head_timeout))
    running = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not running.done():  # noqa: ASYNC110 - uvicorn has a flag, not an event
        await asyncio.sleep(0.02)
    if server.started:
        settle()
        on_ready(f"http://{host}:{sock.getsockname()[1]}")
    await running
    if not server.started:
        raise OSError(f"could not serve on {host}:{port}")


def settle() -> None:
    """Put what the server made before its first request (modules, the agent, the app: about 130,000 objects)
    out of the garbage collector's reach. They live as long as the process, and each full collection walked
    every one of them: under load (the flows bench at concurrency 4) those took about 1 ms per flow, with
    pauses of up to 70 ms, which set the tail latency. `gc.freeze` is CPython's means for exactly this;
    objects made later are collected as before."""
    gc.collect()
    gc.freeze()


def serve_workers(
    factory: str,
    host: str,
    port: int,
    workers: int,
    on_ready: Callable[[str], None],
    *,
    head_timeout: float = HEAD_TIMEOUT,
) -> None:
    """Run `workers` processes, each building its app with the factory `module:function`, on one listening
    socket, until the process is told to stop. uvicorn's own supervisor restarts a worker that dies.
    `on_ready` gets the base URL once the socket listens; connections wait in its backlog meanwhile."""
    made = config(factory, host, port, head_timeout=head_timeout, factory=True, workers=workers)
    sock = listen(host, port)  # uvicorn listens only in the workers; until they are up, connections queue
    on_ready(f"http://{host}:{sock.getsockname()[1]}")
    Multiprocess(made, sockets=[sock]).run()
