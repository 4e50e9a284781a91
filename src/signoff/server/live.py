"""`WS /api/live`: the chat over one WebSocket, seed 000's BIDI transport.

The chunks are the ones the SSE routes send, as JSON text frames, and the text frame `[DONE]` ends each
turn. A client that asks for the `sse` subprotocol gets each frame as an SSE event instead (`data: <json>`
and a blank line, `data: [DONE]` at the end of a turn), as seed 000's transport reads them. Waits are
blocking: a turn stays open while a tool waits for a person or for the browser, so a turn has one
`[DONE]` however many questions it asked, in one step or one after another.

A standard AI SDK client only sends once its stream has ended, so the turn pauses when it waits on the
client: a `finish-step` (see `Translator.pause`), where the client ends its stream. Its answer is an
ordinary `message` frame, and the rest of the turn streams into the stream it opened.

A socket only follows a reply. The reply runs in the server like an SSE one (see `Streams`), so a socket
that drops stops nothing and the approval stays pending. A socket that resumes the chat is shown the
reply again from its start, question included, and can answer it. When the server stops, the turn a
socket follows ends with an `error` chunk naming what it still waits on and `[DONE]`, and the socket
closes with 1012 and why: the client resumes on a new socket, on any worker (see `Replies.follow`).

Frames a client sends (JSON text):
- `{type: "message", id, messages, trigger, messageId?}`: the body `POST /api/chat` takes. With no reply
  running in the chat, it starts a turn. While one runs, only its approval responses and browser tool
  results count (the rest is the client's copy of the chat): an approved browser call's output that came
  with its approval is its result, and so is a result that came before the call was handed over.
- `{type: "resume", id}`: follow the chat's running reply from its start; only `[DONE]` when none runs.
- `{type: "interrupt"}`: stop the turn this socket follows; it ends with `abort`.
- `{type: "ping"}`: answered with `{type: "pong"}`.

The socket speaks for the principal its handshake authenticated (a cookie, a bearer token, the host's
login; without one, the anonymous principal where the server takes credential-less chats, else the
handshake is refused). Every frame is checked against that principal: it may only start, follow or answer
a chat it owns; another's chat is as unknown as a missing one. The edge already refused a handshake from a
page on another site.

A refused frame is answered with an `error` chunk, and so is one the ledger could not take (it is away, or
can't write): the client sends it again later. When that frame is a `message` the socket sent while it
followed no reply (one that would have started a turn), a `[DONE]` follows, so the client's stream for it
ends; any other refusal leaves the client's streams, and a running turn, alone.

An open socket costs the server memory whether or not it is used (5,000 idle ones took 300 MB), so a
process holds at most `max_sockets` per principal and four times that per source address (`Sockets`): one
beyond is accepted and closed at once with 1013 (try again later) and the reason, and the refusals are
counted in the audit. The address's cap is the larger because a principal's sockets all come from its
browsers, while one address may be many people's (a NAT, an office); behind a reverse proxy on another
machine every socket has the proxy's address, and the cap is on them all together. A socket with no frame
from its client for `idle` seconds, and no turn of its own running, is closed (1000): a page pings every
20 s, so only a client that went away without closing is.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketClose, WebSocketDisconnect

from signoff.core.errors import LedgerUnavailable
from signoff.core.principal import Principal
from signoff.integrations.chat.trust import OutOfTurn, Untrusted
from signoff.protocol import (
    BadRequest,
    ChatRequest,
    Error,
    client_version,
    encode,
    frame,
    parse_chat_id,
    parse_chat_request,
    parse_json,
)
from signoff.server.auth import client_of, principal_of
from signoff.server.edge import POLICY_VIOLATION
from signoff.server.http import CHAT_BODY, BadInput, Forbidden, Refusal, TooLarge
from signoff.server.owners import Owners
from signoff.server.refusals import Refusals
from signoff.server.replies import Replies
from signoff.server.sockets import Sockets
from signoff.server.streams import Followed

DONE = "[DONE]"
SEED_ROUTE = "/live"
"""Seed 000's own route: its transport appends `/live` to the backend URL it is given, opens the socket
with no subprotocol, and reads only SSE frames, so this route frames every chunk as SSE unasked."""
SSE = "sse"
"""The WebSocket subprotocol a client names to get every frame as an SSE event, `data: <json>\n\n` and
`data: [DONE]\n\n`, as seed 000's transport reads them; without it, frames are bare JSON and `[DONE]`."""
TRY_AGAIN_LATER = 1013
"""The close code of a socket over a cap."""
RESTARTING = 1012
"""The close code of a socket whose server stops."""


