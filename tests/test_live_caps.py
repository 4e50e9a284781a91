"""Live sockets are capped and closed when idle, against a real `signoff demo`: the 65th socket of one
principal is refused (1013, with the reason), so are sockets beyond four times that from one address; a
socket with no frame from its client and no turn of its own running closes after `--socket-idle`; and 5,000
sockets opened and closed leave the server's memory (VmRSS, from /proc) within 50 MB of where it started."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from signoff import SqliteLedger
from tests.servers import signoff_server

TRY_AGAIN_LATER = 1013
COOKIE = "signoff_session"
PAYMENT = {
    "type": "message",
    "id": "paid",
    "trigger": "submit-message",
    "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 50 USD to Hanako"}]}],
}


def demo(tmp_path: Path, *options: str) -> Iterator[tuple[str, int]]:
    args = ["demo", "--ledger", f"sqlite:///{tmp_path / 'l.db'}", *options]
    with signoff_server(tmp_path, args, "admin-token") as (base, process):
        yield base.removeprefix("http://"), process.pid


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The demo with its default caps."""
    yield from demo(tmp_path)


@pytest.fixture
def small(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """Two sockets per principal (so eight per address), closed after 1 s idle."""
    yield from demo(tmp_path, "--max-sockets", "2", "--socket-idle", "1")


def connect(host: str, cookie: str | None = None, **headers: str) -> websockets.connect:
    if cookie is not None:
        headers["cookie"] = f"{COOKIE}={cookie}"
    return websockets.connect(f"ws://{host}/api/live", additional_headers=headers, open_timeout=30)


async def opened(stack: AsyncExitStack, host: str, count: int, cookie: str | None = None) -> list[Any]:
    """`count` sockets, each answering a ping: the server holds them all."""
    sockets = [await stack.enter_async_context(connect(host, cookie)) for _ in range(count)]
    for socket in sockets:
        await socket.send('{"type":"ping"}')
        assert await socket.recv() == '{"type":"pong"}'
    return sockets


async def refused(host: str, cookie: str | None = None, **headers: str) -> str:
    """The close reason of a socket the server turns away: it opens, then closes at once with 1013."""
    async with connect(host, cookie, **headers) as socket, asyncio.timeout(10):
        with pytest.raises(websockets.ConnectionClosedError):
            await socket.recv()
        assert socket.close_code == TRY_AGAIN_LATER
        return str(socket.close_reason)


async def approve(chat: str, host: str) -> None:
    headers = {"authorization": "Bearer admin-token"}
    async with httpx.AsyncClient(base_url=f"http://{host}", headers=headers, timeout=10) as admin:
        [asked] = (await admin.get(f"/api/approvals?chat={chat}")).json()["approvals"]
        await admin.post(f"/api/approvals/{asked['id']}/decision", json={"approved": True})


def browser(host: str) -> str:
    """A new browser's session cookie, as the chat page hands it out."""
    return httpx.get(f"http://{host}/", timeout=10).cookies[COOKIE]


async def test_the_65th_socket_of_one_principal_is_refused(capped: tuple[str, int]) -> None:
    host, _ = capped
    async with AsyncExitStack() as stack:
        sockets = await opened(stack, host, 64)  # credential-less: all of them the anonymous principal's
        assert "too many live sockets for this principal (64)" in await refused(host)
        async with connect(host, authorization="Bearer admin-token") as admin:  # another principal
            await admin.send('{"type":"ping"}')
            assert await admin.recv() == '{"type":"pong"}'
        await sockets[0].close()
        await asyncio.sleep(0.2)
        await opened(stack, host, 1)  # a closed one frees its place


async def test_an_address_holds_four_times_a_principals_cap_and_idle_sockets_close(
    small: tuple[str, int], tmp_path: Path
) -> None:
    host, _ = small
    async with AsyncExitStack() as stack:
        cookie = browser(host)
        await opened(stack, host, 2, cookie)
        assert "for this principal (2)" in await refused(host, cookie)
        for _ in range(3):
            await opened(stack, host, 2, browser(host))
        assert "from this address (8)" in await refused(host, browser(host)), "eight from 127.0.0.1"

    async with connect(host) as quiet, connect(host) as talking, connect(host, browser(host)) as waiting:
        await waiting.send(json.dumps(PAYMENT))  # a turn that waits for a person: the socket follows it
        started = time.monotonic()
        while time.monotonic() - started < 2.5:
            await talking.send('{"type":"ping"}')
            assert await talking.recv() == '{"type":"pong"}'
            await asyncio.sleep(0.3)
        with pytest.raises(websockets.ConnectionClosedOK):
            await quiet.recv()
        assert (quiet.close_code, quiet.close_reason) == (1000, "idle for 1 s")
        assert talking.close_code is None and waiting.close_code is None, "talking, or following a turn"
        while (frame := await waiting.recv()) != "[DONE]":
            if json.loads(str(frame))["type"] == "finish-step":  # the turn waits: decide it elsewhere
                await approve("paid", host)
        ended = time.monotonic()
        with pytest.raises(websockets.ConnectionClosedOK):
            await waiting.recv()
        assert 0.8 < time.monotonic() - ended < 3, "idle from the end of its turn"

    async with SqliteLedger(tmp_path / "l.db") as ledger:  # the server's, read beside it
        counted = [
            e for e in await ledger.audit.entries(0, 10_000) if e.detail.get("kind") == "too-many-sockets"
        ]
    assert sum(e.detail["count"] for e in counted) == 2 and {e.subject for e in counted} == {"live"}


def test_five_thousand_sockets_opened_and_closed_leave_memory_where_it_was(capped: tuple[str, int]) -> None:
    host, pid = capped
    cookies = [browser(host) for _ in range(5)]

    async def waves() -> None:
        for _ in range(20):  # 20 waves of 250: five principals with 50 each, under both caps
            async with AsyncExitStack() as stack:
                await asyncio.gather(*(opened(stack, host, 50, cookie) for cookie in cookies))

    asyncio.run(opened_once(host))
    before = rss(pid)
    asyncio.run(waves())
    time.sleep(2)  # the sweeper's next round
    after = rss(pid)
    print(f"VmRSS before {before / 2**20:.0f} MB, after 5,000 sockets {after / 2**20:.0f} MB")
    assert after - before < 50 * 2**20, f"{before / 2**20:.0f} MB before, {after / 2**20:.0f} MB after"


async def opened_once(host: str) -> None:
    async with AsyncExitStack() as stack:
        await opened(stack, host, 1)


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")
