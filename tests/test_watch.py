"""What operators watch (issue 33): `/healthz` and `/readyz` without a credential, revealing nothing else,
and `/metrics` in the Prometheus text format for the admin only, with figures every worker agrees on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.ledger import Ledger, SqliteLedger
from signoff.server.app import Settings, create_app
from tests.chats import AUTH, TOKEN
from tests.servers import in_loop


@contextlib.asynccontextmanager
async def worker(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(demo_agent(), ledger, Settings(token=TOKEN, anonymous=True), policy=demo_policy())
    async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=10) as client:
        yield client


def figures(text: str) -> dict[str, float]:
    """Each sample as `name{label="value"}` (labels sorted), to its value."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


async def open_one(ledger: Ledger, n: int) -> str:
    call = ToolCall(f"c{n}", "process_payment", {"amount": n})
    return (await ledger.approvals.open(call, chat_id="chat", description="pay", rule="r", deadline=None)).id


async def test_probes_answer_anyone_by_any_name_and_say_nothing_else(tmp_path: Path) -> None:
    async with SqliteLedger(tmp_path / "l.db") as ledger, worker(ledger) as client:
        alive = await client.get("/healthz", headers={"host": "10.1.2.3:8000"})  # a pod's own address
        assert (alive.status_code, alive.text) == (200, "ok\n")
        ready = await client.get("/readyz", headers={"host": "10.1.2.3:8000"})
        assert (ready.status_code, ready.text) == (200, "ready\n")
        foreign = await client.get("/metrics", headers={"host": "evil.example", **AUTH})
        assert foreign.status_code == 400  # the metrics keep the Host check
        assert "set-cookie" not in alive.headers and "set-cookie" not in ready.headers


async def test_a_worker_whose_ledger_does_not_answer_is_not_ready(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "l.db")
    await ledger.start()
    async with worker(ledger) as client:
        await ledger.close()  # the ledger stops answering while the process still runs
        for _ in range(60):  # /readyz answers at once from what the probe, twice a second, last found
            if (ready := await client.get("/readyz")).status_code != 200:
                break
            await asyncio.sleep(0.05)
        assert ready.status_code == 503 and ready.text.startswith("not ready: ledger unavailable: ")
        assert (await client.get("/healthz")).status_code == 200


async def test_metrics_are_the_admins_alone(tmp_path: Path) -> None:
    async with SqliteLedger(tmp_path / "l.db") as ledger, worker(ledger) as client:
        _, token = await ledger.principals.register("alice", ["finance"], actor="setup")
        assert (await client.get("/metrics")).status_code == 401
        refused = await client.get("/metrics", headers={"authorization": f"Bearer {token}"})
        assert refused.status_code == 403
        assert any(e.action == "refuse" and e.actor == "alice" for e in await ledger.audit.entries())
        shown = await client.get("/metrics", headers=AUTH)
        assert shown.status_code == 200 and shown.headers["content-type"].startswith("text/plain")


async def test_every_worker_counts_every_approval_the_ledger_holds(tmp_path: Path) -> None:
    """Two workers over one SQLite ledger, one of them started after the approvals: each scrape, from
    either, gives the same totals, folded from the audit chain the workers share."""
    async with SqliteLedger(tmp_path / "l.db") as ledger, worker(ledger) as first:
        ids = [await open_one(ledger, n) for n in range(4)]
        await ledger.approvals.decide(ids[0], Decision.approve("bob"))
        await ledger.approvals.decide(ids[1], Decision.deny("bob", "no"))
        await ledger.approvals.cancel(ids[2], "bob", "moved on")
        before = figures((await first.get("/metrics", headers=AUTH)).text)
        assert before["signoff_approvals_opened_total"] == 4
        assert before['signoff_approvals_decided_total{outcome="approved"}'] == 1
        assert before['signoff_approvals_decided_total{outcome="denied"}'] == 1
        assert before['signoff_approvals_decided_total{outcome="cancelled"}'] == 1
        assert before["signoff_approvals_pending"] == 1
        assert before["signoff_approval_decision_seconds_count"] == 3
        async with (
            SqliteLedger(tmp_path / "l.db", keyring=ledger.audit.keyring) as other,
            worker(other) as second,
        ):
            late = await open_one(other, 9)
            await other.approvals.decide(late, Decision.approve("carol"))
            seen = [figures((await c.get("/metrics", headers=AUTH)).text) for c in (first, second)]
        assert seen[0] == seen[1]
        assert seen[0]["signoff_approvals_opened_total"] == 5
        assert seen[0]['signoff_approvals_decided_total{outcome="approved"}'] == 2
        assert seen[0]["signoff_approvals_pending"] == 1


async def test_an_expiry_counts_as_expired_whatever_its_deadline_let_happen(tmp_path: Path) -> None:
    """Nobody decided either: one deadline denied its call, the other let it run (`on_timeout = allow`)."""
    async with SqliteLedger(tmp_path / "l.db") as ledger, worker(ledger) as client:
        for n, on_timeout in enumerate(("deny", "allow")):
            call = ToolCall(f"c{n}", "process_payment", {"amount": n})
            opened = await ledger.approvals.open(
                call, chat_id="chat", description="pay", rule="r", deadline=0.0, on_timeout=on_timeout
            )
            await asyncio.sleep(0.01)
            await ledger.approvals.expire(opened.id)
        shown = figures((await client.get("/metrics", headers=AUTH)).text)
        assert shown['signoff_approvals_decided_total{outcome="expired"}'] == 2
        assert shown['signoff_approvals_decided_total{outcome="denied"}'] == 0
        assert shown['signoff_approvals_decided_total{outcome="approved"}'] == 0
        assert shown["signoff_approvals_pending"] == 0


def test_metrics_port_serves_every_workers_figures_without_a_credential(tmp_path: Path) -> None:
    """`--metrics-port` with two workers: both bind it, and whichever answers serves the ledger's figures
    without a credential; the main port's /metrics stays the admin's. A port taken by another program
    refuses to start, in one line."""
    import socket
    import subprocess
    import time

    from tests.conftest import SIGNOFF
    from tests.servers import signoff_server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "myagent.py").write_text("from pydantic_ai import Agent\nagent = Agent('test')\n")
    url = f"sqlite:///{tmp_path / 'm.db'}"
    args = [
        "serve",
        "--agent",
        "myagent:agent",
        "--ledger",
        url,
        "--workers",
        "2",
        "--metrics-port",
        str(port),
    ]
    with signoff_server(tmp_path, args, "tok", env={"PYTHONPATH": str(tmp_path)}, timeout=30) as (base, _):
        deadline = time.monotonic() + 20
        while True:  # the workers bind it as each starts, after the parent says it listens
            try:
                httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "nothing listens on --metrics-port"
                time.sleep(0.1)
        seen = [httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10) for _ in range(6)]
        assert {r.status_code for r in seen} == {200}
        assert all(figures(r.text)["signoff_approvals_opened_total"] == 0 for r in seen)
        assert httpx.get(f"{base}/metrics", timeout=10).status_code == 401

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        result = subprocess.run(
            [SIGNOFF, "serve", "--agent", "myagent:agent", "--ledger", url, "--metrics-port", str(busy),
             "--port", "0"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
            env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
        )  # fmt: skip
    assert result.returncode != 0
    assert f"--metrics-port {busy}: cannot listen on 127.0.0.1" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
