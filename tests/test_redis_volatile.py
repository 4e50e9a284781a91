"""Issue 43, item 3: a volatile or wiped Redis is refused or noticed.

A Redis that keeps nothing on disk lost 20 pending approvals on a restart, and nothing said so: the list
read `[]`, the blocking streams kept sending keep-alives for approvals that no longer existed. Now `serve`
and `mcp-gateway` read its persistence settings at start-up and refuse such a Redis, naming the fix,
unless `--redis-volatile` accepts the loss. And each Redis ledger holds an epoch marker made with it: a
worker that finds it gone or another's says "the Redis ledger lost its data" once, turns not ready, ends
every waiter with an `error` chunk saying its approval is gone, and writes nothing more.

Every Redis here is the test's own, on a free port, killed at the end (the machine's own serves other
tests, and keeps nothing on disk itself). Real `signoff serve` processes throughout, but for the ledger's
own guarantees, which a ledger in the test's process shows more directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.errors import LedgerUnavailable, LedgerWiped
from signoff.ledger import Ledger, open_ledger
from signoff.ledger.base import outage_of, probe
from tests.chats import chunks, user
from tests.conftest import SIGNOFF
from tests.servers import signoff_server
from tests.test_faults import AUTH, TOKEN, asked, free_port, needs, serving

NOTICED_WITHIN = 10.0
"""A generous bound on how long a worker may take to notice a wipe: its probe looks twice a second, so it
takes about one (the figure is printed)."""


@contextlib.contextmanager
def own_redis(directory: Path, *settings: str, port: int | None = None) -> Iterator[int]:
    """A Redis server of the test's own on `port` (by default a free one), keeping nothing on disk unless
    `settings` say otherwise (they come last, so they win); killed afterwards."""
    needs("a Redis server of the test's own", "redis-server", root=False)
    port = port or free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(directory), "--daemonize", "no", *settings]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while cli(port, "ping") != "PONG":
            assert server.poll() is None, f"redis-server {settings} exited with {server.returncode}"
            time.sleep(0.05)
        yield port
    finally:
        server.kill()
        server.wait(30)


def cli(port: int, *command: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *command], capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip()


def refused(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`signoff ARGS`, which is expected to refuse to start: its output once it exited."""
    env = {"SIGNOFF_AUDIT_KEY_FILE": str(directory / "keys" / "audit.key"), "COLUMNS": "300"}
    return subprocess.run(
        [SIGNOFF, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, **env}, cwd=directory,
    )  # fmt: skip


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("command", ["serve", "mcp-gateway"])
def test_a_redis_that_keeps_nothing_on_disk_is_refused_at_startup(tmp_path: Path, command: str) -> None:
    """One line naming the Redis, what it keeps and the fix, a failed exit, and nothing written to it."""
    with own_redis(tmp_path) as port:
        url = f"redis://127.0.0.1:{port}/0"
        given = {
            "serve": ["serve", "--agent", "tests.scale_agent:agent"],
            "mcp-gateway": ["mcp-gateway", "--stdio", "--upstream-url", "http://127.0.0.1:9/mcp"],
        }
        done = refused(tmp_path, *given[command], "--ledger", url)  # fmt: skip
        assert done.returncode != 0
        assert errors(done.stderr) == [
            f'error: the Redis at {url} keeps nothing on disk (appendonly no, save ""): turn on appendonly'
            " yes, or pass --redis-volatile to accept losing every approval on a restart"
        ], done.stderr
        assert cli(port, "dbsize") == "0", "the refused server wrote to the Redis"


def test_a_redis_that_will_not_say_is_refused_the_same_way(tmp_path: Path) -> None:
    """A managed Redis that renames or refuses CONFIG can't be told from one that keeps nothing: it is
    refused, saying why, unless `--redis-volatile` accepts that."""
    with own_redis(tmp_path, "--rename-command", "CONFIG", "") as port, ExitStack() as stack:
        url = f"redis://127.0.0.1:{port}/0"
        done = refused(tmp_path, "serve", "--agent", "tests.scale_agent:agent", "--ledger", url)
        (line,) = errors(done.stderr)
        assert done.returncode != 0
        assert line.startswith(f"error: the Redis at {url} does not answer CONFIG GET (")
        assert "so whether it keeps anything on disk can't be told" in line and "--redis-volatile" in line
        args, env = serving(url, tmp_path, "--redis-volatile")
        base, _ = stack.enter_context(signoff_server(tmp_path, args, TOKEN, env=env, timeout=60))
        assert httpx.get(f"{base}/readyz", timeout=30).status_code == 200


@pytest.mark.parametrize(
    "settings",
    [(), ("--appendonly", "yes"), ("--save", "3600 1")],
    ids=["accepted-with-redis-volatile", "appendonly-yes", "snapshots"],
)
def test_a_persistent_redis_or_one_accepted_as_volatile_serves(
    tmp_path: Path, settings: tuple[str, ...]
) -> None:
    with own_redis(tmp_path, *settings) as port, ExitStack() as stack:
        volatile = () if settings else ("--redis-volatile",)
        args, env = serving(f"redis://127.0.0.1:{port}/0", tmp_path, *volatile)
        base, _ = stack.enter_context(signoff_server(tmp_path, args, TOKEN, env=env, timeout=60))
        assert httpx.get(f"{base}/readyz", timeout=30).text == "ready\n"
        assert cli(port, "exists", "signoff:epoch") == "1"


