"""Running replies, kept per chat so a reloaded page can pick its stream up again.

A reply runs as its own task and writes its SSE frames here; the request that started it is only its first
reader. So a reader that goes away (a reload, a dropped connection) stops nothing: the turn goes on, a
pending approval stays pending, and `GET /api/chat/{id}/stream` replays the frames so far and follows the
rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

log = logging.getLogger("signoff.server")


class Stream:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.closed = False
        self.prompt: dict[str, Any] | None = None
        """The user message this reply answers, as the client sent it: the stored chat gets it only when
        the reply is saved, so until then a reloading page learns it here."""
        self.regenerates = False
        """This reply replaces the chat's last assistant message."""
        self._changed = asyncio.Condition()

    async def push(self, frame: bytes) -> None:
        async with self._changed:
            self.frames.append(frame)
            self._changed.notify_all()

    async def close(self) -> None:
        async with self._changed:
            self.closed = True
            self._changed.notify_all()

    async def follow(self) -> AsyncIterator[bytes]:
        """Every frame from the first, then each new one as it comes, until the reply ends."""
        sent = 0
        while True:
            async with self._changed:
                await self._changed.wait_for(partial(self._beyond, sent))
                fresh, done = self.frames[sent:], self.closed
            sent += len(fresh)
            for frame in fresh:
                yield frame
            if done and sent == len(self.frames):
                return

    def _beyond(self, sent: int) -> bool:
        return len(self.frames) > sent or self.closed


class Streams:
    """The replies running in this process, at most one per chat.

    A finished reply stays readable for `linger` seconds: a page that loaded the chat while the reply ran
    (so without it) and asks for the stream a moment after it ended still gets all of it.
    """

    def __init__(self, *, linger: float = 60.0) -> None:
        self.linger = linger
        self._running: dict[str, Stream] = {}
        self._finished: dict[str, Stream] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def running(self, chat_id: str) -> Stream | None:
        return self._running.get(chat_id)

    def get(self, chat_id: str) -> Stream | None:
        """The running reply, else the one that ended within `linger` seconds."""
        return self._running.get(chat_id) or self._finished.get(chat_id)

    def open(self, chat_id: str) -> Stream | None:
        """Claim the chat for a new reply, or None when one is already running there."""
        if chat_id in self._running:
            return None
        self._finished.pop(chat_id, None)
        stream = self._running[chat_id] = Stream()
        return stream

    def release(self, chat_id: str, stream: Stream) -> None:
        """Give the chat back without running anything (the request was refused)."""
        if self._running.get(chat_id) is stream:
            del self._running[chat_id]

    def run(self, chat_id: str, stream: Stream, frames: AsyncIterator[bytes]) -> None:
        """Write `frames` into the claimed `stream` in the background, to the end."""

        async def pump() -> None:
            try:
                async for frame in frames:
                    await stream.push(frame)
            except Exception:  # a bug below must not kill the server; readers see the stream end
                log.exception("the reply in chat %s failed", chat_id)
            finally:
                await stream.close()
                self.release(chat_id, stream)
                self._finished[chat_id] = stream
                asyncio.get_running_loop().call_later(self.linger, self._forget, chat_id, stream)

        task = asyncio.get_running_loop().create_task(pump(), name=f"signoff-reply-{chat_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _forget(self, chat_id: str, stream: Stream) -> None:
        if self._finished.get(chat_id) is stream:
            del self._finished[chat_id]

    async def close(self) -> None:
        """Stop every running reply (server shutdown): their approvals stay pending in the ledger."""
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
