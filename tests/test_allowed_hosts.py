"""DNS rebinding: a page on the attacker's name, resolving to 127.0.0.1, reaches the server from the victim's
browser with `Host: <attacker's name>`. The server answers only its own names (the bind address, localhost,
127.0.0.1, [::1] and `--allowed-host` ones): anything else is a 400 on every route and on the live socket's
handshake, counted in the audit as one kind of refusal. A page on another origin (the seed's, on its own dev
server) gets in only when `--allow-origin` names it. A real `signoff demo`."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import httpx
import websockets

from tests.conftest import SIGNOFF
from tests.servers import DemoServer, signoff_server

WEATHER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather in Tokyo"}]}
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


def test_the_seed_page_on_its_own_origin_is_let_in_only_when_named(tmp_path: Path) -> None:
    """The seed's page runs on its own origin (its dev server): a real `signoff demo` takes its `/stream`
    posts and `/live` socket once `--allow-origin` names that origin, and refuses any other site's."""
    page, other = "http://localhost:3000", "http://other.example"
    args = ["demo", "--ledger", f"sqlite:///{tmp_path / 'l.db'}", "--allow-origin", page]
    body = {"id": "o1", "trigger": "submit-message", "messages": [WEATHER]}
    with (
        signoff_server(tmp_path, args, "token") as (base, _),
        httpx.Client(base_url=base, timeout=20) as client,
    ):
        allowed = client.post("/stream", json=body, headers={"origin": page})
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == page
        assert "data: [DONE]" in allowed.text
        assert client.post("/stream", json={**body, "id": "o2"}, headers={"origin": other}).status_code == 403

        async def live(origin: str) -> str:
            try:
                async with websockets.connect(f"ws{base[4:]}/live", origin=origin) as socket:  # type: ignore[arg-type]
                    await socket.send(json.dumps({"type": "message", **body, "id": f"o-{origin[7:12]}"}))
                    while (frame := str(await asyncio.wait_for(socket.recv(), 20))) != "data: [DONE]\n\n":
                        assert frame.startswith("data: "), frame
                    return "done"
            except websockets.InvalidStatus as refused:
                return str(refused.response.status_code)

        assert asyncio.run(live(page)) == "done"
        assert asyncio.run(live(other)) == "403"
