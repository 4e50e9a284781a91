"""A real `signoff demo` against what an attacker or a broken client sends: a 300 MB body (memory measured
from /proc), 1,000 slow clients, a body that trickles, a client that leaves mid-body, a live-socket text
frame that is not UTF-8, a taken port."""

from __future__ import annotations

import asyncio
import gc
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.server.run import config, listen, serve
from tests.conftest import SIGNOFF
from tests.servers import signoff_server

HEAD_TIMEOUT, BODY_TIMEOUT = 2.0, 2.0


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, Path]]:
    """The demo with short head and body timeouts: its base URL, its pid, and its stderr file."""
    folder = tmp_path_factory.mktemp("hardening")
    args = ["demo", "--ledger", f"sqlite:///{folder / 'l.db'}"]
    args += ["--head-timeout", str(HEAD_TIMEOUT), "--body-timeout", str(BODY_TIMEOUT)]
    with signoff_server(folder, args, "token") as (base, process):
        yield base, process.pid, folder / "demo.stderr"


def address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


def rss(pid: int) -> int:
    """The process's resident memory in bytes, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def send_huge(base: str, head: bytes, total: int, *, chunked: bool) -> bytes:
    """Send `head`, then up to `total` bytes of body in 1 MiB pieces (each a chunk, when `chunked`) until the
    server stops reading; what it answered."""
    with socket.create_connection(address(base), timeout=10) as sock:
        sock.sendall(head)
        piece, sent = b"0" * (1 << 20), 0
        if chunked:
            piece = b"%x\r\n%s\r\n" % (len(piece), piece)
        try:
            while sent < total:
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sock.settimeout(5)
        try:
            return sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            return b""


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_300_mb_body_is_refused_with_bounded_memory(demo: tuple[str, int, Path], framing: str) -> None:
    base, pid, _ = demo
    httpx.get(f"{base}/api/chat/warm", timeout=10)
    before = rss(pid)
    total = 300 * (1 << 20)
    length = f"content-length: {total}" if framing == "content-length" else "transfer-encoding: chunked"
    head = (
        f"POST /api/chat HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        f"{length}\r\n\r\n".encode()
    )
    answer = send_huge(base, head, total, chunked=framing == "chunked")
    grown = rss(pid) - before
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert grown < 8 * (1 << 20), f"the server grew by {grown / (1 << 20):.1f} MiB for a refused body"
    assert httpx.get(f"{base}/api/me", timeout=10).status_code == 401, "and it still serves"


def test_a_thousand_slow_clients_are_closed_in_time(demo: tuple[str, int, Path]) -> None:
    base, _, stderr = demo
    slow = []
    for n in range(1000):
        sock = socket.create_connection(address(base), timeout=10)
        head = b"GET /api/me HTTP/1.1\r\nhost: localhost\r\n"  # a head begun (Host one of the server's names)
        sock.sendall(head if n % 2 else b"")  # or nothing
        slow.append(sock)
    started = time.monotonic()
    assert httpx.get(f"{base}/api/me", timeout=10).status_code == 401, "others are still served meanwhile"
    for sock in slow:
        sock.settimeout(HEAD_TIMEOUT + 5)
        try:
            sock.sendall(b"x-slow: 1\r\n")
            assert sock.recv(1024) == b""  # closed
        except (ConnectionResetError, BrokenPipeError):
            pass
        sock.close()
    took = time.monotonic() - started
    assert took < HEAD_TIMEOUT + 3, f"the slow clients were closed after {took:.1f} s"
    assert "Traceback" not in stderr.read_text()


def test_a_trickling_body_is_a_408_and_a_client_that_leaves_is_one_line(demo: tuple[str, int, Path]) -> None:
    base, _, stderr = demo
    head = (
        b"POST /api/chat HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        b"content-length: 100\r\n\r\n"
    )
    with socket.create_connection(address(base), timeout=10) as sock:
        sock.sendall(head + b"{")
        started = time.monotonic()
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < BODY_TIMEOUT + 2
    with socket.create_connection(address(base), timeout=10) as sock:
        sock.sendall(head + b'{"id": "c')
    time.sleep(0.5)
    assert "Traceback" not in stderr.read_text()


async def test_a_text_frame_that_is_not_utf8_closes_the_socket_with_1007_and_one_line(
    demo: tuple[str, int, Path],
) -> None:
    base, _, stderr = demo
    logged = len(stderr.read_text())
    for _ in range(3):
        async with websockets.connect(f"ws://{base.removeprefix('http://')}/api/live") as socket:
            await socket.send(b'{"type": "ping", "x": "\xff\xfe"}', text=True)  # sent as is, unchecked
            with pytest.raises(websockets.ConnectionClosedError):
                await socket.recv()
        assert socket.close_code == 1007  # invalid frame payload data
    await asyncio.sleep(0.2)
    lines = stderr.read_text()[logged:].splitlines()
    assert "Traceback" not in "\n".join(lines) and len(lines) == 3, lines
    async with websockets.connect(f"ws://{base.removeprefix('http://')}/api/live") as socket:
        await socket.send('{"type":"ping"}')
        assert await socket.recv() == '{"type":"pong"}', "and the server still serves sockets"


def test_a_taken_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [SIGNOFF, "demo", "--port", str(port), "--ledger", f"sqlite:///{tmp_path / 'l.db'}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: could not listen on 127.0.0.1:{port}: Address already in use"
    ]


async def test_every_connection_sends_its_writes_at_once() -> None:
    """A reply's chunks leave as they are made: with Nagle's algorithm on, each small write after the first
    waited for the client's delayed ACK (40 ms on Linux), though the server was idle, so a reply arrived in
    bursts. asyncio turns it off only for sockets made with `IPPROTO_TCP`, which the listening socket is
    not. Checked on the accepted connection of a real uvicorn server configured as `signoff serve` is, not
    timed: a timing bound tight enough to tell 40 ms from a reply's own time fails on a busy machine."""

    async def hello(request: Request) -> Response:
        return Response("hello")

    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(config(Starlette(routes=[Route("/", hello)]), "127.0.0.1", 0))
    running = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:  # uvicorn has a flag, not an event
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        assert (await reader.readuntil(b"hello")).startswith(b"HTTP/1.1 200")
        [connection] = server.server_state.connections
        accepted = connection.transport.get_extra_info("socket")  # type: ignore[attr-defined]
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        writer.close()
    finally:
        server.should_exit = True
        await running


async def test_a_server_puts_what_it_made_before_serving_out_of_the_collectors_reach() -> None:
    """What a server made at startup lives as long as it does: a full collection must not walk it every
    time (under load that cost about 1 ms per flow, and pauses up to 70 ms)."""
    frozen: list[int] = []
    serving = asyncio.create_task(
        serve(Starlette(), "127.0.0.1", 0, lambda _: frozen.append(gc.get_freeze_count()))
    )
    try:
        while not frozen:
            await asyncio.sleep(0.01)
        assert frozen[0] > 10_000  # this process's modules, pytest's and the app's objects
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        gc.unfreeze()
