"""Programs the cross-process tests run as real OS processes: `python -m tests.workers <role> …`."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import SignoffError
from signoff.gate import Gate
from signoff.ledger import open_ledger


def payment(i: int) -> ToolCall:
    return ToolCall(
        f"call_{i}", "process_payment", {"amount": i + 1, "currency": "USD", "recipient": f"r{i}"}
    )


async def decide(url: str, ids_file: str, name: str, per_approval: int, go_file: str) -> None:
    """Race `per_approval` deciders on every approval, then race consumes on the approved ones."""
    ids = json.loads(Path(ids_file).read_text())
    async with open_ledger(url) as ledger:
        while not Path(go_file).exists():
            await asyncio.sleep(0.005)
        won: dict[str, str] = {}

        async def one(approval_id: str, j: int) -> None:
            by = f"{name}-{j}"
            decision = Decision.approve(by) if j % 2 else Decision.deny(by, "race")
            try:
                await ledger.decide(approval_id, decision)
                won[approval_id] = by
            except SignoffError:
                pass

        for start in range(0, len(ids), 50):
            batch = ids[start : start + 50]
            await asyncio.gather(*(one(i, j) for i in batch for j in range(per_approval)))
        consumed: list[str] = []

        async def claim(approval_id: str) -> None:
            approval = await ledger.get(approval_id)
            try:
                await ledger.consume(approval_id, approval.approved_call, name)
                consumed.append(approval_id)
            except SignoffError:
                pass

        approved = [a.id for a in await ledger.approvals(state="approved")]
        await asyncio.gather(*(claim(i) for i in approved for _ in range(3)))
    print(json.dumps({"won": won, "consumed": consumed}))


async def hold(url: str, count: int) -> None:
    """Park `count` blocking waits, say READY, and wait to be killed."""
    async with open_ledger(url) as ledger:
        gate = Gate(ledger)
        tasks = [asyncio.create_task(gate.authorize(payment(i), chat_id="crash-chat")) for i in range(count)]
        while len(await ledger.approvals(state="pending")) < count:
            await asyncio.sleep(0.01)
        print("READY", flush=True)
        await asyncio.sleep(3600)
        del tasks


def main() -> None:
    role, *args = sys.argv[1:]
    started = time.monotonic()
    if role == "decide":
        asyncio.run(decide(args[0], args[1], args[2], int(args[3]), args[4]))
    elif role == "hold":
        asyncio.run(hold(args[0], int(args[1])))
    else:
        raise SystemExit(f"unknown role {role}")
    print(f"{role} took {time.monotonic() - started:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
