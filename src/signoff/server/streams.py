"""Running replies, kept per chat so a reloaded page can pick its stream up again, on any worker.

A reply runs as its own task and pushes its chunks here; the request that started it is only its first
reader. So a reader that goes away (a reload, a dropped connection) stops nothing: the turn goes on, a
pending approval stays pending, and `GET /api/chat/{id}/stream` replays the chunks so far and follows the
rest. The chunks are typed: each reader frames them at its own edge (SSE events, the live socket's text
frames), cut to its own client's version.

The chunks are also recorded in the ledger's reply log, every running reply's new ones in one write
every `flush` seconds, so that a reader whose request reaches another worker can follow the reply too: it
polls the log. The recorder also writes a heartbeat every `heartbeat` seconds while a reply waits (on a
person, say), so a log that stops moving without ending means its worker died, and readers stop
following it instead of waiting forever.

While the ledger is away the recorder keeps what it could not write and tries again every `heartbeat`
seconds, telling the ledger's outage (which says so once); a reader following another worker's reply is
told with an `error` chunk, and its stream ends.

When the process stops (`stop`), every reply running here is cut: its readers, here and on other workers,
get an `error` chunk saying so and their stream ends, instead of hanging until the process is gone. A
reply cut so (or whose worker died) is one `cut_short` tells from one that ended by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from signoff.core.errors import LedgerUnavailable
from signoff.ledger.base import Ledger, outage_of
from signoff.ledger.records import ReplyFrames, ReplyLog
from signoff.protocol import Chunk, ClientVersion, Error, ToolInputAvailable, decode, encode

log = logging.getLogger("signoff.server")


class Meta(msgspec.Struct, kw_only=True):
    prompt: dict[str, Any] | None = None
    """The user message this reply answers, as the client sent it: the stored chat gets it only when
    the reply is saved, so until then a reloading page learns it here."""
    regenerates: bool = False
    """This reply replaces the chat's last assistant message."""


_decode_meta = msgspec.json.Decoder(Meta).decode


class Followed(Protocol):
    """A reply a page can follow, wherever it runs."""

    meta: Meta

    def follow(self, idle: float | None = None) -> AsyncIterator[list[Chunk] | None]:
        """Every chunk from the first, then the new ones as they come, each time all that came since the
        last read, until the reply ends (or, on another worker, stops being written); with `idle`, None
        whenever that many seconds pass without one, so an SSE edge can keep its connection alive while the
        reply waits on a person. A reader writes what it gets at once: one write per read, not per chunk,
        is what a run's burst of chunks costs it."""
        ...


class Stream:
    """A reply running in this process.

    Readers wait on futures of their own that a push settles: one reader cancelled (its client went away)
    never disturbs another, and a push costs no lock, as everything here runs on the event loop."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.closed = False
        self.meta = Meta()
        self._readers: list[asyncio.Future[bool]] = []

    def push(self, chunk: Chunk) -> None:
        if self.closed:  # cut by a stop: its readers were told it ended
            return
        self.chunks.append(chunk)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def follow(self, idle: float | None = None) -> AsyncIterator[list[Chunk] | None]:
        sent = 0
        while True:
            if len(self.chunks) == sent and not self.closed:
                if not await self._moved(idle):
                    yield None
                continue
            fresh = self.chunks[sent:]
            sent += len(fresh)
            if fresh:
                yield fresh
            if self.closed and sent == len(self.chunks):
                return

    async def _moved(self, idle: float | None) -> bool:
        """Wait for the next push or the close: True, or False once `idle` seconds passed first."""
        loop = asyncio.get_running_loop()
        moved: asyncio.Future[bool] = loop.create_future()
        self._readers.append(moved)
        timer = None if idle is None else loop.call_later(idle, _settle, moved, False)
        try:
            return await moved
        finally:
            if timer is not None:
                timer.cancel()
            if not moved.done():  # cancelled: no longer a reader
                self._readers.remove(moved)

    def _wake(self) -> None:
        readers, self._readers = self._readers, []
        for moved in readers:
            _settle(moved, True)


def _settle(moved: asyncio.Future[bool], value: bool) -> None:
    if not moved.done():
        moved.set_result(value)


STOPPING = "this server is stopping"
FLUSH_WITHIN = 2.0
"""Seconds a stopping process gives its recorder to write the replies' last chunks."""


def follow_again(chat_id: str) -> str:
    return f"follow the reply again at GET /api/chat/{chat_id}/stream, on any worker"


def _stopped(chat_id: str, stream: Stream, waiting: Mapping[str, str]) -> str:
    """What a reply cut by a stop tells its readers: the calls still waiting (by tool, from the chunks
    that announced them, and approval), and where to follow it again."""
    tools = {c.tool_call_id: c.tool_name for c in stream.chunks if isinstance(c, ToolInputAvailable)}
    pending = ", ".join(
        f"{tools.get(call, 'a call')} (approval {approval})" for call, approval in waiting.items()
    )
    return f"{STOPPING}; {f'still waiting: {pending}; ' if pending else ''}{follow_again(chat_id)}"