class LiveAPI:
    def __init__(
        self, replies: Replies, owners: Owners, refusals: Refusals, *, max_sockets: int, idle: float
    ) -> None:
        self.replies = replies
        self.owners = owners
        self.refusals = refusals
        self.sockets = Sockets(max_sockets)
        self.idle = idle
        self.open: set[_Socket] = set()
        self._stopping: set[asyncio.Task[None]] = set()

    def stop(self) -> None:
        """The server stops: every open socket ends its turn and closes (see the module)."""
        for live in self.open:
            self._stopping.add(stopping := asyncio.get_running_loop().create_task(live.stop()))
            stopping.add_done_callback(self._stopping.discard)

    def routes(self) -> list[BaseRoute]:
        return [WebSocketRoute("/api/live", self.connect), WebSocketRoute(SEED_ROUTE, self.connect)]

    async def connect(self, socket: WebSocket) -> None:
        try:
            principal = self.owners.principal(socket)
        except Forbidden:
            await WebSocketClose(POLICY_VIOLATION, "a credential is required")(
                socket.scope, socket.receive, socket.send
            )
            return
        asked = SSE in socket.scope.get("subprotocols", ())
        framed = asked or socket.url.path == SEED_ROUTE
        address = client_of(socket)
        over = self.sockets.admit(principal.id, address)
        await socket.accept(subprotocol=SSE if asked else None)
        if over is not None:  # accepted first: a browser reads the reason only from a close frame
            actor = principal.id if principal_of(socket) is not None else address
            self.refusals.note("refuse", "live", actor, "too-many-sockets", over, socket.url.path)
            await socket.close(TRY_AGAIN_LATER, over)
            return
        live = _Socket(self, socket, principal, framed=framed, idle=self.idle)
        self.open.add(live)
        try:
            await live.serve()
        finally:
            self.open.discard(live)
            self.sockets.release(principal.id, address)


