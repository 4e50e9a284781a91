"""The ledger's faults as a user meets them (issue 43): a database that stops, a disk that fills, a Redis out
of memory. Every request gets an answer within the ledger timeout (a 503 with `Retry-After`, or an `error`
chunk on a stream), `/readyz` says why it is not ready within a probe or two and turns ready as soon after
the ledger's return, the log says each outage once, and afterwards nothing is lost and nothing runs twice.

The outages are real: a PostgreSQL cluster and a Redis server of the test's own, stopped and started (the
machine's own serve other tests and must never stop), and a SQLite ledger on a tmpfs of 2 MB filled to
the last byte. Times are measured per request with `time.monotonic()`: a bound on a hang, with a margin.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import websockets
from pydantic_ai import Agent

from signoff.core.errors import LedgerUnavailable, LedgerUnwritable
from signoff.core.policy import Policy
from signoff.ledger import Ledger, MemoryLedger, open_ledger
from signoff.ledger.base import outage_of, probe
from signoff.ledger.outage import Outage
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.redis import RedisLedger
from signoff.ledger.sqlite import SqliteLedger
from signoff.ledger.url import TIMEOUT
from signoff.server.app import Settings, create_app
from signoff.server.http import RETRY_AFTER, refusal
from signoff.server.run import _logging
from tests.chats import answer, chunks, user
from tests.conftest import ROOT, SIGNOFF, drop_url, shared_url
from tests.servers import in_loop, signoff_server
from tests.workers import payment

OUTAGE = 40.0
"""Seconds PostgreSQL stays down under two workers; the issue measured 78 s. It may be cut to about 15 s if
the suite's time demands it: everything asserted holds from the first probe on."""
ANSWERED_WITHIN = 6.0
"""Seconds any request may take while the ledger is away: the default ledger timeout (5 s) and a margin."""
FLIPS_WITHIN = 2.0
"""Seconds `/readyz` may take to say not ready after the ledger stops, and ready after it is back."""
IN_CI = os.environ.get("CI") == "true"
TOKEN = "faults-" + os.urandom(6).hex()
AUTH = {"authorization": f"Bearer {TOKEN}"}
POLICY = str(ROOT / "src" / "signoff" / "demo" / "policy.toml")


def needs(what: str, tool: str, *, root: bool) -> None:
    """Skip where `what` can't be made here (no `tool`, or not root where it takes root); with CI=true,
    which runs as root with every tool, fail instead."""
    if shutil.which(tool) is not None and (os.geteuid() == 0 or not root):
        return
    why = f"{what} needs {tool}{' and root' if root else ''}"
    if IN_CI:
        pytest.fail(why)
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return int(probe_socket.getsockname()[1])