@dataclass
class Logged:
    """A reply another worker runs, followed through the ledger's reply log."""

    ledger: Ledger
    chat_id: str
    first: ReplyLog
    poll: float
    stale: float
    stopping: asyncio.Event
    """Set once this process stops: its readers end then, and follow the reply again on another worker."""
    meta: Meta = field(init=False)

    def __post_init__(self) -> None:
        self.meta = _decode_meta(self.first.meta) if self.first.meta else Meta()

    async def follow(self, idle: float | None = None) -> AsyncIterator[list[Chunk] | None]:
        current, sent, heard = self.first, 0, time.monotonic()
        while True:
            chunks, readable = [], True
            for logged in current.frames:
                try:
                    chunks.append(decode(logged))
                except msgspec.DecodeError:  # written by a version that logged something else
                    log.warning("chat %s: a reply log entry is not a chunk; not followed", self.chat_id)
                    readable = False
                    break
            if chunks:
                yield chunks
            if not readable:
                return
            sent += len(current.frames)
            if current.done or self.ledger.chats.clock() - current.updated_at > self.stale:
                return  # ended, or its worker died: the page reloads the chat as stored
            now = time.monotonic()
            if current.frames or (idle is not None and now - heard >= idle):
                heard = now
                if not current.frames:
                    yield None
            await asyncio.sleep(self.poll)
            if self.stopping.is_set():
                yield [Error(error_text=f"{STOPPING}; {follow_again(self.chat_id)}")]
                return
            try:
                later = await self.ledger.chats.reply_log(self.chat_id, after=sent)
            except LedgerUnavailable as exc:  # its worker goes on; this reader may come back later
                yield [Error(error_text=str(exc))]
                return
            if later is None or later.reply != current.reply:
                return  # a newer reply replaced it
            current = later


@dataclass
class _Recording:
    """How far a running reply's log has been written."""

    stream: Stream
    reply: str
    sent: int = 0
    begun: bool = False
    written: float = 0.0
    """When the log was last written (monotonic), for heartbeats."""


