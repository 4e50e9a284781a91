"""`signoff mcp-gateway` in front of a real MCP server, driven by the official `mcp` SDK's clients.

One gateway process (streamable HTTP, a SQLite ledger) serves the module; the upstream is
`tests/mcp_upstream.py`, spawned by the gateway over stdio, and writes a line per call it really ran, so
each test counts runs. Each test calls with arguments of its own, so their approvals never meet.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    INVALID_PARAMS,
    PROTOCOL_VERSION_META_KEY,
    CallToolResult,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from signoff.core.approval import Approval, State
from signoff.ledger import Ledger, open_ledger
from signoff.mcp import CONVERSATION
from signoff.mcp.gateway import WAITS
from tests.conftest import ROOT, SIGNOFF
from tests.servers import signoff_server

UPSTREAM = [sys.executable, str(ROOT / "tests" / "mcp_upstream.py")]
POLICY = """
[[tools.lookup]]
action = "allow"

[[tools.crash]]
action = "allow"

[[tools.env]]
action = "allow"

[[tools.sleep]]
action = "allow"

[[tools.confirm]]
when = "what in ['replayed round', 'replayed across']"
action = "ask"
approvers = ["role:finance"]
requester_may_approve = false

[[tools.confirm]]
when = "what == 'ask first'"
action = "ask"

[[tools.confirm]]
action = "allow"

[[tools.pay]]
when = "to == 'on-a-clock'"
action = "ask"
deadline = "2s"

[[tools.pay]]
when = "amount > 1000"
action = "ask"
approvers = ["role:finance"]
quorum = 2
requester_may_approve = false

[[tools.pay]]
action = "ask"
"""
MODERN = "2026-07-28"


@dataclass
class Gateway:
    base: str
    db: Path
    runs: Path
    tokens: dict[str, str]
    ledger_url: str = ""
    """The ledger's URL, where it is not the SQLite file `db`."""

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def ran(self, tool: str) -> list[dict[str, Any]]:
        lines = self.runs.read_text().splitlines() if self.runs.exists() else []
        return [json.loads(line)["args"] for line in lines if json.loads(line)["tool"] == tool]

    @asynccontextmanager
    async def ledger(self) -> AsyncIterator[Ledger]:
        async with open_ledger(self.ledger_url or f"sqlite:///{self.db}") as opened:
            yield opened

    async def approval(self, to: str) -> Approval:
        """The pay approval of the call paying `to`, once the gateway has opened it."""
        async with self.ledger() as ledger:
            for _ in range(200):
                found = [a for a in await ledger.approvals.query() if a.call.args.get("to") == to]
                if found:
                    return found[-1]
                await asyncio.sleep(0.05)
        raise AssertionError(f"no approval for a payment to {to}")

    async def approval_of(self, tool: str, what: str) -> Approval:
        """The approval of the call of `tool` whose `what` is `what`."""
        async with self.ledger() as ledger:
            found = [a for a in await ledger.approvals.query() if a.call.args.get("what") == what]
        assert [a.call.tool for a in found] == [tool], found
        return found[0]

    async def approvals(self, to: str) -> list[Approval]:
        async with self.ledger() as ledger:
            return [a for a in await ledger.approvals.query() if a.call.args.get("to") == to]

    def decide(
        self, approval_id: str, who: str, approved: bool, reason: str = "", remember: str = "once"
    ) -> httpx.Response:
        return httpx.post(
            f"{self.base}/api/approvals/{approval_id}/decision",
            json={"approved": approved, "reason": reason, "remember": remember},
            headers={"authorization": f"Bearer {self.tokens[who]}"},
        )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("gateway")
    db, runs, policy = directory / "ledger.db", directory / "runs.jsonl", directory / "policy.toml"
    policy.write_text(POLICY)
    tokens = asyncio.run(_principals(db))
    args = [
        "mcp-gateway", "--ledger", f"sqlite:///{db}", "--policy", str(policy), "--hold", "3",
        "--upstream-env", "UPSTREAM_RUNS", "--state-key-file", str(directory / "state.keys"),
        "--upstream-timeout", "2", "--", *UPSTREAM,
    ]  # fmt: skip
    env = {"UPSTREAM_RUNS": str(runs)}
    admin = "admin-" + os.urandom(8).hex()
    with signoff_server(directory, args, admin, env=env) as (base, _):
        yield Gateway(base, db, runs, {**tokens, "admin": admin})


