"""Follow-ups through a running server, on a real clock cut short: the sweep finds a reminder, an
escalation and a deadline warning due, and a webhook hears each, then the expiry, in order."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent

from signoff.channels.config import Channels, WebhookChannel
from signoff.core.policy import Policy
from signoff.ledger import MemoryLedger
from signoff.server.app import Settings, create_app
from tests.servers import in_loop
from tests.test_followups import ask
from tests.test_webhooks import SECRET, Receiver, receiving

POLICY = Policy.from_toml(
    """
[[tools.pay]]
action = "ask"
deadline = "2s"
approvers = ["role:finance"]
notify = ["webhook:ops"]
remind_after = "400ms"
remind_max = 1
escalate_after = "800ms"
escalate_to = ["role:cfo"]
warn_before_deadline = "700ms"
"""
)


async def test_a_server_tells_each_follow_up_then_the_expiry() -> None:
    receiver = Receiver()
    async with receiving(receiver) as url, MemoryLedger() as ledger:
        channels = Channels({"webhook:ops": WebhookChannel("ops", url, SECRET, allow_private=True)})
        settings = Settings(token="admin", sweep=0.05)
        app = create_app(Agent("test"), ledger, settings, policy=POLICY, channels=channels)
        async with in_loop(app):
            approval_id = await ask(ledger, POLICY)
            async with asyncio.timeout(10):
                while len(receiver.seen) < 5:
                    await asyncio.sleep(0.02)
    types = [payload["type"] for _, _, payload in receiver.seen]
    assert types == [
        "approval.requested", "approval.reminder", "approval.escalated", "approval.deadline_warning",
        "approval.expired",
    ]  # fmt: skip
    escalated = receiver.seen[2][2]["data"]["approval"]
    assert escalated["id"] == approval_id and escalated["awaiting"].startswith("finance or cfo")
    steps = [
        (e.action, e.detail.get("joined")) for e in await ledger.audit.entries() if e.subject == approval_id
    ]
    assert steps == [
        ("open", None), ("remind", None), ("escalate", ["role:cfo"]), ("warn", None), ("expire", None)
    ]  # fmt: skip