class Streams:
    """The replies running in this process, at most one per chat, and the way to those of other workers.

    A finished reply stays readable for `linger` seconds: a page that loaded the chat while the reply ran
    (so without it) and asks for the stream a moment after it ended still gets all of it.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        linger: float = 60.0,
        flush: float = 0.05,
        heartbeat: float = 1.0,
        poll: float = 0.1,
    ) -> None:
        self.ledger = ledger
        self.outage = outage_of(ledger)
        self.linger = linger
        self.flush = flush
        self.heartbeat = heartbeat
        self.poll = poll
        self._running: dict[str, Stream] = {}
        self._finished: dict[str, Stream] = {}
        self._recordings: dict[str, _Recording] = {}
        self._recorder: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopping = asyncio.Event()
        """Set by `stop`: this process takes no reply further."""

    async def find(self, chat_id: str, *, ended: bool = False) -> Followed | None:
        """The chat's running reply, here or on another worker; with `ended`, also one that ended
        within `linger` seconds."""
        if (here := self._running.get(chat_id)) is not None:
            return here
        if (ended_here := self._finished.get(chat_id)) is not None:  # newer than its log may be yet
            return ended_here if ended else None
        logged = await self.ledger.chats.reply_log(chat_id)
        if logged is None:
            return None
        age, stale = self.ledger.chats.clock() - logged.updated_at, 3 * self.heartbeat
        if (logged.done and not ended) or age > (self.linger if logged.done else stale):
            return None
        return Logged(self.ledger, chat_id, logged, self.poll, stale, self.stopping)

    async def cut_short(self, chat_id: str) -> bool:
        """Whether the chat's last reply was cut rather than ended, and runs nowhere now: it ended in an
        `error` chunk (its worker stopped, or the run failed), or its log stopped being written (its worker
        died), or is gone (forgotten `linger` seconds after). A reply that ended by itself ends in `finish`,
        and an interrupted one in `abort`."""
        if chat_id in self._running:
            return False
        if (here := self._finished.get(chat_id)) is not None:
            return bool(here.chunks) and isinstance(here.chunks[-1], Error)
        logged = await self.ledger.chats.reply_log(chat_id)
        if logged is None:
            return True
        if not logged.done:
            return self.ledger.chats.clock() - logged.updated_at > 3 * self.heartbeat
        try:
            return bool(logged.frames) and isinstance(decode(logged.frames[-1]), Error)
        except msgspec.DecodeError:
            return False

    def open(self, chat_id: str) -> Stream | None:
        """Claim the chat for a new reply, or None when one is already running here."""
        if chat_id in self._running:
            return None
        self._finished.pop(chat_id, None)
        stream = self._running[chat_id] = Stream()
        return stream

    def release(self, chat_id: str, stream: Stream) -> None:
        """Give the chat back without running anything (the request was refused)."""
        if self._running.get(chat_id) is stream:
            del self._running[chat_id]

    def run(
        self, chat_id: str, stream: Stream, reply: Callable[[Callable[[Chunk], None]], Awaitable[None]]
    ) -> None:
        """Run `reply` in the background, to the end, its chunks pushed into the claimed `stream`, and
        record them; in a stopping process, cut it before it runs."""
        if self.stopping.is_set():
            stream.push(Error(error_text=_stopped(chat_id, stream, {})))
            stream.close()
            self.release(chat_id, stream)
            return

        async def pump() -> None:
            try:
                await reply(stream.push)
            except Exception:  # a bug below must not kill the server; readers see the stream end
                log.exception("the reply in chat %s failed", chat_id)
            finally:
                stream.close()
                self.release(chat_id, stream)
                self._finished[chat_id] = stream
                asyncio.get_running_loop().call_later(self.linger, self._forget, chat_id, stream)

        self._spawn(pump(), f"signoff-reply-{chat_id}")
        self._recordings[chat_id] = _Recording(stream, secrets.token_urlsafe(12))
        if self._recorder is None or self._recorder.done():
            self._recorder = self._spawn(self._record(), "signoff-recorder")

    async def _record(self) -> None:
        """Every `flush` seconds, copy what every running reply added into the ledger's reply logs in one
        write (one per reply would swamp the ledger with a busy server's many small chunks), each chunk
        with every field any client version takes, so each reader can cut it to its own; a reply with
        nothing new gets a heartbeat every `heartbeat` seconds. A failed write is retried at the next
        flush (after `heartbeat` seconds, while the ledger is away): the reply goes on here meanwhile, and
        only readers on other workers fall behind."""
        while self._recordings:
            await asyncio.sleep(self.flush)
            now = time.monotonic()
            batch, taken = [], []
            for chat_id, r in self._recordings.items():
                fresh, done = r.stream.chunks[r.sent :], r.stream.closed
                if r.begun and not fresh and not done and now - r.written < self.heartbeat:
                    continue
                meta = None if r.begun else msgspec.json.encode(r.stream.meta)
                logged = [encode(chunk, ClientVersion.V7) for chunk in fresh]
                batch.append(ReplyFrames(chat_id, r.reply, r.sent, logged, done, meta))
                taken.append((chat_id, r, len(fresh), done))
            try:
                await self.ledger.chats.log_replies(batch)
            except LedgerUnavailable as exc:
                self.outage.failed(exc)
                await asyncio.sleep(self.heartbeat)
                continue
            except Exception as exc:
                log.warning("recording %d replies failed: %s", len(batch), exc)
                continue
            self.outage.recovered(wrote=bool(batch))
            for chat_id, r, count, done in taken:
                r.sent, r.begun, r.written = r.sent + count, True, now
                if done and self._recordings.get(chat_id) is r:
                    del self._recordings[chat_id]

    def _spawn(self, work: Any, name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _forget(self, chat_id: str, stream: Stream) -> None:
        if self._finished.get(chat_id) is stream:
            del self._finished[chat_id]

    async def forget_logs(self) -> None:
        """Drop reply logs nobody can follow any more (called by the server's sweeper)."""
        await self.ledger.chats.forget_replies(before=self.ledger.chats.clock() - self.linger)

    def stop(self, waiting: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """The process stops: cut every reply running here with an `error` naming the calls it still waits
        on (`waiting`: by chat, call id to approval id), so its readers end now and resume elsewhere rather
        than hold the shutdown while a person takes hours. Their approvals stay pending. Idempotent."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        for chat_id, stream in self._running.items():
            stream.push(Error(error_text=_stopped(chat_id, stream, (waiting or {}).get(chat_id, {}))))
            stream.close()
        for task in self._tasks:
            if task is not self._recorder:
                task.cancel()

    async def close(self) -> None:
        """Stop every running reply (server shutdown), their approvals pending; the recorder gets
        `FLUSH_WITHIN` seconds to write their last chunks, for readers on other workers."""
        self.stop()
        recorder = self._recorder
        for task in list(self._tasks):
            if task is not recorder:
                task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*(t for t in self._tasks if t is not recorder), return_exceptions=True)
        if recorder is not None and not recorder.done():
            try:
                await asyncio.wait_for(asyncio.shield(recorder), FLUSH_WITHIN)
            except TimeoutError:  # the ledger is away: readers elsewhere see the log go stale instead
                recorder.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await recorder
