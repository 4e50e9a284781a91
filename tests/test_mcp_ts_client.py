"""`signoff mcp-gateway` driven by the MCP TypeScript SDK's own client (tests/js/mcp_client.mjs).

The newest 1.x SDK speaks the legacy protocol versions only (2025-11-25 at most), so with the elicitation
capability declared it is asked mid-call (`elicitation/create`) and answers in its request handler. The
gateway, its principals and the upstream that counts its runs are tests/test_mcp_gateway.py's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from typing import Any

from signoff.core.approval import State
from tests.jsclient import JS_DIR, ensure_installed, needs_node
from tests.test_mcp_gateway import Gateway, gateway

__all__ = ["gateway"]  # the fixture these tests use, from the module that defines it

pytestmark = needs_node
MCP_CLIENT = JS_DIR / "mcp_client.mjs"
LEGACY = "2025-11-25"


async def ts_call(
    gateway: Gateway, who: str, tool: str, args: dict[str, Any], decision: str, reason: str
) -> Any:
    """One call through the TypeScript client, each form it is shown answered with `decision` and `reason`:
    its report, {protocolVersion, elicitations, result}."""
    ensure_installed()
    command = ["node", str(MCP_CLIENT), gateway.url, tool, json.dumps(args), decision, reason]
    env = {**os.environ, "MCP_TOKEN": gateway.tokens[who]}
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, timeout=90, env=env, check=False
    )
    assert done.returncode == 0, f"mcp_client.mjs exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def said(result: dict[str, Any]) -> str:
    return " ".join(c["text"] for c in result["content"] if c["type"] == "text")


async def test_the_ts_client_approves_in_the_mid_call_form_and_the_upstream_runs_once(
    gateway: Gateway,
) -> None:
    report = await ts_call(gateway, "alice", "pay", {"amount": 5, "to": "ts-yes"}, "approve", "fine")
    assert report["protocolVersion"] == LEGACY
    result = report["result"]
    assert said(result) == "paid 5.0 to ts-yes" and not result.get("isError")
    assert gateway.ran("pay").count({"amount": 5.0, "to": "ts-yes"}) == 1
    [form] = report["elicitations"]
    assert form.get("mode", "form") == "form"
    assert form["requestedSchema"]["properties"]["decision"]["enum"] == ["approve", "deny"]
    assert "ts-yes" in form["message"] and "Waiting for" in form["message"]
    approval = await gateway.approval("ts-yes")
    assert approval.state is State.CONSUMED and approval.requester == "alice"
    assert approval.decision is not None and approval.decision.by == "alice"
    assert approval.decision.reason == "fine"


async def test_the_ts_client_denies_and_the_upstream_never_runs(gateway: Gateway) -> None:
    report = await ts_call(gateway, "alice", "pay", {"amount": 6, "to": "ts-no"}, "deny", "not today")
    result = report["result"]
    assert result["isError"] and "not today" in said(result) and "denied" in said(result)
    assert len(report["elicitations"]) == 1
    assert gateway.ran("pay").count({"amount": 6.0, "to": "ts-no"}) == 0
    assert (await gateway.approval("ts-no")).state is State.DENIED
