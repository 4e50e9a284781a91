"""DNS rebinding: a page on the attacker's name, resolving to 127.0.0.1, reaches the server from the victim's
browser with `Host: <attacker's name>`. The server answers only its own names (the bind address, localhost,
127.0.0.1, [::1] and `--allowed-host` ones): anything else is a 400 on every route and on the live socket's
handshake, counted in the audit as one kind of refusal. A real `signoff demo`."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import websockets

from tests.conftest import SIGNOFF
from tests.servers import DemoServer, signoff_server

CHAT = {"id": "c1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}


async def handshake(base: str, host: str) -> int:
    """The status of a live-socket handshake sent to the server with `Host: <host>`: 101 when it opens."""
    port = int(base.rsplit(":", 1)[1])
    try:
        async with websockets.connect(f"ws://{host}/api/live", host="127.0.0.1", port=port) as socket:
            await socket.send('{"type":"ping"}')
            assert await socket.recv() == '{"type":"pong"}'
    except websockets.InvalidStatus as refused:
        return refused.response.status_code
    return 101


def test_a_foreign_host_is_refused_and_allowed_host_lets_one_in(tmp_path: Path) -> None:
    args = ["demo", "--ledger", f"sqlite:///{tmp_path / 'l.db'}", "--allowed-host", "example.test"]
    with signoff_server(tmp_path, args, "token") as (base, _):
        port = base.rsplit(":", 1)[1]
        with httpx.Client(base_url=base, timeout=20) as client:
            for host in ("rebound.attacker.example", f"rebound.attacker.example:{port}", "example.test.evil"):
                headers = {"host": host}
                chat = client.post("/api/chat", json=CHAT, headers=headers)
                assert (chat.status_code, chat.text) == (400, "Invalid host header"), host
                assert client.get("/", headers=headers).status_code == 400, host
                assert asyncio.run(handshake(base, host)) == 400, host
            for host in (f"example.test:{port}", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
                headers = {"host": host}
                assert client.get("/", headers=headers).status_code == 200, host
                assert client.post("/api/chat", json=CHAT, headers=headers).status_code == 200, host
                assert asyncio.run(handshake(base, host)) == 101, host

    view = DemoServer(
        base=base, token="token", db=tmp_path / "l.db", stderr=tmp_path / "demo.stderr"
    ).ledger()
    refused = [e for e in view.audit if e.detail.get("kind") == "foreign-host"]
    assert sum(e.detail["count"] for e in refused) == 9 and len(refused) <= 3, "counted, one kind"
    assert {e.subject for e in refused} == {"host"}
    assert refused[0].detail["why"].startswith("Host 'rebound.attacker.example'")


def test_an_allowed_host_pattern_starlette_would_refuse_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [SIGNOFF, "demo", "--port", "0", "--ledger", f"sqlite:///{tmp_path / 'l.db'}",
         "--allowed-host", "a*.b"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "--allowed-host" in done.stderr and "Traceback" not in done.stderr
