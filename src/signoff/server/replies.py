"""The replies running in this process: what the chat routes and the live socket hand a checked request to.

`Replies` begins a reply (the chat claimed, the request checked against it, its stream opened in the
ledger's reply log), runs it, and keeps it by chat while it runs, so a live socket can answer the reply it
follows. It also ends browser calls that got no result in time: `sweep` starts, on the server's own
initiative, the reply that tells the model so, and tells whoever listens (a page following the chat's
events) that it did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.core.principal import Principal
from signoff.gate import Wait
from signoff.integrations.chat import Chat, Reply
from signoff.integrations.trust import OutOfTurn, Untrusted
from signoff.integrations.turn import Browser
from signoff.protocol import ChatRequest, Chunk
from signoff.server.streams import Stream, Streams

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
            reply.browser = Browser(timeout=self.chat.browser_timeout)
        if (user := request.user_message) is not None:
            stream.meta.prompt = {"id": user.id, "role": "user", "parts": list(user.parts)}
        stream.meta.regenerates = request.trigger == "regenerate-message"
        self._start(reply, stream)
        return stream

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
        if reply.browser_due is not None:
            self._due[reply.chat_id] = reply.browser_due