class _Socket:
    """One client's socket: its frames in, the frames of the reply it follows out."""

    def __init__(
        self, api: LiveAPI, socket: WebSocket, principal: Principal, *, framed: bool, idle: float
    ) -> None:
        self.replies = api.replies
        self.owners = api.owners
        self.socket = socket
        self.principal = principal
        self.framed = framed
        """Frames go out as SSE events (the `sse` subprotocol)."""
        self.chat_id: str | None = None
        """The chat whose reply this socket follows, or last followed."""
        self.following: asyncio.Task[None] | None = None
        self.version = client_version(socket.headers)
        """The client version the handshake (or the last message's hint) named: the chunks this socket
        sends are cut to it, whoever started the reply it follows."""
        self._sending = asyncio.Lock()
        self.idle = idle
        self._quiet = asyncio.get_running_loop().time()
        """Since when the socket has had no frame from its client and followed no turn."""

    async def serve(self) -> None:
        try:
            while (message := await self._receive()) is not None:
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:
                    await self._error("send JSON text frames, not binary ones", ends_turn=False)
                    continue
                await self._frame(text)
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # unless the client left meanwhile
                await self.socket.close(1000, f"idle for {self.idle:g} s")
        finally:
            if self.following is not None:  # the reply goes on without this socket
                self.following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self.following

    async def stop(self) -> None:
        """End the turn this socket follows (its reply was cut: the `error` chunk and `[DONE]` come), then
        close with why."""
        if self.following is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self.following)
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # unless the client left meanwhile
            await self.socket.close(RESTARTING, "the server is stopping: connect again to resume the chat")

    async def _receive(self) -> Message | None:
        """The client's next message; None once the socket has been quiet for `idle` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            left = self._quiet + self.idle - loop.time()
            if left <= 0 and not self._busy():
                return None
            try:
                async with asyncio.timeout(left if left > 0 else self.idle):  # a turn runs: look again
                    message = await self.socket.receive()
            except TimeoutError:
                continue
            self._quiet = loop.time()
            return message

    def _busy(self) -> bool:
        return self.following is not None and not self.following.done()

    async def _frame(self, text: str) -> None:
        starts = False
        """Whether the frame would have started a turn: its refusal then ends with `[DONE]`, so the
        client's stream for it ends; any other refusal leaves the client's streams alone."""
        try:
            if len(text) > CHAT_BODY:
                raise TooLarge(f"the frame is over {CHAT_BODY} bytes")
            document = _document(text)
            match document.get("type"):
                case "ping":
                    await self._pong(document.get("timestamp"))
                case "interrupt":
                    self._interrupt()
                case "resume":
                    await self._resume(parse_chat_id(document))
                case "message":
                    starts = not self._busy()
                    await self._message(parse_chat_request(text.encode()))
                case kind:
                    raise BadInput(f"type: must be message, resume, interrupt or ping, not {kind!r}", "type")
        except BadRequest as exc:
            await self._error(f"{exc.field}: {exc.message}", ends_turn=starts)
        except (Untrusted, Refusal, LedgerUnavailable) as exc:
            await self._error(str(exc), ends_turn=starts)

    async def _message(self, request: ChatRequest) -> None:
        if self._busy() and request.chat_id != self.chat_id:
            raise OutOfTurn("id", f"this socket follows a reply in chat {self.chat_id}; interrupt it first")
        if self._busy() or await self.replies.streams.find(request.chat_id) is not None:
            await self._answer(request)
            return
        self.version = client_version(self.socket.headers, request.client_hint)
        stream = await self.replies.begin(request, "blocking", self.principal, browser=True)
        self._follow(request.chat_id, stream)

    async def _answer(self, request: ChatRequest) -> None:
        """Approval responses and browser results for the chat's running reply, which takes them (see
        `DrivenReply.answer`); the reply itself, here or on another worker, goes on when the ledger hears
        the decision."""
        if request.user_message is not None or request.trigger == "regenerate-message":
            running = f"a reply is still running in chat {request.chat_id}: answer it, or interrupt it first"
            raise OutOfTurn("messages", running)
        await self.owners.owned(request.chat_id, self.principal, self.socket)
        reply = self.replies.running.get(request.chat_id)
        await (reply or self.replies.chat).answer(request, self.principal)

    async def _resume(self, chat_id: str) -> None:
        if self._busy():
            raise OutOfTurn("id", f"this socket already follows a reply in chat {self.chat_id}")
        await self.owners.owned(chat_id, self.principal, self.socket)
        running = await self.replies.follow(chat_id, self.principal, browser=True)
        if running is None:
            await self._send(DONE)
            return
        self._follow(chat_id, running)

    def _interrupt(self) -> None:
        reply = self.replies.running.get(self.chat_id or "") if self._busy() else None
        if reply is None:
            raise OutOfTurn("type", "no reply of this socket is running here to interrupt")
        reply.interrupt()

    def _follow(self, chat_id: str, running: Followed) -> None:
        async def forward() -> None:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # the client went away
                async for chunks in running.follow():
                    for chunk in chunks or ():  # never None without `idle`: a socket has its own pings
                        await self._send(encode(chunk, self.version).decode())
                self.following = None  # over for this socket: a frame read meanwhile may start the next
                self._quiet = asyncio.get_running_loop().time()
                await self._send(DONE)

        self.chat_id = chat_id
        self.following = asyncio.get_running_loop().create_task(forward(), name=f"signoff-live-{chat_id}")

    async def _pong(self, timestamp: Any) -> None:
        """The pong is no chunk of a stream, so it goes out as bare JSON however the socket frames chunks:
        a reader of SSE frames passes every `data:` line to its AI SDK stream, which refuses an unknown
        chunk type, and takes the pong from a bare frame (seed 000's transport does). It echoes the ping's
        `timestamp`, a number (milliseconds, as JavaScript's clock gives them), which the client times the
        round trip by."""
        pong: dict[str, Any] = {"type": "pong"}
        if type(timestamp) in (int, float) and abs(timestamp) < 2**53:  # no bool, NaN or infinity
            pong["timestamp"] = timestamp
        async with self._sending:
            await self.socket.send_text(msgspec.json.encode(pong).decode())

    async def _error(self, message: str, *, ends_turn: bool) -> None:
        await self._send(encode(Error(error_text=message)).decode())
        if ends_turn:
            await self._send(DONE)

    async def _send(self, text: str) -> None:
        async with self._sending:  # the follower and the frame handler both send
            await self.socket.send_text(frame(text.encode()).decode() if self.framed else text)


def _document(text: str) -> dict[str, Any]:
    try:
        document = parse_json(text)
    except BadRequest as exc:
        raise BadInput(f"the frame {exc.message}") from None
    if not isinstance(document, dict):
        raise BadInput("the frame must be a JSON object with a type")
    return document
