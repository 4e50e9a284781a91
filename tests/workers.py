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
                await ledger.approvals.decide(approval_id, decision)
                won[approval_id] = by
            except SignoffError:
                pass

        for start in range(0, len(ids), 50):
            batch = ids[start : start + 50]
            await asyncio.gather(*(one(i, j) for i in batch for j in range(per_approval)))
        consumed: list[str] = []

        async def claim(approval_id: str) -> None:
            approval = await ledger.approvals.get(approval_id)
            try:
                await ledger.approvals.consume(approval_id, approval.approved_call, name)
                consumed.append(approval_id)
            except SignoffError:
                pass

        approved = [a.id for a in await ledger.approvals.query(state="approved")]
        await asyncio.gather(*(claim(i) for i in approved for _ in range(3)))
    print(json.dumps({"won": won, "consumed": consumed}))


async def hold(url: str, count: int) -> None:
    """Park `count` blocking waits, say READY, and wait to be killed."""
    async with open_ledger(url) as ledger:
        gate = Gate(ledger)
        tasks = [asyncio.create_task(gate.authorize(payment(i), chat_id="crash-chat")) for i in range(count)]
        while len(await ledger.approvals.query(state="pending")) < count:
            await asyncio.sleep(0.01)
        print("READY", flush=True)
        await asyncio.sleep(3600)
        del tasks


async def approve(bases: str, token: str, total: int) -> None:
    """The approver process: decide `total` approvals, each through the other worker than the one its
    chat waits on (chat ids look like `<mode>-<worker>-<n>`), denying every tenth."""
    import httpx

    servers = bases.split(",")
    auth = {"authorization": f"Bearer {token}"}
    decided: set[str] = set()
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=32)) as client:

        async def one(approval: dict[str, object]) -> None:
            _, worker, n = str(approval["chat_id"]).split("-")
            body = {"approved": True} if int(n) % 10 else {"approved": False, "reason": "not this one"}
            url = f"{servers[1 - int(worker)]}/api/approvals/{approval['id']}/decision"
            response = await client.post(url, json=body, headers=auth)
            assert response.status_code == 200, response.text

        while len(decided) < total:
            found = await client.get(f"{servers[len(decided) % 2]}/api/approvals?state=pending", headers=auth)
            fresh = [a for a in found.json()["approvals"] if a["id"] not in decided]
            decided.update(a["id"] for a in fresh)
            await asyncio.gather(*(one(a) for a in fresh))
            if not fresh:
                await asyncio.sleep(0.05)
    print(json.dumps({"decided": len(decided)}))


def main() -> None:
    role, *args = sys.argv[1:]
    started = time.monotonic()
    if role == "decide":
        asyncio.run(decide(args[0], args[1], args[2], int(args[3]), args[4]))
    elif role == "hold":
        asyncio.run(hold(args[0], int(args[1])))
    elif role == "approve":
        asyncio.run(approve(args[0], args[1], int(args[2])))
    else:
        raise SystemExit(f"unknown role {role}")
    print(f"{role} took {time.monotonic() - started:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
