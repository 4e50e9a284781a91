"""What operators see of the outbox: each approval's deliveries in its REST JSON and in `signoff approvals
show`, `signoff outbox list` and `retry`, the outbox's metrics, and readiness that needs its worker."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import httpx
from pydantic_ai import Agent

from signoff.channels.config import Channels, WebhookChannel
from signoff.core.call import ToolCall
from signoff.core.policy import Policy
from signoff.ledger import SqliteLedger
from signoff.server.app import Settings, create_app
from tests.conftest import SIGNOFF
from tests.servers import in_loop
from tests.test_webhooks import SECRET, Receiver, receiving

ADMIN = {"authorization": "Bearer admin"}


def signoff(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIGNOFF, *args], env=env, capture_output=True, text=True, timeout=60)


async def test_an_approvals_deliveries_show_in_its_json_the_cli_and_the_metrics(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    receiver = Receiver([410])  # the endpoint is gone: the notice fails for good
    db = tmp_path / "cli.db"
    async with receiving(receiver) as url, SqliteLedger(db) as ledger:
        hook = WebhookChannel("ops", url, SECRET, allow_private=True, retry_schedule=(0.05,))
        channels = Channels({"webhook:ops": hook})
        app = create_app(Agent("test"), ledger, Settings(token="admin"), policy=Policy(), channels=channels)
        async with in_loop(app) as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
            assert (await client.get("/readyz")).text == "ready\n"
            approval = await ledger.approvals.open(
                ToolCall("c1", "pay", {}), chat_id="chat", description="d", rule="r", notify=("webhook:ops",)
            )
            async with asyncio.timeout(10):
                while not await ledger.outbox.query(state="failed"):
                    await asyncio.sleep(0.02)
            shown = (await client.get(f"/api/approvals/{approval.id}", headers=ADMIN)).json()
            (notice,) = shown["notices"]
            assert (notice["channel"], notice["type"], notice["state"], notice["attempts"]) == (
                "webhook:ops", "approval.requested", "failed", 1
            )  # fmt: skip
            assert notice["last_error"] == "HTTP 410 Gone: the endpoint is disabled"
            metrics = (await client.get("/metrics", headers=ADMIN)).text
            assert 'signoff_outbox_notices{channel="webhook:ops",state="failed"} 1.0' in metrics
            assert 'signoff_outbox_attempts_total{channel="webhook:ops",outcome="gave_up"} 1.0' in metrics

    listed = await asyncio.to_thread(signoff, cli_env, "outbox", "list", "--state", "failed")
    assert listed.returncode == 0, listed.stderr
    assert notice["id"] in listed.stdout and "webhook:ops" in listed.stdout
    assert (
        "no notices"
        in (await asyncio.to_thread(signoff, cli_env, "outbox", "list", "--state", "pending")).stdout
    )
    retried = await asyncio.to_thread(signoff, cli_env, "outbox", "retry", notice["id"])
    assert retried.returncode == 0 and "will be delivered again" in retried.stdout
    pending = await asyncio.to_thread(signoff, cli_env, "outbox", "list", "--approval", approval.id)
    assert "pending" in pending.stdout
    record = json.loads((await asyncio.to_thread(signoff, cli_env, "approvals", "show", approval.id)).stdout)
    assert [n["state"] for n in record["notices"]] == ["pending"]
    unknown = await asyncio.to_thread(signoff, cli_env, "outbox", "retry", "msg_nothing")
    assert unknown.returncode != 0 and "no notice msg_nothing" in unknown.stderr
    bad = await asyncio.to_thread(signoff, cli_env, "outbox", "list", "--state", "lost")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    async with SqliteLedger(db) as ledger:
        actions = [e.action for e in await ledger.audit.entries()]
    assert "notice-retry" in actions and "channel-disabled" in actions