async def _principals(db: Path | str) -> dict[str, str]:
    async with open_ledger(db if isinstance(db, str) else f"sqlite:///{db}") as ledger:
        tokens = {}
        for name, roles in (("alice", []), ("bob", ["finance"]), ("carol", ["finance"]), ("dave", [])):
            _, tokens[name] = await ledger.principals.register(name, roles, actor="cli:test")
        return tokens


def client(gateway: Gateway, who: str, mode: str = MODERN, **options: Any) -> Client:
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {gateway.tokens[who]}"}, timeout=httpx2.Timeout(30, read=120)
    )
    return Client(streamable_http_client(gateway.url, http_client=http), mode=mode, **options)


def answering(decision: str, reason: str = "", action: str = "accept", seen: list[Any] | None = None) -> Any:
    async def elicit(ctx: Any, params: Any) -> ElicitResult:
        if seen is not None:
            seen.append(params)
        content = {"decision": decision, "reason": reason} if action == "accept" else None
        return ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return elicit


def text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


# -- tools/list -------------------------------------------------------------------------------------------


async def test_tools_pass_through_and_those_that_may_ask_say_so(gateway: Gateway) -> None:
    async with Client(upstream_params(gateway), mode=MODERN) as direct, client(gateway, "alice") as fronted:
        upstream = {t.name: t for t in (await direct.list_tools()).tools}
        through = {t.name: t for t in (await fronted.list_tools()).tools}
    assert through.keys() == upstream.keys()
    for name, tool in through.items():
        assert tool.input_schema == upstream[name].input_schema
        assert tool.annotations == upstream[name].annotations
    assert through["lookup"].description == upstream["lookup"].description  # allowed: never asks
    assert through["pay"].description == f"{upstream['pay'].description}\n\n{WAITS}"
    assert through["peek"].annotations is not None and through["peek"].annotations.read_only_hint
    assert through["peek"].description is not None and through["peek"].description.endswith(WAITS)


def upstream_params(gateway: Gateway) -> Any:
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "UPSTREAM_RUNS": str(gateway.runs.with_suffix(".direct"))}
    return StdioServerParameters(command=UPSTREAM[0], args=UPSTREAM[1:], env=env)


# -- tools/call: allowed, and through a form -------------------------------------------------------------


