"""Races and crashes on the ledgers several processes share: exactly one decision, exactly one consume,
nothing lost."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from signoff.core.approval import State
from signoff.core.decision import Decision
from signoff.core.errors import AlreadyConsumed, SignoffError
from signoff.gate import Allowed, Gate
from signoff.ledger import Ledger, SqliteLedger, open_ledger
from tests.conftest import ROOT
from tests.workers import payment

APPROVALS = 1000
DECIDERS = 20
CONFLICTING = 50
"""Deciders per approval across two processes: the issue's fault test asks for 50 on each of 1,000."""


async def open_many(ledger: Ledger, count: int) -> list[str]:
    ids = []
    for i in range(count):
        approval = await ledger.approvals.open(
            payment(i), chat_id=f"chat-{i % 10}", description="race", rule="r"
        )
        ids.append(approval.id)
    return ids


async def check_outcome(ledger: Ledger, ids: list[str], consumes: int) -> None:
    approvals = [await ledger.approvals.get(i) for i in ids]
    assert all(a.state in (State.DENIED, State.CONSUMED) for a in approvals)
    approved = sum(a.state is State.CONSUMED for a in approvals)
    assert consumes == approved
    actions = Counter(e.action for e in await ledger.audit.entries(limit=100_000))
    assert actions["open"] == len(ids)
    assert actions["approve"] + actions["deny"] == len(ids)
    assert actions["consume"] == approved
    count, broken = await ledger.audit.verify()
    assert broken is None and count == sum(actions.values())


async def test_twenty_deciders_per_approval_through_several_connections(tmp_path: Path) -> None:
    """Within one process the event loop runs each connection's operations whole, so whichever decider
    starts first wins: the deciders start in a shuffled order per approval (seeded), approvers and
    deniers alike. Writers that really overlap are the two-process test's."""
    db = tmp_path / "race.db"
    connections = [SqliteLedger(db) for _ in range(4)]
    for connection in connections:
        await connection.start()
    try:
        ids = await open_many(connections[0], APPROVALS)
        winners: Counter[str] = Counter()

        async def one(approval_id: str, j: int) -> None:
            ledger = connections[j % len(connections)]
            decision = Decision.approve(f"a{j}") if j % 2 else Decision.deny(f"d{j}", "race")
            try:
                await ledger.approvals.decide(approval_id, decision)
                winners[approval_id] += 1
            except SignoffError:
                pass

        order = random.Random(21)
        for start in range(0, APPROVALS, 50):
            await asyncio.gather(
                *(one(i, j) for i in ids[start : start + 50] for j in order.sample(range(DECIDERS), DECIDERS))
            )
        assert len(winners) == APPROVALS and set(winners.values()) == {1}

        consumed: Counter[str] = Counter()

        async def claim(approval_id: str, j: int) -> None:
            approval = await connections[j].approvals.get(approval_id)
            try:
                await connections[j].approvals.consume(approval_id, approval.approved_call, f"runner{j}")
                consumed[approval_id] += 1
            except AlreadyConsumed:
                pass

        approved = [a.id for a in await connections[0].approvals.query(state="approved")]
        assert 0 < len(approved) < APPROVALS
        await asyncio.gather(*(claim(i, j) for i in approved for j in range(len(connections))))
        assert set(consumed) == set(approved) and set(consumed.values()) == {1}
        await check_outcome(connections[0], ids, sum(consumed.values()))
    finally:
        for connection in connections:
            await connection.close()


async def test_fifty_deciders_per_approval_across_two_processes(shared: str, tmp_path: Path) -> None:
    ids_file, go = tmp_path / "ids.json", tmp_path / "go"
    async with open_ledger(shared) as ledger:
        ids = await open_many(ledger, APPROVALS)
    ids_file.write_text(json.dumps(ids))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers",
                "decide",
                shared,
                str(ids_file),
                name,
                str(CONFLICTING // 2),
                str(go),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    go.touch()
    reports = [json.loads(worker.communicate(timeout=240)[0]) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]

    won = Counter(i for report in reports for i in report["won"])
    assert set(won) == set(ids) and set(won.values()) == {1}
    consumed = Counter(i for report in reports for i in report["consumed"])
    assert set(consumed.values()) <= {1}
    async with open_ledger(shared) as ledger:
        for report in reports:
            for approval_id, by in report["won"].items():
                assert (await ledger.approvals.get(approval_id)).by == by
        await check_outcome(ledger, ids, sum(consumed.values()))


async def test_a_killed_process_leaves_its_pending_approvals_to_be_resumed(shared: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.workers", "hold", shared, "100"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    assert holder.returncode == -signal.SIGKILL

    async with open_ledger(shared) as ledger:
        pending = await ledger.approvals.query(state="pending")
        assert len(pending) == 100
        for approval in pending:
            await ledger.approvals.decide(approval.id, Decision.approve("survivor"))
        gate, runs = Gate(ledger), Counter[str]()
        for i in range(100):
            outcome = await gate.authorize(payment(i), chat_id="crash-chat", wait="deferred")
            assert isinstance(outcome, Allowed) and outcome.by == "survivor"
            await gate.run(payment(i), lambda **args: runs.update([args["recipient"]]), chat_id="crash-chat")
        assert len(runs) == 100 and set(runs.values()) == {1}
        for i in range(100):
            try:
                await gate.run(
                    payment(i), lambda **args: runs.update([args["recipient"]]), chat_id="crash-chat"
                )
            except AlreadyConsumed:
                continue
            raise AssertionError("an approval ran twice")
        assert set(runs.values()) == {1}
        assert (await ledger.audit.verify())[1] is None