@dataclass(frozen=True)
class Cluster:
    """A PostgreSQL cluster of the test's own: stopping it stops nobody else's work."""

    version: str
    name: str
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?schema=faults"

    def ctl(self, action: str) -> None:
        command = ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action]
        fast = ["-m", "fast"] if action == "stop" else []
        subprocess.run([*command, *fast], check=True, capture_output=True, timeout=60)

    def sql(self, statement: str) -> None:
        with psycopg.connect(self.server, autocommit=True) as db:
            db.execute(statement.encode())

    async def probed_by(self, workers: int) -> None:
        """Once `workers` processes probe the database: a worker's readiness probe asks `SELECT 1` on a
        connection of its own, from the moment its startup ended. uvicorn stops every worker when one fails
        to start, as one still starting when the database stops does (the parent opened the ledger first,
        and each worker opens its own as it starts)."""
        query = b"SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT 1'"
        while True:
            async with await psycopg.AsyncConnection.connect(self.server) as db:
                row = await (await db.execute(query)).fetchone()
            if row is not None and row[0] >= workers:
                return
            await asyncio.sleep(0.05)

    @property
    def server(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    async def start(self) -> tuple[float, asyncio.Future[None]]:
        """Start the cluster again: when it first answered a connection (monotonic), some time before
        `pg_ctlcluster` returns, and `pg_ctlcluster` still running, to await."""
        starting = asyncio.ensure_future(asyncio.to_thread(self.ctl, "start"))
        while True:
            with contextlib.suppress(psycopg.OperationalError):
                async with await psycopg.AsyncConnection.connect(self.server, connect_timeout=1):
                    return time.monotonic(), starting
            await asyncio.sleep(0.02)


@contextlib.contextmanager
def postgres_cluster() -> Iterator[Cluster]:
    needs("a PostgreSQL cluster of the test's own", "pg_createcluster", root=True)
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    cluster = Cluster(version, f"faults{uuid.uuid4().hex[:8]}", free_port())
    create = ["pg_createcluster", version, cluster.name, "-p", str(cluster.port), "--", "--auth=trust"]
    subprocess.run(create, check=True, capture_output=True, timeout=120)
    try:
        cluster.ctl("start")
        yield cluster
    finally:
        subprocess.run(["pg_dropcluster", "--stop", version, cluster.name], capture_output=True, timeout=120)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[int]:
    """A Redis server of the test's own, on a free port, that keeps nothing on disk."""
    needs("a Redis server of the test's own", "redis-server", root=False)
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(directory), "--daemonize", "yes", "--logfile", str(directory / "redis.log")]
    subprocess.run(command, check=True, timeout=30)
    try:
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout != b"PONG\n":
            time.sleep(0.05)
        yield port
    finally:
        subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True, timeout=30)


@contextlib.contextmanager
def small_disk(directory: Path) -> Iterator[Path]:
    """A tmpfs of 2 MB at `directory`, unmounted afterwards."""
    needs("a tmpfs to fill", "mount", root=True)
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(directory)], check=True, timeout=30)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=30)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no byte left; the file, to delete to free it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, bytes(4096))
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0")
    finally:
        os.close(fd)
    return filler


@dataclass(frozen=True)
class Answer:
    what: str
    seconds: float
    status: int
    headers: httpx.Headers
    body: str

    def refused_for_now(self) -> bool:
        """A 503 JSON error to try again after `Retry-After`, or a reply that ended with an `error` chunk."""
        if self.status == 200 and self.headers.get("content-type", "").startswith("text/event-stream"):
            return any(c["type"] == "error" for c in chunks(self.body)) and self.body.count("[DONE]") == 1
        if self.what == "readyz":
            return self.status == 503 and self.body.startswith("not ready: ")
        error = json.loads(self.body)["error"] if self.status == 503 else None
        return bool(error and error["message"]) and self.headers.get("retry-after") == str(RETRY_AFTER)


async def timed(what: str, request: Awaitable[httpx.Response]) -> Answer:
    started = time.monotonic()
    response = await request
    return Answer(what, time.monotonic() - started, response.status_code, response.headers, response.text)


async def live_message(base: str, chat: str, text: str) -> Answer:
    """A `message` frame on the live socket: the frames up to its `[DONE]`, as an answer's body."""
    started = time.monotonic()
    frames = []
    async with websockets.connect(base.replace("http://", "ws://") + "/api/live") as live:
        await live.send(json.dumps({"type": "message", **user(chat, text)}))
        while (frame := await live.recv()) != "[DONE]":
            frames.append(frame)
    seconds = time.monotonic() - started
    body = "".join(f"data: {frame}\n\n" for frame in [*frames, "[DONE]"])
    return Answer("live", seconds, 200, httpx.Headers({"content-type": "text/event-stream"}), body)


async def ready_since(client: httpx.AsyncClient, ready: bool, *, since: float, limit: float) -> float:
    """Seconds after `since` from which `/readyz` says `ready` (or not) on every look, each on a new
    connection so that both workers are asked, eight looks in a row at least; fails after `limit` s."""
    run_from, run = None, 0
    while run < 8:
        looked = time.monotonic()
        assert looked - since < limit, f"/readyz did not turn {'ready' if ready else 'not ready'}"
        response = await client.get("/readyz")
        if (response.status_code == 200) == ready:
            run_from, run = (run_from or looked), run + 1
        else:
            run_from, run = None, 0
        await asyncio.sleep(0.05)
    assert run_from is not None
    return run_from - since