async def test_an_allowed_call_runs_at_once_and_opens_no_approval(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        result = await mcp.call_tool("lookup", {"query": "allowed-1"})
    assert text(result) == "found allowed-1" and not result.is_error
    assert gateway.ran("lookup").count({"query": "allowed-1"}) == 1


async def test_a_modern_client_approves_in_its_form_and_the_upstream_runs_once(gateway: Gateway) -> None:
    seen: list[Any] = []
    async with client(gateway, "alice", elicitation_callback=answering("approve", "fine", seen=seen)) as mcp:
        result = await mcp.call_tool("pay", {"amount": 5, "to": "modern-yes"})
    assert text(result) == "paid 5.0 to modern-yes" and not result.is_error
    assert gateway.ran("pay").count({"amount": 5.0, "to": "modern-yes"}) == 1
    form = seen[0]
    assert isinstance(form, ElicitRequestFormParams)
    assert form.requested_schema["properties"]["decision"]["enum"] == ["approve", "deny"]
    assert "modern-yes" in form.message and "Waiting for" in form.message
    approval = await gateway.approval("modern-yes")
    assert approval.state is State.CONSUMED and approval.requester == "alice"
    assert approval.decision is not None and approval.decision.by == "alice"


async def test_a_modern_client_denies_and_the_upstream_never_runs(gateway: Gateway) -> None:
    async with client(gateway, "alice", elicitation_callback=answering("deny", "not today")) as mcp:
        result = await mcp.call_tool("pay", {"amount": 6, "to": "modern-no"})
    assert result.is_error and "not today" in text(result) and "denied" in text(result)
    assert gateway.ran("pay").count({"amount": 6.0, "to": "modern-no"}) == 0
    assert (await gateway.approval("modern-no")).state is State.DENIED


async def test_decline_is_a_denial_and_cancel_leaves_the_approval_pending(gateway: Gateway) -> None:
    async with client(gateway, "alice", elicitation_callback=answering("", action="decline")) as mcp:
        declined = await mcp.call_tool("pay", {"amount": 7, "to": "declined"})
    async with client(gateway, "alice", elicitation_callback=answering("", action="cancel")) as mcp:
        cancelled = await mcp.call_tool("pay", {"amount": 7, "to": "cancelled"})
    assert declined.is_error and (await gateway.approval("declined")).state is State.DENIED
    pending = await gateway.approval("cancelled")
    assert cancelled.is_error and pending.state is State.PENDING and pending.id in text(cancelled)
    assert not gateway.ran("pay") or all(p["to"] not in ("declined", "cancelled") for p in gateway.ran("pay"))


async def test_a_legacy_client_is_asked_mid_call(gateway: Gateway) -> None:
    seen: list[Any] = []
    options = {"elicitation_callback": answering("approve", seen=seen)}
    async with client(gateway, "alice", mode="legacy", **options) as mcp:
        result = await mcp.call_tool("pay", {"amount": 8, "to": "legacy-yes"})
    assert text(result) == "paid 8.0 to legacy-yes"
    assert gateway.ran("pay").count({"amount": 8.0, "to": "legacy-yes"}) == 1 and len(seen) == 1


# -- the upstream's own input rounds ---------------------------------------------------------------------


def _upstreams_question(seen: list[Any]) -> Any:
    async def elicit(ctx: Any, params: Any) -> ElicitResult:
        seen.append(params)
        if "sure" in params.requested_schema["properties"]:
            return ElicitResult(action="accept", content={"sure": True})
        return ElicitResult(action="accept", content={"decision": "approve"})

    return elicit


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_the_upstreams_own_question_reaches_the_client(gateway: Gateway, mode: str) -> None:
    seen: list[Any] = []
    async with client(gateway, "alice", mode=mode, elicitation_callback=_upstreams_question(seen)) as mcp:
        result = await mcp.call_tool("confirm", {"what": f"jump {mode}"})
    assert text(result) == f"did jump {mode}"
    assert [q.message for q in seen] == [f"Really jump {mode}?"]
    assert gateway.ran("confirm").count({"what": f"jump {mode}"}) == 1


async def test_a_call_approved_in_one_round_answers_the_upstreams_in_the_next(gateway: Gateway) -> None:
    seen: list[Any] = []
    async with client(gateway, "alice", elicitation_callback=_upstreams_question(seen)) as mcp:
        result = await mcp.call_tool("confirm", {"what": "ask first"})
    assert text(result) == "did ask first"
    assert "decision" in seen[0].requested_schema["properties"] and seen[1].message == "Really ask first?"
    assert gateway.ran("confirm").count({"what": "ask first"}) == 1


# -- a client without elicitation: out of band ----------------------------------------------------------


async def test_without_elicitation_the_call_waits_then_runs_once_after_a_decision(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        first = await mcp.call_tool("pay", {"amount": 9, "to": "out-of-band"})
        approval = await gateway.approval("out-of-band")
        assert first.is_error and approval.state is State.PENDING
        assert f"approval {approval.id} is waiting for" in text(first)
        assert f"decide at {gateway.base}/approvals" in text(first)
        assert "call the tool again with the same arguments" in text(first)
        again = await mcp.call_tool("pay", {"amount": 9, "to": "out-of-band"})  # still pending: no duplicate
        assert again.is_error and len(await gateway.approvals("out-of-band")) == 1
        assert gateway.decide(approval.id, "alice", True).status_code == 200
        ran = await mcp.call_tool("pay", {"amount": 9, "to": "out-of-band"})
        assert text(ran) == "paid 9.0 to out-of-band"
        assert gateway.ran("pay").count({"amount": 9.0, "to": "out-of-band"}) == 1
        new = await mcp.call_tool("pay", {"amount": 9, "to": "out-of-band"})  # it ran: a new question
    assert new.is_error and len(await gateway.approvals("out-of-band")) == 2
    assert gateway.ran("pay").count({"amount": 9.0, "to": "out-of-band"}) == 1


async def test_a_held_call_runs_when_decided_during_the_hold(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        held = asyncio.ensure_future(mcp.call_tool("pay", {"amount": 10, "to": "held"}))
        approval = await gateway.approval("held")
        assert gateway.decide(approval.id, "alice", True).status_code == 200
        result = await held
    assert text(result) == "paid 10.0 to held"


async def test_a_denial_out_of_band_is_told_to_the_next_identical_call(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        await mcp.call_tool("pay", {"amount": 11, "to": "told-no"})
        approval = await gateway.approval("told-no")
        assert gateway.decide(approval.id, "alice", False, "over budget").status_code == 200
        told = await mcp.call_tool("pay", {"amount": 11, "to": "told-no"})
        asked_anew = await mcp.call_tool("pay", {"amount": 11, "to": "told-no"})
    assert told.is_error and "over budget" in text(told)
    assert asked_anew.is_error and "is waiting for" in text(asked_anew)
    assert [a.state for a in await gateway.approvals("told-no")] == [State.DENIED, State.PENDING]
    assert gateway.ran("pay").count({"amount": 11.0, "to": "told-no"}) == 0


async def test_a_held_call_ends_at_its_deadline_refused(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        result = await mcp.call_tool("pay", {"amount": 14, "to": "on-a-clock"})
    assert result.is_error and "expired" in text(result)
    assert (await gateway.approval("on-a-clock")).state is State.EXPIRED
    assert gateway.ran("pay").count({"amount": 14.0, "to": "on-a-clock"}) == 0


async def test_a_session_grant_holds_in_its_conversation_only(gateway: Gateway) -> None:
    args = {"amount": 15, "to": "remembered"}
    here, there = {CONVERSATION: "here"}, {CONVERSATION: "there"}
    async with client(gateway, "alice") as mcp:
        asked = await mcp.call_tool("pay", args, meta=here)
        approval = await gateway.approval("remembered")
        assert asked.is_error and approval.chat_id == "mcp:alice/here"
        decided = gateway.decide(approval.id, "alice", True, remember="session")
        assert decided.status_code == 200, decided.text
        ran = [await mcp.call_tool("pay", args, meta=here) for _ in range(2)]  # the approval, then the grant
        elsewhere = await mcp.call_tool("pay", args, meta=there)
    assert [text(r) for r in ran] == ["paid 15.0 to remembered"] * 2
    assert elsewhere.is_error and "is waiting for" in text(elsewhere)
    assert gateway.ran("pay").count({"amount": 15.0, "to": "remembered"}) == 2
    assert len(await gateway.approvals("remembered")) == 2


def test_a_client_with_url_elicitation_only_gets_a_link_to_the_inbox(gateway: Gateway) -> None:
    meta = {
        PROTOCOL_VERSION_META_KEY: MODERN,
        CLIENT_CAPABILITIES_META_KEY: {"elicitation": {"url": {}}},
    }
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "pay", "arguments": {"amount": 16, "to": "by-link"}, "_meta": meta},
    }  # fmt: skip
    headers = {
        "authorization": f"Bearer {gateway.tokens['alice']}", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "pay",
    }  # fmt: skip
    answer = httpx.post(gateway.url, json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    data = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")] or [answer.text]
    result = json.loads(data[-1])["result"]
    assert result["resultType"] == "input_required"
    (question,) = result["inputRequests"].values()
    approval = asyncio.run(gateway.approval("by-link"))
    assert question["params"]["mode"] == "url"
    assert question["params"]["url"] == f"{gateway.base}/approvals#{approval.id}"
    assert approval.state is State.PENDING


# -- four eyes --------------------------------------------------------------------------------------------


async def test_four_eyes_the_requesters_approve_does_not_count_and_two_of_finance_do(
    gateway: Gateway,
) -> None:
    seen: list[Any] = []
    progress: list[str] = []

    async def heard(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def forged(ctx: Any, params: Any) -> ElicitResult:
        seen.append(params)
        if len(seen) == 1:  # the requester tries to approve its own call
            return ElicitResult(action="accept", content={"decision": "approve"})
        return ElicitResult(action="accept", content={"decision": "wait"})

    async with client(gateway, "alice", elicitation_callback=forged) as mcp:
        held = asyncio.ensure_future(
            mcp.call_tool("pay", {"amount": 5000, "to": "four-eyes"}, progress_callback=heard)
        )
        approval = await gateway.approval("four-eyes")
        for _ in range(200):  # asked again after the refused vote: now it waits
            if len(seen) >= 2 or held.done():
                break
            await asyncio.sleep(0.05)
        assert len(seen) == 2, held.result() if held.done() else seen
        assert gateway.decide(approval.id, "bob", True).status_code == 200
        assert gateway.decide(approval.id, "carol", True).status_code == 200
        result = await held
    assert text(result) == "paid 5000.0 to four-eyes"
    assert gateway.ran("pay").count({"amount": 5000.0, "to": "four-eyes"}) == 1
    assert seen[0].requested_schema["properties"]["decision"]["enum"] == ["wait"]
    assert "finance" in seen[0].message and "0 of 2" in seen[0].message
    assert any("waiting for finance" in m for m in progress)
    done = await gateway.approval("four-eyes")
    assert sorted(v.decision.by for v in done.votes) == ["bob", "carol"]
    async with gateway.ledger() as ledger:
        refused = [e for e in await ledger.audit.entries(0, 100_000) if e.subject == approval.id]
    assert any(e.action == "refuse" and e.actor == "alice" for e in refused)


# -- requestState attacks ---------------------------------------------------------------------------------


async def _first_round(mcp: Client, to: str) -> InputRequiredResult:
    first = await mcp.session.call_tool("pay", {"amount": 12, "to": to}, allow_input_required=True)
    assert isinstance(first, InputRequiredResult) and first.request_state
    return first


APPROVE = {"signoff": ElicitResult(action="accept", content={"decision": "approve"})}


async def _refusals(gateway: Gateway, actor: str) -> int:
    async with gateway.ledger() as ledger:
        entries = await ledger.audit.entries(0, 100_000)
    return sum(1 for e in entries if e.action == "refuse" and e.actor == actor and e.subject == "pay")


async def test_a_tampered_state_is_refused_audited_and_never_forwarded(gateway: Gateway) -> None:
    before = await _refusals(gateway, "alice")
    async with client(gateway, "alice", elicitation_callback=answering("approve")) as mcp:
        first = await _first_round(mcp, "tampered")
        state = first.request_state or ""
        forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError) as refused:
            await mcp.session.call_tool(
                "pay", {"amount": 12, "to": "tampered"}, request_state=forged, input_responses=APPROVE,
                allow_input_required=True,
            )  # fmt: skip
    assert refused.value.code == INVALID_PARAMS
    assert (await gateway.approval("tampered")).state is State.PENDING
    assert gateway.ran("pay").count({"amount": 12.0, "to": "tampered"}) == 0
    assert await _refusals(gateway, "alice") == before + 1


async def test_another_principals_state_is_refused(gateway: Gateway) -> None:
    async with client(gateway, "alice", elicitation_callback=answering("approve")) as mine:
        first = await _first_round(mine, "stolen")
    before = await _refusals(gateway, "dave")
    async with client(gateway, "dave", elicitation_callback=answering("approve")) as thief:
        with pytest.raises(MCPError) as refused:
            await thief.session.call_tool(
                "pay", {"amount": 12, "to": "stolen"}, request_state=first.request_state,
                input_responses=APPROVE, allow_input_required=True,
            )  # fmt: skip
    assert refused.value.code == INVALID_PARAMS
    assert (await gateway.approval("stolen")).state is State.PENDING
    assert gateway.ran("pay").count({"amount": 12.0, "to": "stolen"}) == 0
    assert await _refusals(gateway, "dave") == before + 1


async def test_a_replayed_answer_is_refused_after_its_call_ran(gateway: Gateway) -> None:
    async with client(gateway, "alice", elicitation_callback=answering("approve")) as mcp:
        first = await _first_round(mcp, "replayed")
        answer = {"request_state": first.request_state, "input_responses": APPROVE}
        ran = await mcp.session.call_tool("pay", {"amount": 12, "to": "replayed"}, **answer)
        assert text(ran) == "paid 12.0 to replayed"
        before = await _refusals(gateway, "alice")
        with pytest.raises(MCPError) as refused:
            await mcp.session.call_tool(
                "pay", {"amount": 12, "to": "replayed"}, allow_input_required=True, **answer
            )
    assert refused.value.code == INVALID_PARAMS
    assert gateway.ran("pay").count({"amount": 12.0, "to": "replayed"}) == 1
    assert len(await gateway.approvals("replayed")) == 1
    assert await _refusals(gateway, "alice") == before + 1


SURE = {"sure": ElicitResult(action="accept", content={"sure": True})}


async def replay_the_upstreams_round(asker: Gateway, replayers: Sequence[Gateway], what: str) -> list[Any]:
    """Issue 41's attack: alice's `confirm` waits for finance (four eyes); bob approves it over REST; alice
    calls again, the gateway claims the approval and the upstream answers with an input round of its own;
    alice sends that round's state back four times, through each of `replayers` in turn, all at once.
    Returns each replay's result, or the error it raised."""
    args = {"what": what}
    async with client(asker, "alice", elicitation_callback=answering("wait")) as mcp:
        held = await mcp.session.call_tool("confirm", args, allow_input_required=True)
        assert isinstance(held, InputRequiredResult)
        approval = await asker.approval_of("confirm", what)
        assert asker.decide(approval.id, "bob", True).status_code == 200
        theirs = await mcp.session.call_tool("confirm", args, allow_input_required=True)
        assert isinstance(theirs, InputRequiredResult) and "sure" in theirs.input_requests

    async def replay(through: Gateway) -> Any:
        async with client(through, "alice", elicitation_callback=answering("wait")) as again:
            return await again.session.call_tool(
                "confirm", args, request_state=theirs.request_state, input_responses=SURE,
                allow_input_required=True,
            )  # fmt: skip

    replays = (replay(replayers[n % len(replayers)]) for n in range(4))
    return [_leaf(outcome) for outcome in await asyncio.gather(*replays, return_exceptions=True)]


def _leaf(outcome: Any) -> Any:
    """The error itself, out of the task groups the client's context wraps it in."""
    while isinstance(outcome, BaseExceptionGroup) and len(outcome.exceptions) == 1:
        outcome = outcome.exceptions[0]
    return outcome


def ran_once_and_refused_the_rest(outcomes: list[Any], gateway: Gateway, what: str) -> None:
    ran = [o for o in outcomes if isinstance(o, CallToolResult)]
    refused = [o for o in outcomes if isinstance(o, MCPError)]
    assert [text(r) for r in ran] == [f"did {what}"], outcomes
    assert len(refused) == 3 and all(e.code == INVALID_PARAMS for e in refused), outcomes
    assert gateway.ran("confirm").count({"what": what}) == 1


async def test_one_approval_runs_the_upstreams_round_once_however_often_it_is_replayed(
    gateway: Gateway,
) -> None:
    outcomes = await replay_the_upstreams_round(gateway, [gateway], "replayed round")
    ran_once_and_refused_the_rest(outcomes, gateway, "replayed round")
    approval = await gateway.approval_of("confirm", "replayed round")
    assert approval.state is State.CONSUMED and len(approval.spent) == 1
    async with gateway.ledger() as ledger:
        entries = await ledger.audit.entries(0, 100_000)
    refused = [e for e in entries if e.subject == approval.id and e.action == "refuse"]
    assert len(refused) == 3 and all("used already" in e.detail["why"] for e in refused)
    moves = [e.action for e in entries if e.subject == approval.id and e.action != "refuse"]
    assert moves == ["open", "approve", "consume", "finish", "spend"]


# -- bad input and a failing upstream ---------------------------------------------------------------------


async def test_bad_arguments_and_unknown_tools_are_json_rpc_errors(gateway: Gateway) -> None:
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    async with client(gateway, "alice") as mcp:
        for name, args in (("lookup", {"query": deep}), ("lookup", {"query": "x" * 300_000}), ("nope", {})):
            with pytest.raises(MCPError) as refused:
                await mcp.session.call_tool(name, args)
            assert refused.value.code == INVALID_PARAMS
    assert all(a["query"] == "allowed-1" or len(a["query"]) < 1000 for a in gateway.ran("lookup"))


async def test_without_a_bearer_token_an_mcp_request_is_a_401_and_audited(gateway: Gateway) -> None:
    """A refusal nobody answers for is counted in the audit (one entry per source, kind and second), as
    on every other route."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient() as http:
        answers = [
            await http.post(gateway.url, json=body, headers={"accept": "application/json, text/event-stream"})
            for _ in range(3)
        ]
    assert all(a.status_code == 401 and a.headers["www-authenticate"] == "Bearer" for a in answers)
    for _ in range(50):  # the count is written once its second ends
        async with gateway.ledger() as ledger:
            counted = [
                e
                for e in await ledger.audit.entries(0, 100_000)
                if e.action == "unauthorized" and "/mcp" in e.detail.get("paths", [])
            ]
        if counted:
            break
        await asyncio.sleep(0.1)
    assert [(e.detail["kind"], e.detail["count"]) for e in counted] == [("no-credential", 3)]


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"jsonrpc": "2.0", "id": 1, "method": "no/such/method", "params": {}}',
        b"[" * 10_000,
    ],
)
def test_malformed_json_rpc_is_never_a_5xx(gateway: Gateway, body: bytes) -> None:
    headers = {
        "authorization": f"Bearer {gateway.tokens['alice']}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
    }
    answer = httpx.post(gateway.url, content=body, headers=headers)
    assert answer.status_code < 500, answer.text


async def test_an_upstream_that_crashes_is_an_error_result_and_is_started_again(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        crashed = await mcp.call_tool("crash", {})
        after = await mcp.call_tool("lookup", {"query": "after-crash"})
    assert crashed.is_error and "upstream" in text(crashed)
    assert text(after) == "found after-crash"


async def test_an_upstream_that_hangs_is_an_error_result_and_the_gateway_serves_on(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        hung = await mcp.call_tool("sleep", {"seconds": 4})
        after = await mcp.call_tool("lookup", {"query": "after-hang"})
    assert hung.is_error and "did not answer within 2 s" in text(hung)
    assert text(after) == "found after-hang"


async def test_the_spawned_upstream_gets_only_what_it_is_given(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        result = await mcp.call_tool(
            "env", {"names": ["SIGNOFF_API_TOKEN", "UPSTREAM_RUNS", "SIGNOFF_AUDIT_KEY_FILE"]}
        )
    seen = json.loads(text(result))
    assert seen == {
        "SIGNOFF_API_TOKEN": None,
        "UPSTREAM_RUNS": str(gateway.runs),
        "SIGNOFF_AUDIT_KEY_FILE": None,
    }


async def test_annotations_never_make_a_call_allowed(gateway: Gateway) -> None:
    async with client(gateway, "alice") as mcp:
        result = await mcp.call_tool("peek", {"path": "/etc/passwd"})
    assert result.is_error and "is waiting for" in text(result)
    assert gateway.ran("peek") == []


# -- stdio ------------------------------------------------------------------------------------------------


def stdio_gateway(tmp_path: Path) -> tuple[Any, Path, Path, dict[str, str]]:
    """`signoff mcp-gateway --stdio` as a client spawns it: its parameters, ledger, runs file, environment."""
    from mcp.client.stdio import StdioServerParameters

    db, runs, policy = tmp_path / "ledger.db", tmp_path / "runs.jsonl", tmp_path / "policy.toml"
    policy.write_text(POLICY)
    env = {**os.environ, "UPSTREAM_RUNS": str(runs), "SIGNOFF_API_TOKEN": "not-for-the-upstream"}
    args = [
        "mcp-gateway", "--stdio", "--ledger", f"sqlite:///{db}", "--policy", str(policy), "--hold", "0",
        "--state-key-file", str(tmp_path / "state.keys"), "--upstream-env", "UPSTREAM_RUNS", "--", *UPSTREAM,
    ]  # fmt: skip
    return StdioServerParameters(command=SIGNOFF, args=args, env=env), db, runs, env


async def test_a_stdio_gateway_applies_deadlines_while_no_call_is_made(tmp_path: Path) -> None:
    params, db, _, _ = stdio_gateway(tmp_path)
    async with Client(params, mode=MODERN) as mcp:
        await mcp.call_tool("pay", {"amount": 17, "to": "on-a-clock"})
        async with open_ledger(f"sqlite:///{db}") as ledger:
            for _ in range(100):
                (approval,) = await ledger.approvals.query()
                if approval.state is not State.PENDING:
                    break
                await asyncio.sleep(0.1)
    assert approval.state is State.EXPIRED


async def test_over_stdio_the_requester_is_the_os_user_and_the_cli_decides(tmp_path: Path) -> None:
    params, db, runs, env = stdio_gateway(tmp_path)
    async with Client(params, mode=MODERN) as mcp:
        first = await mcp.call_tool("pay", {"amount": 3, "to": "stdio"})
        async with open_ledger(f"sqlite:///{db}") as ledger:
            (approval,) = await ledger.approvals.query()
        hint = f"signoff approvals approve {approval.id} --ledger sqlite:///{db}"
        assert first.is_error and hint in text(first), "the hint names the ledger the gateway was given"
        assert approval.requester.startswith("mcp:")
        decided = await asyncio.to_thread(
            subprocess.run,
            [SIGNOFF, "approvals", "approve", approval.id, "--ledger", f"sqlite:///{db}"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert decided.returncode == 0, decided.stderr
        ran = await mcp.call_tool("pay", {"amount": 3, "to": "stdio"})
    assert text(ran) == "paid 3.0 to stdio"
    assert runs.read_text().count('"pay"') == 1
