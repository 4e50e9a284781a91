"""The chat routes: the AI SDK `DefaultChatTransport` contract over SSE, and what a chat page needs beside it.

- `POST /api/chat` starts a reply; `GET /api/chat/{id}/stream` follows a running one, or replays one that
  ended moments ago (204 when none), whichever worker runs it. A blocking reply cut while it waited on a
  person (its worker stopped or died) is continued there instead: see `replies`.
- `GET /api/chat/{id}` is the chat as the server holds it, for a page that (re)loads: with `running`
  true, the messages are the chat as that reply began, and the page follows the reply at `/stream`.
  `continues` says the running reply continues the last assistant message rather than starting one:
  its replay starts with results for calls made in an earlier request. `cut` says no reply runs, but the
  last was cut while it waited on a person: following `/stream` continues it. It is not `running`, which
  an old client (or one that resends the chat) reads as "wait for the reply to end".
- `GET /api/chat/{id}/events` follows the chat's approvals live, whoever decides them, and says when the
  server starts a reply on its own (`event: reply`), so an open page can follow it at `/stream`.
  It carries the chat's task changes too (`event: task`).
- `POST /api/chat/{id}/approvals/{approval_id}` lets the chat's owner decide without a chat request
  (blocking mode, or a remembered answer). It carries the same authority as an approval response in a
  chat request: the owner's, over this chat's approvals only, where their rule lets the owner decide.

Every route here answers only the chat's owner (see `owners`); a request the chat takes becomes a reply
that `replies` begins and runs. These routes are the HTTP and the SSE around them: framing, and merging a
chat's feeds for its page.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, Literal

import msgspec
from sse_starlette import ServerSentEvent
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from signoff.core.errors import LedgerUnavailable, NotFound, SignoffError
from signoff.core.principal import Principal
from signoff.core.views import approval_json, may_see
from signoff.gate import Wait
from signoff.integrations.chat.reply import Chat
from signoff.integrations.chat.state import owner_of
from signoff.integrations.chat.trust import NotAllowed, Unknown, decide_in_chat
from signoff.protocol import (
    DONE,
    HEADERS,
    KEEPALIVE,
    ClientVersion,
    client_version,
    encode,
    frame,
    parse_chat_request,
)
from signoff.server.approvals import approval_event, event_response, refused
from signoff.server.auth import principal_of
from signoff.server.feed import ApprovalFeed, TaskFeed
from signoff.server.http import DECISION_BODY, NOTHING_RUNNING, json_response, read_body
from signoff.server.owners import Owners
from signoff.server.refusals import Kind
from signoff.server.replies import Replies
from signoff.server.streams import Followed
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
        replies: Replies,
        owners: Owners,
        feed: ApprovalFeed,
        task_feed: TaskFeed,
        *,
        keepalive: float,
        hint: str | None = None,
    ) -> None:
        """`hint` is what the page's message box suggests writing: the served agent's examples."""
        self.replies = replies
        self.owners = owners
        self.chat = replies.chat
        self.feed = feed
        self.task_feed = task_feed
        self.keepalive = keepalive
        self._watchers: dict[str, set[asyncio.Queue[ServerSentEvent | None]]] = {}
        """The queues of the pages following each chat's events."""
        self.hint = hint
        self.tools = _tools(replies.chat)
        """What a page needs to know of the agent's tools: which the browser runs, and how to word a call."""
        replies.swept.append(self._reply_started)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/chat", self.post, methods=["POST"]),
            Route(SEED_ROUTE, partial(self.post, wait="deferred"), methods=["POST"]),
            Route("/api/chat/{id}", self.get, methods=["GET"]),
            Route("/api/chat/{id}/stream", self.resume, methods=["GET"]),
            Route("/api/chat/{id}/events", self.events, methods=["GET"]),
            Route("/api/chat/{id}/approvals/{approval_id}", self.decide, methods=["POST"]),
        ]

    async def post(self, request: Request, *, wait: Wait | None = None) -> Response:
        """A chat request over SSE; a `wait` the body names wins over the route's, then the server's."""
        principal = self.owners.principal(request)
        body = await request.body()  # the edge read it, within CHAT_BODY
        parsed = parse_chat_request(body)
        version = client_version(request.headers, parsed.client_hint)
        stream = await self.replies.begin(parsed, parsed.wait or wait or self.replies.wait, principal)
        return self._sse(stream, version)

    async def get(self, request: Request) -> Response:
        chat_id, principal = request.path_params["id"], self.owners.principal(request)
        await self.owners.owned(chat_id, principal, request)
        stream = await self.replies.streams.find(chat_id)
        view = await self.chat.view(chat_id, begun=stream is not None)
        messages, continues = view.messages, False
        if stream is not None:  # the stream replays the running reply, so show the chat as it began
            meta = stream.meta
            if meta.regenerates and messages and messages[-1]["role"] == "assistant":
                messages = messages[:-1]
            if meta.prompt is not None:
                messages = [*messages, meta.prompt]
            continues = meta.prompt is None and not meta.regenerates
        snapshot = {
            "id": chat_id,
            "wait": self.replies.wait,
            "running": stream is not None,
            "continues": continues,
            "cut": stream is None and await self.replies.cut(chat_id),
            "messages": messages,
            "approvals": [approval_json(a, principal) for a in view.approvals],
            "tools": self.tools,
        }
        return json_response(snapshot if self.hint is None else {**snapshot, "hint": self.hint})

    async def resume(self, request: Request) -> Response:
        chat_id, principal = request.path_params["id"], self.owners.principal(request)
        await self.owners.owned(chat_id, principal, request)
        stream = await self.replies.follow(chat_id, principal)
        if stream is None:
            return Response(status_code=NOTHING_RUNNING)
        return self._sse(stream, client_version(request.headers))

    async def events(self, request: Request) -> Response:
        chat_id, principal = request.path_params["id"], self.owners.principal(request)
        owned = await self.owners.owned(chat_id, principal, request)
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
                try:
                    stored = await ledger.chats.load(chat_id)
                except LedgerUnavailable:  # can't tell: the feed ends, and the page opens it again
                    return False
                owner = owner_of(stored)
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
        principal, ledger = self.owners.principal(request), self.chat.gate.ledger
        try:
            body = await read_body(request, ChatDecision, limit=DECISION_BODY, what="decision")
            await self.owners.owned(chat_id, principal, request)
            if principal_of(request) is None:
                await self._asked_in(request, chat_id, approval_id)
            approval = await decide_in_chat(
                ledger, chat_id, approval_id, principal, body.approved, body.reason, body.remember
            )
        except SignoffError as exc:
            return await refused(exc, ledger, principal, approval_id)
        return json_response(approval_json(approval, principal))

    async def _asked_in(self, conn: HTTPConnection, chat_id: str, approval_id: str) -> None:
        """Raise `Untrusted` for an approval that is unknown or another chat's, checked here for a caller
        without a credential so that its refusal is counted by kind, not audited under the approval id it
        made up (`decide_in_chat` audits each)."""
        try:
            found = (await self.chat.gate.ledger.approvals.get(approval_id)).chat_id
        except NotFound:
            found = None
        if found == chat_id:
            return
        kind: Kind = "unknown-approval" if found is None else "another-chat"
        refusal, why = (
            (Unknown, "no such approval") if found is None else (NotAllowed, "it belongs to another chat")
        )
        await self.owners.refuse(conn, kind, approval_id, why)
        raise refusal(f"approval {approval_id}", f"approval {approval_id} refused: {why}")

    def _reply_started(self, chat_id: str) -> None:
        """The server started a reply in the chat on its own: its open pages follow it."""
        for queue in self._watchers.get(chat_id, ()):
            queue.put_nowait(ServerSentEvent("{}", event="reply"))

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