def tracebacks(stderr: str) -> list[str]:
    """The tracebacks in a server's stderr, each with the line before it."""
    lines = stderr.splitlines()
    starts = [at for at, line in enumerate(lines) if line.startswith("Traceback")]
    return ["\n".join(lines[max(0, at - 1) : at + 20]) for at in starts]


def runs(tmp_path: Path) -> Counter[str]:
    path = tmp_path / "runs.jsonl"
    return Counter(json.loads(line)["recipient"] for line in path.read_text().splitlines())


def serving(url: str, tmp_path: Path, *more: str) -> tuple[list[str], dict[str, str]]:
    """`signoff serve` with the agent that counts its payments, and the environment it runs in."""
    args = ["serve", "--agent", "tests.scale_agent:agent", "--policy", POLICY, "--ledger", url]
    args += ["--anonymous-chats", "--keepalive", "1", *more]
    return args, {"SIGNOFF_TEST_RUNS": str(tmp_path / "runs.jsonl"), "PYTHONPATH": str(ROOT)}


async def asked(client: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    """The pending approvals, once there are `count`."""
    while True:
        found: list[dict[str, Any]] = (await client.get("/api/approvals?state=pending", headers=AUTH)).json()[
            "approvals"
        ]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)


def decision(client: httpx.AsyncClient, approval: dict[str, Any]) -> Awaitable[httpx.Response]:
    return client.post(f"/api/approvals/{approval['id']}/decision", json={"approved": True}, headers=AUTH)


def continuation(
    client: httpx.AsyncClient, first: dict[str, Any], reply: list[Any]
) -> Awaitable[httpx.Response]:
    """The request that answers a deferred chat's question, approving it."""
    return client.post("/api/chat", json=answer(first, reply, [(True, "")]))


async def test_postgresql_stopped_under_two_workers(tmp_path: Path) -> None:
    """Three deferred chats asked and one blocking chat parked, then the database stopped for `OUTAGE`
    seconds: every decision, list, new chat, continuation, live message and `/readyz` meanwhile is answered
    within the ledger timeout, and told to try again; afterwards every payment runs once."""
    with postgres_cluster() as cluster, ExitStack() as stack:
        args, env = serving(cluster.url, tmp_path, "--workers", "2")
        base, _ = stack.enter_context(signoff_server(tmp_path, args, TOKEN, env=env, timeout=60))
        fresh = httpx.Limits(max_keepalive_connections=0)  # each request accepted anew: by either worker
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=fresh) as client:
            firsts = [user(f"deferred-{n}", f"pay {n + 1} USD to d{n}") for n in range(3)]
            replies = [chunks((await client.post("/api/chat", json=body)).text) for body in firsts]
            blocking = asyncio.ensure_future(
                client.post("/api/chat", json=user("blocking", "pay 7 USD to b0", wait="blocking"))
            )
            pending = await asyncio.gather(*(timed("ready", client.get("/readyz")) for _ in range(8)))
            assert {a.status for a in pending} == {200}
            approvals = await asked(client, 4)
            await asyncio.wait_for(cluster.probed_by(2), 60)  # both workers started

            await asyncio.to_thread(cluster.ctl, "stop")
            stopped = time.monotonic()
            not_ready = await ready_since(client, False, since=stopped, limit=OUTAGE)
            answers: list[Answer] = []
            n = 0
            while time.monotonic() - stopped < OUTAGE - ANSWERED_WITHIN:
                answers += await asyncio.gather(
                    timed("decision", decision(client, approvals[n % 4])),
                    timed("list", client.get("/api/approvals", headers=AUTH)),
                    timed(
                        "new chat", client.post("/api/chat", json=user(f"outage-{n}", f"pay 9 USD to o{n}"))
                    ),
                    timed("continue", continuation(client, firsts[n % 3], replies[n % 3])),
                    timed("readyz", client.get("/readyz")),
                    live_message(base, f"live-{n}", f"pay 8 USD to l{n}"),
                )
                n += 1
            await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped)))
            answered, starting = await cluster.start()
            ready = await ready_since(client, True, since=answered, limit=30)
            await starting

            for approval in approvals:
                assert (decided := await decision(client, approval)).status_code == 200, decided.text
            for first, reply in zip(firsts, replies, strict=True):
                continued = await continuation(client, first, reply)
                assert continued.status_code == 200 and continued.text.endswith("data: [DONE]\n\n")
            assert (await asyncio.wait_for(blocking, 60)).text.count("[DONE]") == 1
    stderr = (tmp_path / "serve.stderr").read_text()
    print(f"stopped for {OUTAGE:g} s: not ready after {not_ready:.2f} s, ready {ready:.2f} s after the start")
    slowest = {what: max(a.seconds for a in answers if a.what == what) for what in {a.what for a in answers}}
    print(f"{len(answers)} requests in {n} rounds; the slowest of each: {slowest}")
    assert not_ready <= FLIPS_WITHIN and ready <= FLIPS_WITHIN
    wrong = [a for a in answers if a.seconds > ANSWERED_WITHIN or not a.refused_for_now()]
    assert wrong == [], wrong[:3]
    assert runs(tmp_path) == Counter({"d0": 1, "d1": 1, "d2": 1, "b0": 1}), "a payment ran twice, or never"
    assert tracebacks(stderr) == []
    said = Counter(re.sub(r"[:\d].*", "", line) for line in stderr.splitlines() if "ledger" in line)
    assert said["ledger unavailable"] <= 2 * 3 and said["ledger back after "] <= 2 * 3, said
    assert "couldn't get a connection after 30" not in stderr


