"""Streams that end honestly (issue 43, item 7): two real `signoff serve` workers on one PostgreSQL ledger.

A worker told to stop (SIGTERM) ends its blocking streams and live sockets at once with an `error` chunk
naming the calls still pending, `[DONE]` (a socket: then a close with 1012 and why), and leaves their
approvals pending, even where the rule says `on_abandon = "cancel"`. A worker killed outright leaves them
pending too. Either way the chat is followed again on the other worker, through `GET /api/chat/{id}/stream`
or the live socket's `resume`, and the call decided meanwhile runs there, once. The chat page does so by
itself, over SSE or the live socket, and so does a page opened on the chat afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from signoff.ledger import open_ledger
from tests.chats import chunks, user
from tests.conftest import drop_url, shared_url
from tests.jsclient import JS_DIR, ROOT, ensure_installed
from tests.pages import CHROMIUM
from tests.servers import signoff_server
from tests.test_scaling import AUTH, TOKEN, runs, serving

POLICY = """
mode = "interactive"

[[tools.process_payment]]
action = "ask"
description = "Pay {amount} {currency} to {recipient}"
on_abandon = "cancel"
"""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    url = shared_url("postgres", tmp_path)
    yield url
    asyncio.run(drop_url(url))


def two_workers(stack: ExitStack, tmp_path: Path, url: str) -> list[tuple[str, subprocess.Popen[bytes]]]:
    """Workers `a` and `b`, each its own `signoff serve` process on the same ledger, with a policy whose
    payments ask and cancel their approval when the waiting caller goes away."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    args, env = serving(url, tmp_path)
    args[args.index("--policy") + 1] = str(policy)
    return [
        stack.enter_context(
            signoff_server(tmp_path, [*args, "--keepalive", "1"], TOKEN, env=env, name=name, timeout=30)
        )
        for name in ("a", "b")
    ]


async def parked(client: httpx.AsyncClient, base: str, url: str, chat: str) -> dict[str, Any]:
    """The chat's approval once its blocking reply saved the chat as parked, waiting on it."""
    async with open_ledger(url) as ledger:
        for _ in range(1200):
            stored = await ledger.chats.load(chat)
            if stored is not None and json.loads(stored.state).get("parked"):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"chat {chat} never parked")
    found = (await client.get(f"{base}/api/approvals?state=pending", headers=AUTH)).json()["approvals"]
    (approval,) = [a for a in found if a["chat_id"] == chat]
    return dict(approval)


async def approve(client: httpx.AsyncClient, base: str, approval_id: str) -> None:
    response = await client.post(
        f"{base}/api/approvals/{approval_id}/decision", json={"approved": True}, headers=AUTH
    )
    assert response.status_code == 200, response.text


async def state_of(client: httpx.AsyncClient, base: str, approval_id: str) -> str:
    return str((await client.get(f"{base}/api/approvals/{approval_id}", headers=AUTH)).json()["state"])


