"""The chat routes: the AI SDK `DefaultChatTransport` contract over SSE, and what a chat page needs beside it.

- `POST /api/chat` starts a reply; `GET /api/chat/{id}/stream` follows a running one, or replays one that
  ended moments ago (204 when none), whichever worker runs it.
- `GET /api/chat/{id}` is the chat as the server holds it, for a page that (re)loads: with `running`
  true, the messages are the chat as that reply began, and the page follows the reply at `/stream`.
  `continues` says the running reply continues the last assistant message rather than starting one:
  its replay starts with results for calls made in an earlier request.
- `GET /api/chat/{id}/events` follows the chat's approvals live, whoever decides them, and says when the
  server starts a reply on its own (`event: reply`), so an open page can follow it at `/stream`.
  It carries the chat's task changes too (`event: task`).
- `POST /api/chat/{id}/approvals/{approval_id}` lets the chat's owner decide without a chat request
  (blocking mode, or a remembered answer). It carries the same authority as an approval response in a
  chat request: the owner's, over this chat's approvals only, where their rule lets the owner decide.

A chat belongs to the principal that started it (see `auth`), and every route here answers only that
principal: to anyone else another's chat is as unknown as a missing one (404, audited). Without a
credential, the caller is the anonymous principal where the server takes credential-less chats.

The server also ends browser calls that got no result in time: `sweep` starts, on the server's own
initiative, the reply that tells the model so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any, Literal

import msgspec
from sse_starlette import ServerSentEvent
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from signoff.core.errors import NotFound, SignoffError
from signoff.core.principal import Principal
from signoff.gate import Wait
from signoff.integrations.chat import Chat, Reply
from signoff.integrations.state import check_owner, owner_of
from signoff.integrations.trust import NotAllowed, OutOfTurn, Unknown, Untrusted, decide_in_chat
from signoff.integrations.turn import Browser
from signoff.protocol import (
    DONE,
    HEADERS,
    KEEPALIVE,
    BadRequest,
    ChatRequest,
    Chunk,
    ClientVersion,
    client_version,
    encode,
    frame,
    parse_chat_request,
)
from signoff.server.approvals import approval_event, approval_json, event_response, may_see, refused
from signoff.server.auth import chatter, client_of, principal_of
from signoff.server.feed import ApprovalFeed, TaskFeed
from signoff.server.http import DECISION_BODY, BadBody, error, json_response, read_body
from signoff.server.refusals import Kind, Refusals
from signoff.server.streams import Followed, Stream, Streams
from signoff.server.tasks import task_event

SEED_ROUTE = "/stream"
"""Seed 000's own SSE route: its page appends `/stream` to the backend URL it is given and runs the native
AI SDK flow, where the run ends at a question and the next request brings the answer (deferred)."""
log = logging.getLogger("signoff.server")


def _tools(chat: Chat) -> list[dict[str, Any]]:
    """`[{name, browser, acknowledged?, description?, title?}]`: the browser tools the agent declares (an
    acknowledged one the browser acts on as it sees its call), and every tool the policy words (`title`, a
    template like `Play {track}` filled from the call's arguments)."""
    titles = chat.gate.policy.titles()
    browser = {tool.name: tool for tool in chat.browser_tools}
    described = []
    for name in dict.fromkeys([*browser, *titles]):
        tool: dict[str, Any] = {"name": name, "browser": name in browser}
        if name in browser and browser[name].acknowledged:
            tool["acknowledged"] = True
        if name in browser and browser[name].description:
            tool["description"] = browser[name].description
        if name in titles:
            tool["title"] = titles[name]
        described.append(tool)
    return described


class ChatDecision(msgspec.Struct, forbid_unknown_fields=True):
    """A chat's user may remember an approval for this chat, never for every chat."""

    approved: bool
    reason: str = ""
    remember: Literal["once", "session"] = "once"


class ChatAPI:
    def __init__(
        self,
        chat: Chat,
        streams: Streams,
        feed: ApprovalFeed,
        task_feed: TaskFeed,
        *,
        wait: Wait,
        keepalive: float,
        refusals: Refusals,
        anonymous: bool = False,
    ) -> None:
        self.chat = chat
        self.refusals = refusals
        self.anonymous = anonymous
        """Whether chats are taken without a credential, from the anonymous principal."""
        self.streams = streams
        self.feed = feed
        self.task_feed = task_feed
        self.wait = wait
        self.keepalive = keepalive
        self._due: dict[str, float] = {}
        """Chats waiting on the browser, and when its results are overdue."""
        self._watchers: dict[str, set[asyncio.Queue[ServerSentEvent | None]]] = {}
        """The queues of the pages following each chat's events."""
        self.running: dict[str, Reply] = {}
        """The replies running in this process, by chat."""
        self.tools = _tools(chat)
        """What a page needs to know of the agent's tools: which the browser runs, and how to word a call."""

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/chat", self.post, methods=["POST"]),
            Route(SEED_ROUTE, partial(self.post, wait="deferred"), methods=["POST"]),
            Route("/api/chat/{id}", self.get, methods=["GET"]),
            Route("/api/chat/{id}/stream", self.resume, methods=["GET"]),
            Route("/api/chat/{id}/events", self.events, methods=["GET"]),
            Route("/api/chat/{id}/approvals/{approval_id}", self.decide, methods=["POST"]),
        ]

    def principal(self, conn: HTTPConnection) -> Principal:
        """Who talks in a chat through this request; `Forbidden` (401) where a credential is needed."""
        return chatter(conn, self.anonymous)

    async def owned(self, chat_id: str, principal: Principal, conn: HTTPConnection) -> bool:
        """Whether the chat is `principal`'s (False: nobody's yet); raises `Unknown` (audited as
        `refuse` does) if it is another's."""
        stored = await self.chat.gate.ledger.load_chat(chat_id)
        if principal_of(conn) is None and owner_of(stored) not in (None, principal.id):
            await self.refuse(conn, "another-owner", chat_id, "the chat belongs to another principal")
            raise Unknown("id", f"no chat {chat_id}")
        await check_owner(self.chat.gate.ledger, chat_id, stored, principal)
        return stored is not None

    async def refuse(self, conn: HTTPConnection, kind: Kind, subject: str, why: str, **detail: str) -> None:
        """Audit a refusal in a chat: one entry for a principal, whom someone answers for; counted by source
        and kind for a caller without a credential, who costs nothing to be and names `subject` itself."""
        principal = principal_of(conn)
        if principal is None:
            self.refusals.note("refuse", "chat", client_of(conn), kind, why, conn.url.path)
        else:
            await self.chat.gate.ledger.record("refuse", subject, principal.id, why=why, **detail)

    async def post(self, request: Request, *, wait: Wait | None = None) -> Response:
        """A chat request over SSE; a `wait` the body names wins over the route's, then the server's."""
        principal = self.principal(request)
        body = await request.body()  # the edge read it, within CHAT_BODY
        try:
            parsed = parse_chat_request(body)
            version = client_version(request.headers, parsed.client_hint)
            stream = await self.begin(parsed, parsed.wait or wait or self.wait, principal)
        except BadRequest as exc:
            return error(400, exc.message, exc.field)
        return self._sse(stream, version)

    async def begin(
        self,
        request: ChatRequest,
        wait: Wait,
        principal: Principal,
        *,
        browser: bool = False,
    ) -> Stream:
        """Claim the chat, check the request against it (as `principal`, who must own the chat or start
        it) and start the reply; raises `Untrusted`.

        With `browser`, the browser stays connected while the reply runs (the live socket), so browser
        tools are answered within the reply instead of ending it."""
        stream = self.streams.open(request.chat_id)
        if stream is None:
            raise OutOfTurn(
                "id", f"a reply is still running in chat {request.chat_id}; follow it at its /stream"
            )
        try:
            reply = await self.chat.prepare(request, wait, principal)
        except SignoffError as exc:
            self.streams.release(request.chat_id, stream)
            if isinstance(exc, Untrusted):
                raise
            # the chat's state could not be used as stored: say so, don't 500
            raise OutOfTurn("id", f"chat {request.chat_id} cannot continue: {exc}") from exc
        except BaseException:
            self.streams.release(request.chat_id, stream)
            raise
        if browser:
            reply.browser = Browser(timeout=self.chat.browser_timeout)
        if (user := request.user_message) is not None:
            stream.meta.prompt = {"id": user.id, "role": "user", "parts": list(user.parts)}
        stream.meta.regenerates = request.trigger == "regenerate-message"
        self._start(reply, stream)
        return stream

    async def get(self, request: Request) -> Response:
        chat_id, principal = request.path_params["id"], self.principal(request)
        await self.owned(chat_id, principal, request)
        stream = await self.streams.find(chat_id)
        view = await self.chat.view(chat_id, begun=stream is not None)
        messages, continues = view.messages, False
        if stream is not None:  # the stream replays the running reply, so show the chat as it began
            meta = stream.meta
            if meta.regenerates and messages and messages[-1]["role"] == "assistant":
                messages = messages[:-1]
            if meta.prompt is not None:
                messages = [*messages, meta.prompt]
            continues = meta.prompt is None and not meta.regenerates
        return json_response(
            {
                "id": chat_id,
                "wait": self.wait,
                "running": stream is not None,
                "continues": continues,
                "messages": messages,
                "approvals": [approval_json(a, principal) for a in view.approvals],
                "tools": self.tools,
            }
        )

    async def resume(self, request: Request) -> Response:
        chat_id = request.path_params["id"]
        await self.owned(chat_id, self.principal(request), request)
        stream = await self.streams.find(chat_id, ended=True)
        if stream is None:
            return Response(status_code=204)
        return self._sse(stream, client_version(request.headers))

    async def events(self, request: Request) -> Response:
        chat_id, principal = request.path_params["id"], self.principal(request)
        owned = await self.owned(chat_id, principal, request)
        return event_response(self._events(chat_id, principal, owned), ping=self.keepalive)

    async def _events(
        self, chat_id: str, principal: Principal, owned: bool
    ) -> AsyncIterator[ServerSentEvent]:
        """The chat's approval and task feeds merged with the replies the server starts in it, for its
        owner. A chat nobody had started when this began is checked again once something happens in it:
        if someone else started it, the feed ends."""
        queue: asyncio.Queue[ServerSentEvent | None] = asyncio.Queue()
        ledger = self.chat.gate.ledger

        async def still_owned() -> bool:
            nonlocal owned
            if not owned:
                owner = owner_of(await ledger.load_chat(chat_id))
                if owner is not None and owner != principal.id:
                    return False
                owned = owner is not None
            return True

        async def relay(events: AsyncIterator[ServerSentEvent]) -> None:
            try:
                async for event in events:
                    queue.put_nowait(event)
            finally:  # a feed ended (shutdown, a failed ledger, this reader fell too far behind)
                queue.put_nowait(None)

        watchers = self._watchers.setdefault(chat_id, set())
        watchers.add(queue)
        loop = asyncio.get_running_loop()
        feeding = [
            loop.create_task(
                relay(
                    approval_event(a, principal)
                    async for a in self.feed.follow(chat_id)
                    if may_see(principal, a)
                )
            ),
            loop.create_task(relay(task_event(t) async for t in self.task_feed.follow(chat_id))),
        ]
        try:
            while (event := await queue.get()) is not None and await still_owned():
                yield event
        finally:
            watchers.discard(queue)
            if not watchers and self._watchers.get(chat_id) is watchers:
                del self._watchers[chat_id]
            for feed in feeding:
                feed.cancel()
            await asyncio.gather(*feeding, return_exceptions=True)

    async def decide(self, request: Request) -> Response:
        chat_id, approval_id = request.path_params["id"], request.path_params["approval_id"]
        principal, ledger = self.principal(request), self.chat.gate.ledger
        try:
            body = await read_body(request, ChatDecision, limit=DECISION_BODY, what="decision")
            await self.owned(chat_id, principal, request)
            if principal_of(request) is None:
                await self._asked_in(request, chat_id, approval_id)
            approval = await decide_in_chat(
                ledger, chat_id, approval_id, principal, body.approved, body.reason, body.remember
            )
        except (BadBody, Untrusted):  # the app answers them (see `server.app`)
            raise
        except SignoffError as exc:
            return await refused(exc, ledger, principal, approval_id)
        return json_response(approval_json(approval, principal))

    async def _asked_in(self, conn: HTTPConnection, chat_id: str, approval_id: str) -> None:
        """Raise `Untrusted` for an approval that is unknown or another chat's, checked here for a caller
        without a credential so that its refusal is counted by kind, not audited under the approval id it
        made up (`decide_in_chat` audits each)."""
        try:
            found = (await self.chat.gate.ledger.get(approval_id)).chat_id
        except NotFound:
            found = None
        if found == chat_id:
            return
        kind: Kind = "unknown-approval" if found is None else "another-chat"
        refusal, why = (
            (Unknown, "no such approval") if found is None else (NotAllowed, "it belongs to another chat")
        )
        await self.refuse(conn, kind, approval_id, why)
        raise refusal(f"approval {approval_id}", f"approval {approval_id} refused: {why}")

    async def sweep(self) -> None:
        """Start the reply for each chat whose browser calls are overdue and that runs no reply now."""
        now = self.chat.gate.ledger.clock()
        for chat_id, due in list(self._due.items()):
            if due > now or (stream := self.streams.open(chat_id)) is None:
                continue
            del self._due[chat_id]
            try:
                reply = await self.chat.prepare_overdue(chat_id, self.wait)
            except Exception:  # one chat's broken state must not stop the sweep for the others
                log.exception("chat %s could not be told that its browser calls are overdue", chat_id)
                reply = None
            if reply is None:
                self.streams.release(chat_id, stream)
                continue
            self._start(reply, stream)
            for queue in self._watchers.get(chat_id, ()):
                queue.put_nowait(ServerSentEvent("{}", event="reply"))

    def _start(self, reply: Reply, stream: Stream) -> None:
        self._due.pop(reply.chat_id, None)
        self.running[reply.chat_id] = reply
        self.streams.run(reply.chat_id, stream, partial(self._run, reply))

    async def _run(self, reply: Reply, push: Callable[[Chunk], None]) -> None:
        try:
            await reply.run(push)
        finally:
            if self.running.get(reply.chat_id) is reply:
                del self.running[reply.chat_id]
        if reply.browser_due is not None:
            self._due[reply.chat_id] = reply.browser_due

    def _sse(self, stream: Followed, version: ClientVersion) -> Response:
        """The reply as an SSE response. Starlette's own streaming response, not sse-starlette's: a reply
        is already framed, and sse-starlette's four tasks per response and cancel scope per event were a
        tenth of the server's CPU per flow in the profile. The keep-alive comes from the stream itself."""
        return StreamingResponse(_framed(stream, version, self.keepalive), headers=HEADERS)


async def _framed(stream: Followed, version: ClientVersion, keepalive: float) -> AsyncIterator[bytes]:
    """The reply as SSE events, cut to the reader's client version, each read's events in one write, with
    a comment every `keepalive` seconds without one (proxies drop a connection silent for long, and a
    reply can wait minutes on a person); `[DONE]` once it is over for this reader (ended, or no longer
    written by a worker that died)."""
    async for chunks in stream.follow(keepalive):
        yield KEEPALIVE if chunks is None else b"".join([frame(encode(chunk, version)) for chunk in chunks])
    yield DONE