async def test_sqlite_on_a_full_disk(tmp_path: Path) -> None:
    """The disk under a SQLite ledger fills: writes are a 503 saying so (reads go on), `/readyz` says why,
    the log says it once however often the sweep and the recorder try; freed, everything runs once."""
    with small_disk(tmp_path / "disk") as disk, ExitStack() as stack:
        args, env = serving(f"sqlite:///{disk / 'signoff.db'}", tmp_path)
        base, _ = stack.enter_context(signoff_server(tmp_path, args, TOKEN, env=env, timeout=60))
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            firsts = [user(f"full-{n}", f"pay {n + 1} USD to f{n}") for n in range(3)]
            replies = [chunks((await client.post("/api/chat", json=body)).text) for body in firsts]
            approvals = await asked(client, 3)
            assert (await client.get("/readyz")).text == "ready\n"

            filler = fill(disk)
            full = time.monotonic()
            not_ready = await ready_since(client, False, since=full, limit=10)
            said = await asyncio.gather(
                timed("decision", decision(client, approvals[0])),
                timed("new chat", client.post("/api/chat", json=user("full-new", "pay 9 USD to new"))),
                timed("continue", continuation(client, firsts[1], replies[1])),
                timed("readyz", client.get("/readyz")),
            )
            read = await client.get("/api/approvals?state=pending", headers=AUTH)
            await asyncio.sleep(3)  # the sweep, the recorder and the probe keep failing meanwhile

            filler.unlink()
            freed = time.monotonic()
            ready = await ready_since(client, True, since=freed, limit=10)
            for approval in approvals:
                assert (decided := await decision(client, approval)).status_code == 200, decided.text
            for first, reply in zip(firsts, replies, strict=True):
                continued = await continuation(client, first, reply)
                assert continued.status_code == 200 and continued.text.endswith("data: [DONE]\n\n")
    print(f"disk full: not ready after {not_ready:.2f} s; freed: ready after {ready:.2f} s")
    print("\n".join(f"{a.what}: {a.status} in {a.seconds:.3f} s: {a.body.strip()}" for a in said))
    stderr = (tmp_path / "serve.stderr").read_text()
    for a in said:
        assert a.refused_for_now() and "the ledger can't write: disk full" in a.body, a
    assert said[-1].body == "not ready: the ledger can't write: disk full\n"
    assert read.status_code == 200 and len(read.json()["approvals"]) == 3  # reads still answered
    assert not_ready <= FLIPS_WITHIN and ready <= FLIPS_WITHIN
    assert runs(tmp_path) == Counter({"f0": 1, "f1": 1, "f2": 1})
    assert "Traceback" not in stderr and "Internal Server Error" not in stderr
    assert stderr.count("the ledger can't write: disk full") == 1, stderr
    assert stderr.count("ledger back after") == 1, stderr


