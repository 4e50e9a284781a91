"""Metrics, finished (issue 42, item 11): `signoff_build_info{version}`, no `_created` series for any
metric, and one spelling of a bucket's bound across every histogram, the outbox's included."""

from __future__ import annotations

import asyncio
import re
from importlib.metadata import version
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic_ai import Agent

from signoff.channels.config import Channels, WebhookChannel
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.policy import Policy
from signoff.ledger import SqliteLedger
from signoff.server.app import Settings, create_app
from tests.servers import in_loop
from tests.test_webhooks import SECRET, Receiver, receiving

ADMIN = {"authorization": "Bearer admin"}


async def test_build_info_no_created_series_and_one_bucket_spelling(tmp_path: Path) -> None:
    """A server whose outbox delivered a notice, so its own counter and histogram are in the scrape beside
    the approvals' figures."""
    async with receiving(Receiver()) as url, SqliteLedger(tmp_path / "l.db") as ledger:
        channels = Channels({"webhook:ops": WebhookChannel("ops", url, SECRET, allow_private=True)})
        app = create_app(Agent("test"), ledger, Settings(token="admin"), policy=Policy(), channels=channels)
        async with in_loop(app) as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
            call = ToolCall("c1", "pay", {})
            opened = await ledger.approvals.open(
                call, chat_id="chat", description="d", rule="r", notify=("webhook:ops",)
            )
            await ledger.approvals.decide(opened.id, Decision.approve("bob"))
            async with asyncio.timeout(10):
                while not await ledger.outbox.query(state="delivered"):
                    await asyncio.sleep(0.02)
            shown = await client.get("/metrics", headers=ADMIN)
    assert shown.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(shown.text)}
    (info,) = families["signoff_build_info"].samples  # an info metric is a gauge in the text format
    assert (info.name, info.labels, info.value) == ("signoff_build_info", {"version": version("signoff")}, 1)

    assert "signoff_outbox_delivery_seconds_bucket" in shown.text  # the outbox's own metrics are there
    assert "signoff_outbox_attempts_total" in shown.text
    assert [line for line in shown.text.splitlines() if "_created" in line] == []

    bounds = re.findall(r'_bucket\{[^}]*le="([^"]+)"', shown.text)
    decision = re.findall(r'signoff_approval_decision_seconds_bucket\{le="([^"]+)"', shown.text)
    assert "1.0" in decision and "+Inf" in decision
    assert [b for b in bounds if b != "+Inf" and "." not in b] == []  # never `le="1"` beside `le="1.0"`
