"""Crash recovery on SQLite, PostgreSQL and Redis, with real processes: a worker SIGKILLed after opening
an approval and claiming its notice, before delivering it, loses the notice once its lease runs out, and
a `signoff serve` worker delivers it; the receiver sees exactly one `webhook-id`. Two serving workers
share a stream of notices and never deliver one twice, nor one at the same time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from signoff.ledger import open_ledger
from tests.servers import signoff_server
from tests.test_webhooks import SECRET, Receiver, receiving

OPEN_AND_HANG = """
import asyncio, sys
from signoff.core.call import ToolCall
from signoff.ledger import open_ledger

async def main():
    async with open_ledger(sys.argv[1]) as ledger:
        approval = await ledger.approvals.open(
            ToolCall("c1", "pay", {"amount": 700}), chat_id="chat", description="pay", rule="pay[0]",
            notify=("webhook:ops",),
        )
        (notice,) = await ledger.outbox.claim("webhook:ops", lease=3.0)
        print(approval.id, notice.id, flush=True)
        await asyncio.sleep(3600)  # "delivering": killed here

asyncio.run(main())
"""


@contextmanager
def serving(directory: Path, url: str, hook: str, name: str) -> Iterator[str]:
    channels = directory / "channels.toml"
    channels.write_text(f'[webhook.ops]\nurl = "{hook}"\nsecret_env = "HOOK"\nallow_private = true\n')
    (directory / "myagent.py").write_text("from pydantic_ai import Agent\nagent = Agent('test')\n")
    args = ["serve", "--agent", "myagent:agent", "--ledger", url, "--channels", str(channels)]
    args.append("--redis-volatile")  # the machine's Redis keeps nothing on disk; only its own tests mind
    env = {"HOOK": SECRET, "PYTHONPATH": str(directory)}
    with signoff_server(directory, args, "token", env=env, name=name, timeout=30) as (base, _):
        yield base


async def test_a_worker_killed_mid_delivery_loses_its_notice_to_another(shared: str, tmp_path: Path) -> None:
    receiver = Receiver()
    async with receiving(receiver) as hook:
        crashing = subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_HANG, shared], stdout=subprocess.PIPE, text=True, cwd=tmp_path
        )
        assert crashing.stdout is not None
        approval_id, notice_id = (await asyncio.to_thread(crashing.stdout.readline)).split()
        os.kill(crashing.pid, signal.SIGKILL)
        crashing.wait(10)
        with serving(tmp_path, shared, hook, "serve"):
            async with asyncio.timeout(30):
                while not receiver.seen:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # time for a second delivery, were there one
        assert receiver.ids == [notice_id] and receiver.forged == 0
        assert receiver.seen[0][2]["data"]["approval"]["id"] == approval_id
    async with open_ledger(shared) as ledger:
        notice = await ledger.outbox.get(notice_id)
    assert (notice.state, notice.attempts) == ("delivered", 2)  # the dead worker's attempt, and this one


async def test_two_workers_deliver_each_notice_once(shared: str, tmp_path: Path) -> None:
    receiver = Receiver(delay=0.05)
    async with receiving(receiver) as hook:
        one, two = tmp_path / "one", tmp_path / "two"
        one.mkdir()
        two.mkdir()
        with serving(one, shared, hook, "one"), serving(two, shared, hook, "two"):
            async with open_ledger(shared) as ledger:
                from signoff.core.call import ToolCall

                for index in range(60):
                    await ledger.approvals.open(
                        ToolCall(f"c{index}", "pay", {}), chat_id="chat", description="pay", rule="r",
                        notify=("webhook:ops",),
                    )  # fmt: skip
            async with asyncio.timeout(60):
                while len(receiver.seen) < 60:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
    assert len(receiver.ids) == len(set(receiver.ids)) == 60
    async with open_ledger(shared) as ledger:
        delivered = await ledger.outbox.query(state="delivered")
    assert len(delivered) == 60 and {n.attempts for n in delivered} == {1}