# -- the ledger's bounds and kinds, each backend ------------------------------------------------------------


def test_open_ledger_bounds_every_wait_with_one_timeout(tmp_path: Path) -> None:
    """Nothing connects: the bounds are what each backend is built with."""
    for timeout in (None, 1.5):
        given = {} if timeout is None else {"timeout": timeout}
        seconds = TIMEOUT if timeout is None else timeout
        sqlite = open_ledger(f"sqlite:///{tmp_path / 'x.db'}", **given)
        postgres = open_ledger("postgresql://nowhere/db", **given)
        redis = open_ledger("redis://nowhere:6379/0", **given)
        assert isinstance(sqlite, SqliteLedger) and sqlite._backend.wait_ms == seconds * 1000
        assert isinstance(postgres, PostgresLedger) and isinstance(redis, RedisLedger)
        assert (postgres._backend.pooling.connect_timeout, postgres._backend.pooling.pool_timeout) == (
            seconds,
            seconds,
        )
        pooling = redis._backend.pooling
        assert (pooling.connect_timeout, pooling.pool_timeout, pooling.socket_timeout) == (seconds,) * 3
    assert TIMEOUT == 5.0


async def test_a_queue_for_a_redis_connection_is_not_taken_for_a_slow_redis(tmp_path: Path) -> None:
    """CI, 2026-11-28: under 1,000 chats on two workers, a call that waited its turn for one of the pool's
    connections was timed as if Redis had been slow, and a blocking chat on a healthy ledger ended with
    "took over 5 s". Its turn is bounded by `pool_timeout`, and only the server's answer by
    `socket_timeout`: five calls of 0.3 s of the server's time each, through one connection, all answer
    within a socket timeout of 0.5 s; with a turn bounded at 0.4 s, those queued longer are refused."""
    url = shared_url("redis", tmp_path)
    base, prefix = url.split("?prefix=")
    try:
        for pool_timeout, answered in ((5.0, 5), (0.4, 2)):
            async with RedisLedger(
                base, prefix=prefix, pool_size=1, socket_timeout=0.5, pool_timeout=pool_timeout
            ) as ledger:
                slow = functools.partial(_blpop, key=ledger._backend.key("never"))  # 0.3 s of Redis's time
                calls = (ledger._backend.call(slow) for _ in range(5))
                outcomes = await asyncio.gather(*calls, return_exceptions=True)
            assert outcomes.count(None) == answered, outcomes
            refused = [o for o in outcomes if o is not None]
            assert all(isinstance(o, LedgerUnavailable) for o in refused)
            assert all("no connection came free within 0.4 s" in str(o) for o in refused)
    finally:
        await drop_url(url)


def _blpop(redis: Any, key: str) -> Any:
    return redis.blpop([key], timeout=0.3)


def test_a_ledger_that_cannot_answer_is_a_503_to_retry() -> None:
    for exc in (LedgerUnavailable("the PostgreSQL ledger x failed: gone"), LedgerUnwritable("disk full")):
        answer_ = refusal(exc)
        assert answer_.status_code == 503 and answer_.headers["retry-after"] == str(RETRY_AFTER)
        assert json.loads(bytes(answer_.body)) == {"error": {"message": str(exc)}}
    assert str(LedgerUnwritable("read-only")) == "the ledger can't write: read-only"


