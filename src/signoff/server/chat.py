"""`POST /api/chat` and `GET /api/chat/{id}/stream`: the AI SDK `DefaultChatTransport` contract over SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from signoff.core.errors import SignoffError
from signoff.gate import Wait
from signoff.integrations.pydantic_ai.chat import AgentChat, Reply
from signoff.integrations.trust import Untrusted
from signoff.protocol import (
    DONE,
    HEADERS,
    BadRequest,
    ClientVersion,
    client_version,
    encode,
    frame,
    parse_chat_request,
)
from signoff.server.http import error
from signoff.server.streams import Stream, Streams

MAX_BODY = 1024 * 1024


class ChatAPI:
    def __init__(self, chat: AgentChat, streams: Streams, *, wait: Wait, keepalive: float) -> None:
        self.chat = chat
        self.streams = streams
        self.wait = wait
        self.keepalive = keepalive

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/chat", self.post, methods=["POST"]),
            Route("/api/chat/{id}/stream", self.resume, methods=["GET"]),
        ]

    async def post(self, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY:
            return error(413, f"the request body is over {MAX_BODY} bytes")
        try:
            parsed = parse_chat_request(body)
        except BadRequest as exc:
            return error(400, exc.message, exc.field)
        stream = self.streams.open(parsed.chat_id)
        if stream is None:
            return error(409, f"a reply is still running in chat {parsed.chat_id}; follow it at its /stream")
        try:
            reply = await self.chat.prepare(parsed, parsed.wait or self.wait)
        except Untrusted as exc:
            self.streams.release(parsed.chat_id, stream)
            return error(exc.status, str(exc), exc.field)
        except SignoffError as exc:  # the chat's state could not be used as stored: say so, don't 500
            self.streams.release(parsed.chat_id, stream)
            return error(409, f"chat {parsed.chat_id} cannot continue: {exc}")
        except BaseException:
            self.streams.release(parsed.chat_id, stream)
            raise
        self.streams.run(
            parsed.chat_id, stream, _frames(reply, client_version(request.headers, parsed.client_hint))
        )
        return self._sse(stream)

    async def resume(self, request: Request) -> Response:
        stream = self.streams.get(request.path_params["id"])
        if stream is None:
            return Response(status_code=204)
        return self._sse(stream)

    def _sse(self, stream: Stream) -> Response:
        return EventSourceResponse(
            stream.follow(),
            headers={k: v for k, v in HEADERS.items() if k != "content-type"},
            ping=self.keepalive,
            ping_message_factory=lambda: ServerSentEvent(comment="keep-alive"),
        )


async def _frames(reply: Reply, version: ClientVersion) -> AsyncIterator[bytes]:
    async for chunk in reply.chunks():
        yield frame(encode(chunk, version))
    yield DONE
