"""The replies running in this process: what the chat routes and the live socket hand a checked request to.

`Replies` begins a reply (the chat claimed, the request checked against it, its stream opened in the
ledger's reply log), runs it, and keeps it by chat while it runs, so a live socket can answer the reply it
follows. It also ends browser calls that got no result in time: `sweep` starts, on the server's own
initiative, the reply that tells the model so, and tells whoever listens (a page following the chat's
events) that it did.

A blocking reply whose worker stopped or died while it waited on a person left its chat parked (see
`ChatState.parked`), its approvals pending. Whoever follows the chat again (`follow`: `GET
/api/chat/{id}/stream`, the live socket's `resume`), on any worker, gets that reply's continuation, started
there: it waits on the same approvals, or goes on at once with the decisions made meanwhile, and the gate's
single-use claim runs each approved call once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.core.principal import Principal
from signoff.gate import Wait
from signoff.integrations.chat.reply import Chat, Reply
from signoff.integrations.chat.state import state_of
from signoff.integrations.chat.trust import OutOfTurn, Untrusted
from signoff.protocol import ChatRequest, Chunk, Error
from signoff.server.streams import Followed, Meta, Stream, Streams

log = logging.getLogger("signoff.server")


class Replies:
    def __init__(self, chat: Chat, streams: Streams, *, wait: Wait) -> None:
        self.chat = chat
        self.streams = streams
        self.wait = wait
        """The server's wait mode, where neither the request nor its route names one."""
        self.running: dict[str, Reply] = {}
        """The replies running in this process, by chat."""
        self.swept: list[Callable[[str], None]] = []
        """Told of each chat a sweep started a reply in."""
        self._due: dict[str, float] = {}
        """Chats waiting on the browser, and when its results are overdue."""

    async def begin(
        self,
        request: ChatRequest,
        wait: Wait,
        principal: Principal,
        *,
        browser: bool = False,
    ) -> Stream:
        """Claim the chat, check the request against it (as `principal`, who must own the chat or start
        it) and start the reply; raises `Untrusted`, or `LedgerUnavailable` as itself (a 503 to retry, not a
        chat that cannot continue).

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
            if isinstance(exc, Untrusted | LedgerUnavailable):
                raise
            # the chat's state could not be used as stored: say so, don't 500
            raise OutOfTurn("id", f"chat {request.chat_id} cannot continue: {exc}") from exc
        except BaseException:
            self.streams.release(request.chat_id, stream)
            raise
        if browser:
            reply.live()
        if (user := request.user_message) is not None:
            stream.meta.prompt = {"id": user.id, "role": "user", "parts": list(user.parts)}
        stream.meta.regenerates = request.trigger == "regenerate-message"
        self._start(reply, stream)
        return stream

    async def follow(self, chat_id: str, principal: Principal, *, browser: bool = False) -> Followed | None:
        """The chat's reply for `principal`, its owner, to follow: the one running, here or on another
        worker (and, should that worker die before it ends, its continuation); the continuation of one that
        was cut (see the module); or one that ended moments ago. None when there is none."""
        running = await self.streams.find(chat_id)
        if isinstance(running, Stream):
            return running
        if running is not None:
            return Resumed(running, partial(self.continued, chat_id, principal, browser=browser))
        return await self.continued(chat_id, principal, browser=browser) or await self.streams.find(
            chat_id, ended=True
        )

    async def cut(self, chat_id: str) -> bool:
        """Whether the chat waits, parked, on a blocking reply that was cut and runs nowhere now."""
        stored = await self.chat.gate.ledger.chats.load(chat_id)
        if stored is None or state_of(stored, begun=True).parked is None:
            return False
        return await self.streams.cut_short(chat_id)

    async def continued(self, chat_id: str, principal: Principal, *, browser: bool = False) -> Stream | None:
        """Start the continuation of the chat's cut blocking reply here, or None when it has none."""
        if self.streams.stopping.is_set() or not await self.cut(chat_id):
            return None
        try:
            return await self.begin(ChatRequest(chat_id=chat_id, trigger="submit-message"), "blocking",
                                    principal, browser=browser)  # fmt: skip
        except OutOfTurn as exc:  # a reply began here meanwhile, or the chat can't go on as stored
            log.warning("the cut reply in chat %s was not continued: %s", chat_id, exc)
            return None

    def stop(self) -> None:
        """The process stops: the gate's waits it cuts keep their approvals, and each reply running here
        ends for its readers with an `error` chunk naming the calls it still waits on, to resume from."""
        self.chat.gate.stopping = True
        waiting = {chat_id: reply.asking(still=True) for chat_id, reply in self.running.items()}
        self.streams.stop(waiting)

    async def sweep(self) -> None:
        """Start the reply for each chat whose browser calls are overdue and that runs no reply now."""
        now = self.chat.gate.ledger.chats.clock()
        for chat_id, due in list(self._due.items()):
            if due > now or (stream := self.streams.open(chat_id)) is None:
                continue
            del self._due[chat_id]
            try:
                reply = await self.chat.prepare_overdue(chat_id, self.wait)
            except LedgerUnavailable:  # still overdue: the next sweep tells it, once the ledger answers
                self._due[chat_id] = due
                self.streams.release(chat_id, stream)
                raise
            except Exception:  # one chat's broken state must not stop the sweep for the others
                log.exception("chat %s could not be told that its browser calls are overdue", chat_id)
                reply = None
            if reply is None:
                self.streams.release(chat_id, stream)
                continue
            self._start(reply, stream)
            for told in self.swept:
                told(chat_id)

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
        if (due := reply.browser_due()) is not None:
            self._due[reply.chat_id] = due


@dataclass
class Resumed:
    """Another worker's reply, followed through its log, then, if it was cut (its worker stopped or died
    before it ended), its continuation here: so one request follows the reply to its true end."""

    first: Followed
    then: Callable[[], Awaitable[Stream | None]]
    meta: Meta = field(init=False)

    def __post_init__(self) -> None:
        self.meta = self.first.meta

    async def follow(self, idle: float | None = None) -> AsyncIterator[list[Chunk] | None]:
        async for chunks in self.first.follow(idle):
            yield chunks
        try:
            continued = await self.then()
        except LedgerUnavailable as exc:
            yield [Error(error_text=str(exc))]
            return
        if continued is not None:
            async for chunks in continued.follow(idle):
                yield chunks
