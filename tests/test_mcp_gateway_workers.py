"""Two `signoff mcp-gateway` processes on one PostgreSQL ledger: an input round begun on one is answered on
the other, and a call held on one runs when a person decides through the other's API."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_types import InputRequiredResult

from signoff.core.approval import State
from tests.conftest import drop_url, shared_url
from tests.servers import signoff_server
from tests.test_mcp_gateway import (
    APPROVE,
    POLICY,
    UPSTREAM,
    Gateway,
    _principals,
    answering,
    client,
    ran_once_and_refused_the_rest,
    replay_the_upstreams_round,
    text,
)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Gateway, Gateway]]:
    url = shared_url("postgres", tmp_path)
    runs, policy = tmp_path / "runs.jsonl", tmp_path / "policy.toml"
    policy.write_text(POLICY)
    tokens = asyncio.run(_principals(url))
    admin = "admin-" + os.urandom(8).hex()
    args = [
        "mcp-gateway", "--ledger", url, "--policy", str(policy), "--hold", "20",
        "--upstream-env", "UPSTREAM_RUNS", "--upstream-env", "UPSTREAM_STATE_KEY",
        "--state-key-file", str(tmp_path / "state.keys"), "--", *UPSTREAM,
    ]  # fmt: skip
    env = {"UPSTREAM_RUNS": str(runs), "UPSTREAM_STATE_KEY": os.urandom(32).hex()}  # for each one's upstream
    try:
        with contextlib.ExitStack() as stack:
            bases = [
                stack.enter_context(signoff_server(tmp_path, args, admin, env=env, name=f"gateway-{n}"))[0]
                for n in (1, 2)
            ]
            yield tuple(  # type: ignore[misc]
                Gateway(base, tmp_path / "unused.db", runs, {**tokens, "admin": admin}, ledger_url=url)
                for base in bases
            )
    finally:
        asyncio.run(drop_url(url))


async def test_a_round_begun_on_one_worker_is_answered_on_the_other(pair: tuple[Gateway, Gateway]) -> None:
    one, other = pair
    args = {"amount": 20, "to": "across"}
    async with client(one, "alice", elicitation_callback=answering("approve")) as first:
        asked = await first.session.call_tool("pay", args, allow_input_required=True)
    assert isinstance(asked, InputRequiredResult)
    async with client(other, "alice", elicitation_callback=answering("approve")) as second:
        ran = await second.session.call_tool(
            "pay", args, request_state=asked.request_state, input_responses=APPROVE
        )
    assert text(ran) == "paid 20.0 to across"
    assert one.ran("pay").count({"amount": 20.0, "to": "across"}) == 1
    assert (await one.approval("across")).state is State.CONSUMED


async def test_a_call_held_on_one_worker_runs_when_decided_through_the_other(
    pair: tuple[Gateway, Gateway],
) -> None:
    one, other = pair
    async with client(one, "alice") as mcp:
        held = asyncio.ensure_future(mcp.call_tool("pay", {"amount": 21, "to": "held-across"}))
        approval = await one.approval("held-across")
        decided = await asyncio.to_thread(other.decide, approval.id, "alice", True)
        assert decided.status_code == 200, decided.text
        result = await asyncio.wait_for(held, 15)
    assert text(result) == "paid 21.0 to held-across"
    assert one.ran("pay").count({"amount": 21.0, "to": "held-across"}) == 1


async def test_a_round_replayed_on_both_workers_at_once_runs_once(pair: tuple[Gateway, Gateway]) -> None:
    one, other = pair
    outcomes = await replay_the_upstreams_round(one, [one, other], "replayed across")
    ran_once_and_refused_the_rest(outcomes, one, "replayed across")
