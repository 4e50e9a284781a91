"""Webhooks, against real HTTP receivers that verify every delivery with the `standardwebhooks` library:
retries under one id, the receiver's Retry-After, a 410 that disables, a give-up, a dead receiver that
delays nobody else, and the channels file that refuses to start a server with one line.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.channels.config import ChannelsError, WebhookChannel, parse_channels
from signoff.channels.delivery import Deliverer, Line, Retries, retry_after
from signoff.channels.webhook import Http, WebhookSender
from signoff.core.call import ToolCall
from signoff.core.notice import Notice
from signoff.core.policy import Policy
from signoff.ledger import Ledger
from tests.conftest import SIGNOFF, FakeClock
from tests.servers import in_loop

FAST = Retries((0.05, 0.05, 0.05), 60.0)
SECRET = "whsec_" + base64.b64encode(b"a secret of thirty-two bytes!!!!").decode()


@pytest.fixture
def clock() -> FakeClock:
    """The ledger's fake clock, started now: a receiver checks the timestamp a delivery is signed with
    (the ledger's time) against its own clock."""
    return FakeClock(time.time())


@dataclass
class Receiver:
    """An HTTP endpoint that verifies each delivery as a Standard Webhooks receiver does, and answers with
    the statuses it is given in turn (the last one from then on)."""

    answers: list[int | tuple[int, dict[str, str]]] = field(default_factory=lambda: [200])
    delay: float = 0.0
    hold: asyncio.Event | None = None
    """If given, each delivery waits for it to be set before it is answered: until then, no answers."""
    seen: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    """Each verified delivery: its webhook id, its headers and its payload."""
    forged: int = 0

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        try:
            payload = Webhook(SECRET).verify(body, dict(request.headers))
        except Exception:
            self.forged += 1
            return Response(status_code=400)
        self.seen.append((request.headers["webhook-id"], dict(request.headers), payload))
        await asyncio.sleep(self.delay)
        if self.hold is not None:
            await self.hold.wait()
        answer = self.answers[min(len(self.seen) - 1, len(self.answers) - 1)]
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        return Response(status_code=status, headers=headers)

    @property
    def ids(self) -> list[str]:
        return [seen[0] for seen in self.seen]


@contextlib.asynccontextmanager
async def receiving(receiver: Receiver) -> AsyncIterator[str]:
    async with in_loop(Starlette(routes=[Route("/hook", receiver.hook, methods=["POST"])])) as address:
        yield f"http://{address}/hook"


@contextlib.asynccontextmanager
async def delivering(
    ledger: Ledger, urls: dict[str, str], retries: Retries = FAST
) -> AsyncIterator[Deliverer]:
    http = Http()
    lines = {
        f"webhook:{name}": Line(
            WebhookSender(WebhookChannel(name, url, SECRET, allow_private=True), http, "http://x/inbox"),
            retries,
        )
        for name, url in urls.items()
    }
    deliverer = Deliverer(ledger, lines, interval=0.05, jitter=lambda: 0.0)
    deliverer.start()
    try:
        yield deliverer
    finally:
        await deliverer.stop()
        await http.close()


async def ask(ledger: Ledger, call_id: str, *channels: str) -> str:
    approval = await ledger.approvals.open(
        ToolCall(call_id, "pay", {"amount": 700, "to": "Bob"}),
        chat_id="chat",
        description="Pay 700 to Bob",
        rule="pay[0]",
        notify=channels,
    )
    return approval.id


async def until(check: Callable[[], Any], within: float = 10.0) -> None:
    """Until `check()` (awaited when it gives an awaitable) is true."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_three_attempts_under_one_webhook_id_each_verified(ledger: Ledger) -> None:
    receiver = Receiver([500, 500, 200])
    async with receiving(receiver) as url, delivering(ledger, {"ops": url}):
        approval_id = await ask(ledger, "c1", "webhook:ops")
        await until(lambda: len(receiver.seen) == 3)
        await until(lambda: _states(ledger, approval_id, "delivered"))
    assert receiver.forged == 0
    assert len(set(receiver.ids)) == 1
    (notice,) = await ledger.outbox.query(approval_id=approval_id)
    assert (notice.id, notice.attempts, notice.state) == (receiver.ids[0], 3, "delivered")
    payload = receiver.seen[-1][2]
    assert payload["type"] == "approval.requested"
    assert payload["data"]["approval"]["id"] == approval_id
    assert payload["data"]["approval"]["call"]["args"] == {"amount": 700, "to": "Bob"}
    assert payload["data"]["links"] == {"inbox": "http://x/inbox"}
    assert payload["timestamp"].endswith("Z")


async def test_a_decision_is_delivered_too(ledger: Ledger) -> None:
    from signoff.core.decision import Decision

    receiver = Receiver()
    async with receiving(receiver) as url, delivering(ledger, {"ops": url}):
        approval_id = await ask(ledger, "c1", "webhook:ops")
        await ledger.approvals.decide(approval_id, Decision(verdict="deny", by="bob", reason="too much"))
        await until(lambda: len(receiver.seen) == 2)
    types = sorted(seen[2]["type"] for seen in receiver.seen)
    assert types == ["approval.decided", "approval.requested"]
    assert len(set(receiver.ids)) == 2


async def test_retry_after_sets_the_next_attempt(
    clocked_ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 asking to come back in 1 s puts the next attempt 1 s later by the ledger's clock (the schedule
    alone would have put it 0.05 s later), and the notice is not tried again before then."""
    ledger = clocked_ledger
    looks: list[tuple[float, int]] = []
    """Each of the worker's claims: the ledger's clock it claimed at, and how many notices it got."""
    claim = ledger.outbox.claim

    async def claiming(channel: str, **options: Any) -> list[Notice]:
        now = clock()
        found = await claim(channel, **options)
        looks.append((now, len(found)))
        return found

    monkeypatch.setattr(ledger.outbox, "claim", claiming)
    receiver = Receiver([(429, {"retry-after": "1"}), 200])
    async with receiving(receiver) as url, delivering(ledger, {"ops": url}):
        approval_id = await ask(ledger, "c1", "webhook:ops")
        await until(lambda: _notice(ledger, approval_id, lambda n: n.last_error == "HTTP 429"))
        (notice,) = await ledger.outbox.query(approval_id=approval_id)
        assert (notice.attempts, notice.state, notice.next_at) == (1, "pending", clock() + 1.0)
        clock.now = notice.next_at - 0.01
        await until(lambda: (clock(), 0) in looks)  # the worker looked 10 ms before it,
        assert not [found for at, found in looks if at == clock() and found]  # and found nothing due
        assert len(receiver.seen) == 1
        clock.now = notice.next_at
        await until(lambda: _notice(ledger, approval_id, lambda n: n.state == "delivered"))
    assert len(receiver.seen) == 2 and (notice.next_at, 1) in looks


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("120", 1000.0) == 120.0
    assert retry_after("Thu, 01 Jan 1970 00:20:00 GMT", 1000.0) == 200.0
    assert retry_after("soon", 1000.0) is None
    assert retry_after(None, 1000.0) is None


async def test_410_disables_the_endpoint_audited(ledger: Ledger) -> None:
    receiver = Receiver([410])
    async with receiving(receiver) as url, delivering(ledger, {"ops": url}) as deliverer:
        first = await ask(ledger, "c1", "webhook:ops")
        await until(lambda: _states(ledger, first, "failed"))
        second = await ask(ledger, "c2", "webhook:ops")
        await until(lambda: _states(ledger, second, "failed"))
        assert "webhook:ops" in deliverer.disabled
    assert len(receiver.seen) == 1  # the second notice was never sent to a gone endpoint
    await until(lambda: _audited_for(ledger, "notice-failed", {first, second}))  # just after the states
    actions = [(e.action, e.subject) for e in await ledger.audit.entries()]
    assert ("channel-disabled", "webhook:ops") in actions


async def test_delivery_gives_up_after_the_schedule_audited(ledger: Ledger) -> None:
    receiver = Receiver([503])
    async with receiving(receiver) as url, delivering(ledger, {"ops": url}, Retries((0.05, 0.05), 60.0)):
        approval_id = await ask(ledger, "c1", "webhook:ops")
        await until(lambda: _states(ledger, approval_id, "failed"))
        await until(lambda: _audited(ledger, "notice-failed"))  # written just after the state
    assert len(receiver.seen) == 3  # the first attempt and one after each delay
    (notice,) = await ledger.outbox.query(approval_id=approval_id)
    assert notice.last_error == "gave up after 3 attempts; the last: HTTP 503"
    failed = [e for e in await ledger.audit.entries() if e.action == "notice-failed"]
    assert [e.detail["notice"] for e in failed] == [notice.id]


async def test_a_dead_receiver_delays_no_other(ledger: Ledger) -> None:
    """One receiver answers no delivery until the test lets it; the other's notices all arrive and are
    recorded delivered meanwhile, while those sent to the first still wait for their answers."""
    answer = asyncio.Event()
    slow, fast = Receiver(hold=answer), Receiver()
    async with (
        receiving(slow) as slow_url,
        receiving(fast) as fast_url,
        delivering(ledger, {"slow": slow_url, "fast": fast_url}),
    ):
        try:
            for index in range(20):
                await ask(ledger, f"c{index}", "webhook:slow", "webhook:fast")
            await until(lambda: _delivered(ledger, "webhook:fast", 20))
            assert len(fast.seen) == 20
            assert len(slow.seen) >= 1 and not answer.is_set()  # in flight, still unanswered
            assert await _delivered(ledger, "webhook:slow", 0)
        finally:
            answer.set()


async def test_a_forged_signature_fails_the_receivers_check() -> None:
    """The receiver's check is real: a body signed with another secret is refused."""
    receiver = Receiver()
    other = Webhook("whsec_" + base64.b64encode(b"x" * 32).decode())
    async with receiving(receiver) as url, httpx.AsyncClient() as client:
        stamp = int(time.time())
        from datetime import UTC, datetime

        signature = other.sign("msg_1", datetime.fromtimestamp(stamp, UTC), "{}")
        headers = {"webhook-id": "msg_1", "webhook-timestamp": str(stamp), "webhook-signature": signature}
        assert (await client.post(url, content=b"{}", headers=headers)).status_code == 400
    assert receiver.forged == 1


async def _notice(ledger: Ledger, approval_id: str, check: Callable[[Notice], bool]) -> bool:
    """Whether the approval's one notice passes `check`."""
    notices = await ledger.outbox.query(approval_id=approval_id)
    return len(notices) == 1 and check(notices[0])


async def _delivered(ledger: Ledger, channel: str, count: int) -> bool:
    """Whether exactly `count` of the channel's notices are recorded delivered."""
    return sum(n.channel == channel for n in await ledger.outbox.query(state="delivered")) == count


async def _audited(ledger: Ledger, action: str) -> bool:
    return any(e.action == action for e in await ledger.audit.entries())


async def _audited_for(ledger: Ledger, action: str, subjects: set[str]) -> bool:
    return subjects <= {e.subject for e in await ledger.audit.entries() if e.action == action}


async def _states(ledger: Ledger, approval_id: str, state: str) -> bool:
    notices = await ledger.outbox.query(approval_id=approval_id)
    return bool(notices) and all(n.state == state for n in notices)


ENV = {"HOOK_SECRET": SECRET}


def channels(text: str, environ: dict[str, str] = ENV) -> Any:
    return parse_channels(text, "channels.toml", environ)


def test_the_channels_file_reads_each_channel_with_its_secret_from_the_environment() -> None:
    loaded = channels(
        'public_url = "https://signoff.example.com/"\n'
        '[webhook.ops]\nurl = "https://8.8.8.8/hooks"\nsecret_env = "HOOK_SECRET"\n'
        'retry_schedule = ["1s", "2m"]\ngive_up_after = "1h"\n'
    )
    hook = loaded.by_name["webhook:ops"]
    assert (hook.url, hook.secret, hook.retry_schedule, hook.give_up_after) == (
        "https://8.8.8.8/hooks",
        SECRET,
        (1.0, 120.0),
        3600.0,
    )
    assert loaded.public_url == "https://signoff.example.com"
    assert SECRET not in repr(loaded)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[webhook.ops]\nurl = "https://8.8.8.8/"\nsecret_env = "HOOK_SECRET"\ncolour = 1\n',
         "webhook.ops.colour: unknown key"),
        ('[webhook.ops]\nurl = "https://8.8.8.8/"\nsecret_env = "NOT_SET"\n',
         "webhook.ops.secret_env: the environment variable NOT_SET is not set"),
        ('[webhook.ops]\nurl = "ftp://8.8.8.8/"\nsecret_env = "HOOK_SECRET"\n', "webhook.ops.url:"),
        ('[webhook.ops]\nurl = "https://8.8.8.8:99999/"\nsecret_env = "HOOK_SECRET"\n', "malformed port"),
        ('[webhook.ops]\nurl = "http://127.0.0.1:9/"\nsecret_env = "HOOK_SECRET"\n',
         "is a loopback address; set allow_private = true"),
        ('[webhook.ops]\nurl = "http://10.1.2.3/"\nsecret_env = "HOOK_SECRET"\n', "is a private address"),
        ('[webhook.ops]\nurl = "http://169.254.169.254/"\nsecret_env = "HOOK_SECRET"\n', "link-local"),
        ('[webhook.ops]\nurl = "http://[::ffff:127.0.0.1]/"\nsecret_env = "HOOK_SECRET"\n', "loopback"),
        ('[webhook.ops]\nurl = "http://localhost/"\nsecret_env = "HOOK_SECRET"\n', "loopback"),
        ('[webhook.ops]\nurl = "https://8.8.8.8/"\nsecret_env = "PLAIN"\n', "whsec_"),
        ('[pager.ops]\nurl = "https://8.8.8.8/"\n', "pager: unknown key"),
        ('[webhook."a b"]\nurl = "https://8.8.8.8/"\nsecret_env = "HOOK_SECRET"\n', "letters, digits"),
        ('[webhook.ops]\nurl = "https://8.8.8.8/"\nsecret_env = "HOOK_SECRET"\nretry_schedule = "5s"\n',
         "retry_schedule"),
        ("[webhook.ops\n", "invalid TOML"),
    ],
)  # fmt: skip
def test_a_wrong_channels_file_names_its_fault(text: str, message: str) -> None:
    with pytest.raises(ChannelsError, match=None) as raised:
        channels(text, {**ENV, "PLAIN": "not-a-webhook-secret"})
    assert message in str(raised.value)
    assert str(raised.value).startswith("channels.toml: ")


