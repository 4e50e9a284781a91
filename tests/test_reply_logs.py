"""Replies recorded in the ledger's reply log, and followed from it as another worker would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from signoff.ledger import MemoryLedger
from signoff.ledger.records import ReplyFrames
from signoff.protocol import Chunk, Data, TextDelta, ToolApprovalRequest, encode
from signoff.server.streams import Streams
from tests.conftest import FakeClock

A, B = TextDelta(id="t", delta="a"), Data(name="task", id="k", data={"state": "running"})
ASK = ToolApprovalRequest(approval_id="ap", tool_call_id="c", signature="sig")


def chunks(*items: Chunk) -> Callable[[Callable[[Chunk], None]], Awaitable[None]]:
    """A reply that pushes `items`, one every 10 ms."""

    async def reply(push: Callable[[Chunk], None]) -> None:
        for item in items:
            await asyncio.sleep(0.01)
            push(item)

    return reply


async def test_a_reply_is_recorded_whole_and_marked_ended() -> None:
    ledger = MemoryLedger()
    here = Streams(ledger, flush=0.005)
    stream = here.open("c1")
    assert stream is not None
    stream.meta.prompt = {"id": "u1", "role": "user", "parts": []}
    here.run("c1", stream, chunks(A, B, ASK))
    for _ in range(200):
        log = await ledger.chats.reply_log("c1")
        if log is not None and log.done:
            break
        await asyncio.sleep(0.01)
    # the log keeps typed chunks with every field, not one transport's framing of them
    assert log is not None and log.done and log.frames == [encode(c, 7) for c in (A, B, ASK)]
    elsewhere = Streams(ledger)
    assert await elsewhere.find("c1") is None  # ended: not running any more
    followed = await elsewhere.find("c1", ended=True)
    assert followed is not None and followed.meta.prompt == stream.meta.prompt
    assert await _collect(followed.follow()) == [A, B, ASK]
    await here.close()


async def test_a_log_whose_worker_stopped_writing_is_not_followed_forever() -> None:
    ledger = MemoryLedger()
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", 0, [encode(A)], meta=b"")])
    elsewhere = Streams(ledger, heartbeat=0.05, poll=0.01)
    running = await elsewhere.find("c1")
    assert running is not None
    followed = await asyncio.wait_for(asyncio.gather(_collect(running.follow())), 2)
    assert followed == [[A]]  # then 3 heartbeats passed without a write: its worker is taken as dead
    assert await elsewhere.find("c1") is None


async def test_a_stale_log_is_not_running_and_old_logs_are_forgotten() -> None:
    clock = FakeClock()
    ledger = MemoryLedger(clock=clock)
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", meta=b"")])
    streams = Streams(ledger, heartbeat=5, linger=60)
    assert await streams.find("c1") is not None
    clock.advance(16)
    assert await streams.find("c1") is None
    clock.advance(60)
    await streams.forget_logs()
    assert await ledger.chats.reply_log("c1") is None


async def test_a_log_entry_that_is_not_a_chunk_ends_the_follow_instead_of_failing() -> None:
    """An entry an older version wrote as an SSE frame: the follower stops there, and the page reloads
    the chat as stored."""
    ledger = MemoryLedger()
    await ledger.chats.log_replies(
        [ReplyFrames("c1", "r1", 0, [encode(A), b"data: {}\n\n", encode(B)], meta=b"")]
    )
    running = await Streams(ledger).find("c1")
    assert running is not None
    assert await asyncio.wait_for(_collect(running.follow()), 2) == [A]


async def _collect(source: AsyncIterator[list[Chunk] | None]) -> list[Chunk]:
    return [chunk async for read in source for chunk in read or ()]


async def test_readers_of_a_running_reply_are_woken_and_kept_alive_independently() -> None:
    """Each reader gets every chunk; a quiet reply gives a reader None every `idle` seconds (its SSE edge's
    keep-alive); and a reader that goes away (cancelled) disturbs no other."""
    stream = Streams(MemoryLedger()).open("c1")
    assert stream is not None
    seen: list[Chunk | None] = []

    async def keep(into: list[Chunk | None], idle: float | None) -> None:
        async for read in stream.follow(idle):
            into.extend(read or [None])

    alive = asyncio.create_task(keep(seen, 0.05))
    gone = asyncio.create_task(keep([], None))
    stream.push(A)
    await asyncio.sleep(0.18)  # quiet: about three keep-alives
    gone.cancel()
    stream.push(B)
    stream.close()
    await asyncio.wait_for(alive, 1)
    assert gone.cancelled()
    assert [c for c in seen if c is not None] == [A, B]
    assert 2 <= seen.count(None) <= 4 and seen[0] == A and seen[-1] == B


async def test_a_quiet_reply_followed_from_the_log_is_kept_alive_too() -> None:
    ledger = MemoryLedger()
    await ledger.chats.log_replies([ReplyFrames("c1", "r1", 0, [encode(A)], meta=b"")])
    elsewhere = Streams(ledger, heartbeat=0.2, poll=0.01)
    running = await elsewhere.find("c1")
    assert running is not None
    seen: list[Chunk | None] = []

    async def keep() -> None:
        async for read in running.follow(0.05):
            seen.extend(read or [None])
            if read is None and seen.count(None) == 2:
                await ledger.chats.log_replies([ReplyFrames("c1", "r1", 1, [encode(B)], done=True)])

    await asyncio.wait_for(keep(), 2)
    assert [c for c in seen if c is not None] == [A, B] and seen.count(None) == 2


async def test_a_burst_of_chunks_reaches_a_reader_in_one_read() -> None:
    """What a run pushes between two of its waits, a reader takes in one read, and its edge writes in one
    go: a reply's SSE events cost one write per burst, not one per chunk."""
    stream = Streams(MemoryLedger()).open("c1")
    assert stream is not None
    reads: list[list[Chunk] | None] = []

    async def read() -> None:
        async for chunks in stream.follow():
            reads.append(chunks)

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)  # the reader waits
    stream.push(A)
    stream.push(B)
    await asyncio.sleep(0)
    stream.push(ASK)
    stream.close()
    await asyncio.wait_for(reader, 1)
    assert reads == [[A, B], [ASK]]