def test_an_outage_is_said_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    outage = Outage(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "signoff.ledger"):
        for _ in range(50):
            outage.failed(LedgerUnavailable("the server is gone"))
        outage.recovered(wrote=False)
        now[0] += 78
        outage.failed(LedgerUnwritable("disk full"))  # then it answers, but can't write: said once more
        outage.recovered()  # a read ends no outage of writes
        assert outage.reason == "the ledger can't write: disk full"
        outage.recovered(wrote=True)
        outage.recovered(wrote=True)
    assert [r.getMessage() for r in caplog.records] == [
        "ledger unavailable: the server is gone",
        "ledger back after 0 s",
        "the ledger can't write: disk full",
        "ledger back after 0 s",
    ]
    assert outage.reason is None


@contextlib.asynccontextmanager
async def unwritable(backend: str, tmp_path: Path) -> AsyncIterator[tuple[Ledger, str, Any]]:
    """A started ledger of `backend`, what it says when it can't write, and what makes it write again,
    to call once it can't: a full disk (SQLite), a read-only server (PostgreSQL), one out of memory
    (Redis)."""
    if backend == "sqlite":
        with small_disk(tmp_path / "disk") as disk:
            async with open_ledger(f"sqlite:///{disk / 'x.db'}") as ledger:
                filler = fill(disk)
                yield ledger, "disk full", filler.unlink
        return
    if backend == "postgres":
        with postgres_cluster() as cluster:
            async with open_ledger(cluster.url) as ledger:
                cluster.sql("ALTER SYSTEM SET default_transaction_read_only = on")
                cluster.sql("SELECT pg_reload_conf()")
                await asyncio.sleep(0.5)  # every session reads it again

                def writable() -> None:
                    cluster.sql("ALTER SYSTEM RESET default_transaction_read_only")
                    cluster.sql("SELECT pg_reload_conf()")

                yield ledger, "read-only", writable
        return
    with redis_server(tmp_path) as port:
        async with open_ledger(f"redis://127.0.0.1:{port}/0") as ledger:
            config = ["redis-cli", "-p", str(port), "config", "set", "maxmemory"]
            await asyncio.to_thread(subprocess.run, [*config, "1"], check=True, capture_output=True)
            yield ledger, "out of memory (Redis OOM)", lambda: subprocess.run([*config, "0"], check=True)


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_a_ledger_that_cannot_write_says_so_and_writes_again(backend: str, tmp_path: Path) -> None:
    """No raw driver error: each backend's refusal to store is `LedgerUnwritable`, reads go on, and the
    probe (which writes only once writes failed) sees the end of it."""
    async with unwritable(backend, tmp_path) as (ledger, why, cure):
        opened = ledger.approvals.open
        with pytest.raises(LedgerUnwritable) as refused:
            await opened(payment(1), chat_id="c", description="pay", rule="r")
        assert str(refused.value) == f"the ledger can't write: {why}"
        assert await ledger.approvals.query(state="pending") == []  # nothing stored, and reads answered
        with pytest.raises(LedgerUnwritable):
            await probe(ledger)  # its read is answered, but while writes fail it writes too
        assert outage_of(ledger).reason == f"the ledger can't write: {why}"
        await asyncio.to_thread(cure)
        for _ in range(100):  # a server takes its new settings at its own pace, as the probe finds
            with contextlib.suppress(LedgerUnwritable):
                await probe(ledger)
            if outage_of(ledger).reason is None:
                break
            await asyncio.sleep(0.05)
        assert outage_of(ledger).reason is None
        approval = await opened(payment(1), chat_id="c", description="pay", rule="r")
        assert [a.id for a in await ledger.approvals.query(state="pending")] == [approval.id]