def test_a_private_target_is_allowed_when_the_channel_says_so() -> None:
    loaded = channels(
        '[webhook.ops]\nurl = "http://127.0.0.1:9/"\nsecret_env = "HOOK_SECRET"\nallow_private = true\n'
    )
    assert loaded.by_name["webhook:ops"].allow_private


def test_a_rule_notifying_an_unknown_channel_is_refused() -> None:
    policy = Policy.from_toml('[[tools.pay]]\naction = "ask"\nnotify = ["webhook:ops", "email:finance"]\n')
    loaded = channels('[webhook.ops]\nurl = "https://8.8.8.8/"\nsecret_env = "HOOK_SECRET"\n')
    with pytest.raises(ChannelsError, match=r"pay\[0\] notifies email:finance, which the channels file"):
        loaded.check(policy)


def test_serve_refuses_to_start_on_a_wrong_channels_file_in_one_line(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "policy.toml").write_text('[[tools.pay]]\naction = "ask"\nnotify = ["webhook:ops"]\n')
    (tmp_path / "channels.toml").write_text('[webhook.ops]\nurl = "http://127.0.0.1:9/"\nsecret_env = "S"\n')
    (tmp_path / "myagent.py").write_text("from pydantic_ai import Agent\nagent = Agent('test')\n")
    env = {**os.environ, "S": SECRET, "SIGNOFF_LEDGER": f"sqlite:///{tmp_path / 'l.db'}", "COLUMNS": "200"}
    for channels_file, message in (
        ("channels.toml", "webhook.ops.url: http://127.0.0.1:9/ is a loopback address"),
        ("missing.toml", "missing.toml: cannot read"),
    ):
        result = subprocess.run(
            [SIGNOFF, "serve", "--agent", "myagent:agent", "--policy", "policy.toml", "--channels",
             channels_file, "--port", "0"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode != 0
        assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
