"""The truth about a call that ran (issue 43): the claim records that the call started, and where; its
outcome is recorded when it ends; a continuation that finds the claim taken tells the model what happened,
or that it started and its outcome is unknown, and never runs it again nor calls it refused.

Reproduced first: a worker killed after it ran the payment, before it saved the chat, left the next worker
saying "approval … was already used", which the model turned into "I did not pay".
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from signoff.core.approval import CallOutcome
from signoff.core.call import ToolCall
from signoff.core.claim import MAX_KEPT, kept
from signoff.core.errors import CallMismatch, IllegalTransition
from signoff.core.policy import Policy
from signoff.gate import Gate, Pending
from signoff.integrations.gated import UNKNOWN, GatedCall, Ran, gated_call
from signoff.ledger import Ledger
from tests.chats import answer, chunks, user
from tests.conftest import drop_url, make_ledger, shared_url
from tests.servers import signoff_server

PAY = ToolCall("call_pay", "pay", {"amount": 50, "to": "Hanako"})
OK = CallOutcome(ok=True, result="paid", at=0.0)


@pytest.fixture(params=["sqlite", "postgres"])
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    from tests.conftest import drop

    async with make_ledger(str(request.param), tmp_path) as opened:
        yield opened
    await drop(opened)


async def _approved(ledger: Ledger) -> Gate:
    gate = Gate(ledger, Policy())
    asked = await gate.authorize(PAY, chat_id="chat", wait="deferred", requester="alice")
    assert isinstance(asked, Pending)
    from signoff.core.decision import Decision

    await ledger.approvals.decide(asked.approval.id, Decision.approve("alice"))
    return gate


async def test_a_continuation_of_a_call_that_ran_hears_its_recorded_result(ledger: Ledger) -> None:
    gate = await _approved(ledger)
    runs: list[dict[str, Any]] = []

    async def pay(args: dict[str, Any]) -> dict[str, Any]:
        runs.append(args)
        return {"paid": args["amount"], "balance": 950}

    first = await gated_call(gate, GatedCall(PAY, pay), chat_id="chat", wait="deferred")
    again = await gated_call(gate, GatedCall(PAY, pay), chat_id="chat", wait="deferred")
    assert first == again == Ran({"paid": 50, "balance": 950}) and len(runs) == 1
    (approval,) = await ledger.approvals.query()
    assert approval.outcome is not None and approval.outcome.ok and approval.worker
    moves = [e.action for e in await ledger.audit.entries() if e.subject == approval.id]
    assert moves == ["open", "approve", "consume", "finish"]


async def test_a_call_whose_process_died_is_told_as_started_and_unknown(ledger: Ledger) -> None:
    """The claim was taken (and the call ran, as far as anyone knows), and nothing more was recorded."""
    gate = await _approved(ledger)
    (approval,) = await ledger.approvals.query()
    await ledger.approvals.consume(approval.id, PAY, "signoff:server")  # ... and then the process died

    async def pay(args: dict[str, Any]) -> str:
        raise AssertionError("a call that started is never run again")

    told = await gated_call(gate, GatedCall(PAY, pay), chat_id="chat", wait="deferred")
    assert isinstance(told, Ran) and told.value["status"] == UNKNOWN
    message = told.value["message"]
    assert message.startswith("pay was started at ") and "by worker" in message and "not recorded" in message
    entries = [e for e in await ledger.audit.entries() if e.subject == approval.id]
    assert entries[-1].action == UNKNOWN and entries[-1].detail["why"] == message


async def test_a_call_that_failed_is_told_its_error_not_run_again(ledger: Ledger) -> None:
    gate = await _approved(ledger)

    async def pay(args: dict[str, Any]) -> str:
        raise RuntimeError("the bank said no")

    with pytest.raises(RuntimeError):
        await gated_call(gate, GatedCall(PAY, pay), chat_id="chat", wait="deferred")
    told = await gated_call(gate, GatedCall(PAY, pay), chat_id="chat", wait="deferred")
    assert told == Ran({"status": "failed", "error": "RuntimeError: the bank said no"})


def test_a_worker_killed_after_the_payment_leaves_the_truth_for_the_next(tmp_path: Path) -> None:
    """Two `signoff serve` processes on one PostgreSQL ledger. The tool pays and its worker dies at once,
    before anything is saved; the same continuation on the other worker says the payment started and its
    outcome is unknown, and the payment does not run again."""
    url = shared_url("postgres", tmp_path)
    runs = tmp_path / "runs.txt"
    args = ["serve", "--agent", "tests.plain_agents:crashing", "--anonymous-chats", "--ledger", url]
    env = {"SIGNOFF_TEST_RUNS": str(runs)}
    try:
        with (
            signoff_server(tmp_path, args, "admin", env=env, name="worker-a") as (a, dying),
            signoff_server(tmp_path, args, "admin", env=env, name="worker-b") as (b, _),
        ):
            first = user("crashed", "pay")
            asked = chunks(httpx.post(f"{a}/api/chat", json=first, timeout=30).text)
            approval_id = next(c["approvalId"] for c in asked if c["type"] == "tool-approval-request")
            decided = httpx.post(
                f"{a}/api/approvals/{approval_id}/decision", json={"approved": True},
                headers={"authorization": "Bearer admin"}, timeout=30,
            )  # fmt: skip
            assert decided.status_code == 200
            continuation = answer(first, asked, [(True, "")])
            with pytest.raises(httpx.HTTPError):
                httpx.post(f"{a}/api/chat", json=continuation, timeout=30).raise_for_status()
            assert dying.wait(10) == -9, "the worker died where the test meant it to"
            reply = chunks(httpx.post(f"{b}/api/chat", json=continuation, timeout=30).text)
    finally:
        asyncio.run(drop_url(url))
    assert runs.read_text().count("paid") == 1, "the payment ran once"
    outputs = [c for c in reply if c["type"].startswith("tool-output")]
    assert [o["type"] for o in outputs] == ["tool-output-available"], reply
    assert outputs[0]["output"]["status"] == UNKNOWN
    assert "was started at" in outputs[0]["output"]["message"]
    assert not [c for c in reply if c["type"] == "error"], reply


async def test_an_outcome_is_recorded_once_and_only_for_the_call_that_ran(ledger: Ledger) -> None:
    gate = await _approved(ledger)
    (approval,) = await ledger.approvals.query()
    with pytest.raises(IllegalTransition):  # nothing ran yet: no claim to finish
        await ledger.approvals.consume(approval.id, PAY, "gate", outcome=OK)
    await gate.run(PAY, lambda **args: "paid", chat_id="chat", wait="deferred")
    other = ToolCall("another", PAY.tool, PAY.args)
    with pytest.raises(IllegalTransition):  # finished already
        await ledger.approvals.consume(approval.id, PAY, "gate", outcome=OK)
    with pytest.raises((CallMismatch, IllegalTransition)):
        await ledger.approvals.consume(approval.id, other, "gate", outcome=OK)
    recorded = (await ledger.approvals.get(approval.id)).outcome
    assert recorded is not None and (recorded.ok, recorded.result, recorded.kept) == (True, "paid", True)


def test_a_result_is_kept_as_json_or_as_a_note_of_its_size() -> None:
    class Receipt(BaseModel):
        paid: int

    assert kept(CallOutcome(ok=True, result=Receipt(paid=5), at=1.0)).result == {"paid": 5}
    assert kept(CallOutcome(ok=True, result={"at": Path("/x")}, at=1.0)).result == {"at": "/x"}
    big = kept(CallOutcome(ok=True, result="x" * (MAX_KEPT + 1), at=1.0))
    assert not big.kept and big.result == f"a result of {MAX_KEPT + 3} bytes, too big to keep"