async def test_a_new_chat_while_redis_is_down_is_a_503_not_a_409(tmp_path: Path) -> None:
    """In-process, as a host app serves it: the chat's begin met an unavailable ledger, which is the
    ledger's answer (503, retry), never the chat's (409, it cannot continue); and the live socket says so
    with an `error` chunk and `[DONE]`."""
    with redis_server(tmp_path) as port:
        async with open_ledger(f"redis://127.0.0.1:{port}/0", timeout=1.0) as ledger:
            app = create_app(Agent("test"), ledger, Settings(token="admin", anonymous=True), policy=Policy())
            async with in_loop(app) as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
                shutdown = ["redis-cli", "-p", str(port), "shutdown", "nosave"]
                await asyncio.to_thread(subprocess.run, shutdown, capture_output=True)
                said = await timed("new chat", client.post("/api/chat", json=user("outage-3", "hello")))
                live = await live_message(f"http://{address}", "outage-4", "hello")
                for _ in range(40):
                    if (ready := await client.get("/readyz")).status_code == 503:
                        break
                    await asyncio.sleep(0.05)
    print(f"Redis down: a new chat {said.status} in {said.seconds:.2f} s, live socket {live.seconds:.2f} s")
    assert said.status == 503 and said.refused_for_now(), said
    assert said.seconds < 1.0 + 1.0 and live.seconds < 1.0 + 1.0  # the ledger timeout, and a margin
    assert "Redis ledger" in json.loads(said.body)["error"]["message"]
    assert live.refused_for_now() and "Redis ledger" in live.body, live
    assert ready.text.startswith("not ready: ledger unavailable: ")


def test_the_servers_log_says_nothing_per_failed_connection() -> None:
    """psycopg's pool warns at every try to connect while the database is down: a server says only its
    errors; the ledger's outage is said once by signoff itself."""
    assert _logging()["loggers"]["psycopg.pool"] == {"level": "ERROR"}


def test_ledger_timeout_reaches_every_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--ledger-timeout` is one of the options every serving command takes, handed to each worker in
    `Served`, which opens its own ledger with it."""
    import msgspec

    from signoff.cli import worker
    from signoff.cli.serving import Serving

    served = Serving(ledger=f"sqlite:///{tmp_path / 'x.db'}", ledger_timeout=2.5).served()
    handed = msgspec.json.decode(msgspec.json.encode(served), type=worker.Served)
    opened: list[float] = []

    def opening(url: str | None, *, timeout: float) -> Ledger:
        opened.append(timeout)
        raise LedgerUnavailable("not this time")

    monkeypatch.setattr(worker, "open_ledger", opening)
    messages = iter([{"type": "lifespan.startup"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(worker.Worker(handed)({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]
    assert opened == [2.5] and sent[0]["type"] == "lifespan.startup.failed"
    help_text = subprocess.run(
        [SIGNOFF, "serve", "--help"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout  # fmt: skip
    assert "--ledger-timeout" in help_text


async def test_a_reply_whose_ledger_fails_as_it_ends_says_so_and_ends() -> None:
    """The run went through, and its save met a ledger that can't write: the reply ends with an `error`
    chunk that says so and one `[DONE]`, on the SSE route and on the live socket alike."""
    async with MemoryLedger() as ledger:
        saving = ledger.chats.save

        async def full(chat_id: str, state: bytes, *, version: int, **more: Any) -> Any:
            if version > 0:  # the chat was claimed as the reply began; its end is what fails
                raise LedgerUnwritable("disk full")
            return await saving(chat_id, state, version=version, **more)

        ledger.chats.save = full  # type: ignore[method-assign]
        app = create_app(Agent("test"), ledger, Settings(token="admin", anonymous=True), policy=Policy())
        async with in_loop(app) as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
            said = await timed("chat", client.post("/api/chat", json=user("ending-1", "hello")))
            live = await live_message(f"http://{address}", "ending-2", "hello")
    for reply in (said, live):
        assert reply.status == 200 and reply.refused_for_now(), reply
        errors = [c["errorText"] for c in chunks(reply.body) if c["type"] == "error"]
        assert errors == ["the ledger can't write: disk full"], reply.body