async def not_ready(client: httpx.AsyncClient) -> str:
    """What `/readyz` says once it is not ready."""
    while (response := await client.get("/readyz")).status_code == 200:
        await asyncio.sleep(0.05)
    return response.text


async def test_a_flushed_redis_under_two_workers_is_noticed_and_every_waiter_told(tmp_path: Path) -> None:
    """Two `signoff serve` processes on one Redis, three blocking chats parked on each; the Redis is
    flushed. Each worker turns not ready, saying why, logs it once, and ends every stream it holds with an
    `error` chunk saying the approval is gone; its ledger calls are 503s, and nothing is written anew."""
    per = 3
    with own_redis(tmp_path) as port, ExitStack() as stack:
        args, env = serving(f"redis://127.0.0.1:{port}/0", tmp_path, "--redis-volatile")
        bases = [
            stack.enter_context(signoff_server(tmp_path, args, TOKEN, env=env, name=f"w{i}", timeout=60))[0]
            for i in range(2)
        ]
        async with contextlib.AsyncExitStack() as later:
            workers = [
                await later.enter_async_context(httpx.AsyncClient(base_url=base, timeout=60))
                for base in bases
            ]
            streams = [
                asyncio.ensure_future(
                    client.post(
                        "/api/chat", json=user(f"w{w}-{n}", f"pay {n + 1} USD to w{w}r{n}", wait="blocking")
                    )
                )
                for w, client in enumerate(workers)
                for n in range(per)
            ]
            pending = await asked(workers[0], 2 * per)
            assert len(pending) == 2 * per

            assert cli(port, "flushall") == "OK"
            flushed = time.monotonic()
            said = await asyncio.wait_for(asyncio.gather(*(not_ready(c) for c in workers)), NOTICED_WITHIN)
            noticed = time.monotonic() - flushed
            replies = await asyncio.wait_for(asyncio.gather(*streams), NOTICED_WITHIN)
            listed = await asyncio.gather(*(c.get("/api/approvals", headers=AUTH) for c in workers))
            written = cli(port, "exists", "signoff:epoch", "signoff:audit", "signoff:head")
    print(f"a flushed Redis: both workers not ready {noticed:.2f} s after the flush")
    for text in said:
        assert "the Redis ledger lost its data" in text and "every approval it held is gone" in text, text
    for reply in replies:
        last = [c for c in chunks(reply.text) if c["type"] == "error"]
        assert len(last) == 1, reply.text
        assert " is gone: the Redis ledger lost its data" in last[0]["errorText"], last
        assert reply.text.endswith("data: [DONE]\n\n"), reply.text
        assert any(p["id"] in last[0]["errorText"] for p in pending)
    for answer in listed:
        assert answer.status_code == 503 and "lost its data" in answer.json()["error"]["message"], answer.text
    for i in range(2):
        log = (tmp_path / f"w{i}.stderr").read_text()
        assert log.count("the Redis ledger lost its data") == 1, log
        assert "Traceback" not in log, log
    assert written == "0", "a worker wrote the ledger anew"


async def ask(ledger: Ledger, n: int) -> Approval:
    call = ToolCall(f"c{n}", "pay", {"n": n})
    return await ledger.approvals.open(call, chat_id="chat", description=f"pay {n}", rule="pay")


async def test_a_redis_restarted_empty_is_wiped_and_a_write_after_it_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The other way a Redis loses its data: killed, and started again with nothing on disk. The outage is
    said, then the loss, once each; the waiter in the process is told its approval is gone; and a write
    by a process that has not looked yet is refused by the write itself, never chained onto an empty
    ledger."""
    caplog.set_level(logging.WARNING, logger="signoff.ledger")
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(own_redis(tmp_path, port=port))
        ledger = await stack.enter_async_context(open_ledger(url, timeout=1.0))
        other = await stack.enter_async_context(open_ledger(url, timeout=1.0))
        opened = await ask(ledger, 1)
        waiting = asyncio.ensure_future(ledger.approvals.wait(opened.id))
        while not ledger._shared.watcher._running.running:  # it read the approval, and waits
            await asyncio.sleep(0.01)
        await probe(ledger)
        assert cli(port, "shutdown", "nosave") == ""
        with pytest.raises(LedgerUnavailable) as away:
            await probe(ledger)
        assert not isinstance(away.value, LedgerWiped) and not waiting.done()

        stack.enter_context(own_redis(tmp_path, port=port))  # the same port, started again with nothing
        with pytest.raises(
            LedgerWiped, match=r"the Redis ledger lost its data: .* no longer holds the epoch"
        ):
            await probe(ledger)
        with pytest.raises(
            LedgerWiped, match=f"approval {opened.id} is gone: the Redis ledger lost its data"
        ):
            await asyncio.wait_for(waiting, NOTICED_WITHIN)
        with pytest.raises(LedgerWiped):
            await ledger.approvals.wait(opened.id)
        with pytest.raises(LedgerWiped, match="lost its data"):
            await ask(other, 9)
        assert cli(port, "exists", "signoff:audit", "signoff:head", "signoff:epoch") == "0"
        with pytest.raises(LedgerWiped):  # still: no answer ends it
            await probe(ledger)
        assert outage_of(ledger).wiped
    said = [r.getMessage() for r in caplog.records if r.name == "signoff.ledger"]
    assert [line.split(":")[0] for line in said].count("the Redis ledger lost its data") == 2, said
    assert sum(line.startswith("ledger unavailable") for line in said) == 1, said