async def stopped(worker: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """The worker ended its shutdown (uvicorn raises the signal again once it is done) without a traceback."""
    assert await asyncio.to_thread(worker.wait, 60) in (0, -signal.SIGTERM)
    assert "Traceback" not in (tmp_path / "a.stderr").read_text()


async def until_closed(socket: websockets.ClientConnection) -> list[str]:
    """The frames a socket gets until its server closes it, not normally (1012)."""
    frames: list[str] = []
    try:
        while True:
            frames.append(str(await asyncio.wait_for(socket.recv(), 60)))
    except websockets.ConnectionClosedError:
        return frames


def ran(body: str) -> bool:
    kinds = [c["type"] for c in chunks(body)]
    return "tool-output-available" in kinds and kinds[-1] == "finish" and body.rstrip().endswith("[DONE]")


async def test_a_stopping_worker_ends_its_stream_and_the_other_runs_the_call_once(
    url: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        (a, worker_a), (b, _) = two_workers(stack, tmp_path, url)
        async with httpx.AsyncClient(timeout=120) as client:
            body = user("stop-sse", "pay 5 USD to t0", wait="blocking")
            streaming = asyncio.ensure_future(client.post(f"{a}/api/chat", json=body))
            approval = await parked(client, b, url, "stop-sse")
            worker_a.send_signal(signal.SIGTERM)
            cut = await asyncio.wait_for(streaming, 60)  # ends while the approval still waits
            await stopped(worker_a, tmp_path)
            assert cut.status_code == 200 and cut.text.rstrip().endswith("[DONE]"), cut.text[-300:]
            error = chunks(cut.text)[-1]
            assert error["type"] == "error", cut.text[-300:]
            assert f"process_payment (approval {approval['id']})" in error["errorText"]
            assert "/api/chat/stop-sse/stream" in error["errorText"]

            assert await state_of(client, b, approval["id"]) == "pending"  # not cancelled as abandoned
            await approve(client, b, approval["id"])
            resumed = await client.get(f"{b}/api/chat/stop-sse/stream")
            assert resumed.status_code == 200 and ran(resumed.text), resumed.text[-300:]
            assert not (await client.get(f"{b}/api/chat/stop-sse")).json()["running"]
            assert (await client.get(f"{b}/api/chat/stop-sse/stream")).status_code == 200  # a replay
    assert runs(tmp_path) == {"t0": 1}


async def test_a_killed_workers_chat_is_followed_to_its_end_on_the_other(url: str, tmp_path: Path) -> None:
    """One `GET /stream` on the other worker follows the dead worker's reply through its log until its
    heartbeats stop, then continues it there, with the decision made meanwhile."""
    with ExitStack() as stack:
        (a, worker_a), (b, _) = two_workers(stack, tmp_path, url)
        async with httpx.AsyncClient(timeout=120) as client:
            body = user("kill-sse", "pay 6 USD to t1", wait="blocking")
            streaming = asyncio.ensure_future(client.post(f"{a}/api/chat", json=body))
            approval = await parked(client, b, url, "kill-sse")
            worker_a.send_signal(signal.SIGKILL)
            await asyncio.to_thread(worker_a.wait, 60)
            with pytest.raises(httpx.TransportError):
                await streaming
            await approve(client, b, approval["id"])
            resumed = await client.get(f"{b}/api/chat/kill-sse/stream")
            assert resumed.status_code == 200 and ran(resumed.text), resumed.text[-300:]
            again = await client.get(f"{b}/api/chat/kill-sse/stream")  # the ended reply, replayed
            assert [c["type"] for c in chunks(again.text)].count("tool-output-available") == 1
    assert runs(tmp_path) == {"t1": 1}


async def test_a_stopping_worker_closes_its_live_sockets_and_the_chat_resumes_on_a_new_one(
    url: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        (a, worker_a), (b, _) = two_workers(stack, tmp_path, url)
        async with httpx.AsyncClient(timeout=120) as client:
            async with websockets.connect(f"ws://{a.removeprefix('http://')}/api/live") as socket:
                frame = user("stop-live", "pay 7 USD to t2")
                await socket.send(json.dumps({"type": "message", **frame}))
                approval = await parked(client, b, url, "stop-live")
                worker_a.send_signal(signal.SIGTERM)
                frames = await until_closed(socket)
            await stopped(worker_a, tmp_path)
            assert frames[-1] == "[DONE]", frames[-3:]
            error = json.loads(frames[-2])
            assert error["type"] == "error" and approval["id"] in error["errorText"], frames[-3:]
            assert socket.close_code == 1012 and "stopping" in (socket.close_reason or "")

            assert await state_of(client, b, approval["id"]) == "pending"
            async with websockets.connect(f"ws://{b.removeprefix('http://')}/api/live") as again:
                await again.send(json.dumps({"type": "resume", "id": "stop-live"}))
                await approve(client, b, approval["id"])
                seen = []
                while (text := await asyncio.wait_for(again.recv(), 60)) != "[DONE]":
                    seen.append(json.loads(text)["type"])
            assert "tool-output-available" in seen and seen[-1] == "finish", seen
    assert runs(tmp_path) == {"t2": 1}


async def on_page(case: str, base: str, **env: str) -> dict[str, Any]:
    """tests/js/page_resume.mjs's `case` in Chromium against `base`: what it printed."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: the page tests drive Debian's chromium package"
    ensure_installed()
    env = {**os.environ, "SIGNOFF_BASE": base, "SIGNOFF_TOKEN": TOKEN, "SIGNOFF_CASE": case, **env}
    page = await asyncio.create_subprocess_exec(
        "node", str(JS_DIR / "page_resume.mjs"), cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(page.communicate(), 300)
    assert page.returncode == 0, f"{err.decode()}{out.decode()}"
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


async def killed_under_the_page(tmp_path: Path, url: str, case: str, kill: signal.Signals) -> dict[str, Any]:
    """In Chromium, through a proxy that reaches worker a, or b once a is gone: a card asks, a gets `kill`,
    the approval is decided on b, and the page shows the decision and the result unreloaded."""
    with ExitStack() as stack:
        (a, worker_a), (b, _) = two_workers(stack, tmp_path, url)
        ports = [int(base.rsplit(":", 1)[1]) for base in (a, b)]
        proxy = await asyncio.start_server(partial(relay, ports), "127.0.0.1", 0)
        async with proxy:
            base = f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}"
            shown = await on_page(case, base, SIGNOFF_KILL_PID=str(worker_a.pid), SIGNOFF_SIGNAL=kill.name)
        if kill is signal.SIGTERM:
            await stopped(worker_a, tmp_path)
        else:
            assert worker_a.poll() == -signal.SIGKILL
    assert runs(tmp_path) == {"Page": 1}
    assert '"recipient": "Page"' in shown["reply"], shown
    return shown


async def test_the_page_follows_its_chat_onto_the_other_worker_when_its_own_is_killed(
    url: str, tmp_path: Path
) -> None:
    await killed_under_the_page(tmp_path, url, "blocking", signal.SIGKILL)


@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
async def test_the_live_page_opens_a_new_socket_and_resumes_when_its_worker_goes(
    url: str, tmp_path: Path, kill: signal.Signals
) -> None:
    """The live page's socket closes with its worker (SIGKILL: no close frame; SIGTERM: the turn ends in an
    `error` and `[DONE]`, then 1012): the page opens one on the other worker by itself and sends `resume`."""
    shown = await killed_under_the_page(tmp_path, url, "live", kill)
    assert shown["opened"] >= 2 and shown["resumes"] >= 1, shown


async def test_a_page_opened_on_a_chat_whose_reply_was_cut_follows_it_to_its_end(
    url: str, tmp_path: Path
) -> None:
    """A blocking reply's worker dies; the chat reads as not running (an old client resends it, as
    tests/test_scaling.py does) but `cut`; the approval is decided; a page opened then continues the reply."""
    with ExitStack() as stack:
        (a, worker_a), (b, _) = two_workers(stack, tmp_path, url)
        async with httpx.AsyncClient(timeout=120) as client:
            await client.get(f"{a}/")  # a page's session, whose chat it is
            cookie = client.cookies["signoff_session"]
            body = user("fresh-page", "pay 9 USD to Fresh", wait="blocking")
            streaming = asyncio.ensure_future(client.post(f"{a}/api/chat", json=body))
            approval = await parked(client, b, url, "fresh-page")
            assert not (await client.get(f"{b}/api/chat/fresh-page")).json()["cut"]  # it runs, on a
            worker_a.send_signal(signal.SIGKILL)
            await asyncio.to_thread(worker_a.wait, 60)
            with pytest.raises(httpx.TransportError):
                await streaming
            for _ in range(1200):  # until the dead worker's heartbeats are overdue
                view = (await client.get(f"{b}/api/chat/fresh-page")).json()
                if view["cut"]:
                    break
                assert view["running"], view
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the chat never read as cut")
            assert not view["running"]
            await approve(client, b, approval["id"])
            shown = await on_page("fresh", b, SIGNOFF_CHAT="fresh-page", SIGNOFF_COOKIE=cookie)
            after = (await client.get(f"{b}/api/chat/fresh-page")).json()
            assert not after["cut"] and not after["running"], after
    assert '"recipient": "Fresh"' in shown["reply"], shown
    assert runs(tmp_path) == {"Fresh": 1}


async def relay(ports: list[int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One connection of the proxy: to the first worker that takes it, bytes both ways until either ends."""
    for port in ports:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            break
        except OSError:  # that worker is gone
            continue
    else:
        writer.close()
        return

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            sink.close()

    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
