"""What tests of the chat server share: an in-loop demo server (uvicorn in the test's own loop) and the
request bodies and reply readings an AI SDK client would make."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from signoff.core.approval import State
from signoff.core.policy import Policy
from signoff.demo.agent import demo_agent
from signoff.demo.runtime import demo_agent_for
from signoff.demo.tools import Wallets
from signoff.ledger import Ledger, MemoryLedger
from signoff.server.app import Settings, create_app
from tests.servers import in_loop

TOKEN = "test-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
JSON = {"content-type": "application/json"}


@dataclass
class Server:
    client: httpx.AsyncClient
    ledger: Ledger


async def serve(ledger: Ledger, policy: Policy, **settings: Any) -> AsyncIterator[Server]:
    await ledger.start()
    app = create_app(demo_agent(), ledger, Settings(token=TOKEN, anonymous=True, **settings), policy=policy)
    async with in_loop(app) as host, httpx.AsyncClient(base_url=f"http://{host}", timeout=20) as client:
        yield Server(client, ledger)
    await ledger.close()


def user(chat: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {"id": "u-" + text[:8], "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat, "trigger": "submit-message", "messages": [message], **extra}


def chunks(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def said(body: str) -> str:
    """What the model wrote in a reply, joined from its text deltas."""
    return spoken(chunks(body))


def spoken(reply: list[dict[str, Any]]) -> str:
    """What the model wrote in a reply already split into chunks."""
    return "".join(c["delta"] for c in reply if c["type"] == "text-delta")


def answer(
    first: dict[str, Any], reply: list[dict[str, Any]], verdicts: list[tuple[bool, str]]
) -> dict[str, Any]:
    """The continuation body a client sends after answering every approval request in `reply`."""
    inputs = {c["toolCallId"]: c for c in reply if c["type"] == "tool-input-available"}
    asked = [c for c in reply if c["type"] == "tool-approval-request"]
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    for request, (approved, reason) in zip(asked, verdicts, strict=True):
        call = inputs[request["toolCallId"]]
        parts.append(
            {
                "type": f"tool-{call['toolName']}",
                "toolCallId": call["toolCallId"],
                "state": "approval-responded",
                "input": call["input"],
                "approval": {"id": request["approvalId"], "approved": approved, "reason": reason},
            }
        )
    assistant = {"id": reply[0]["messageId"], "role": "assistant", "parts": parts}
    return {**first, "messages": [*first["messages"], assistant]}


async def ask(
    site: Server, chat: str, text: str = "pay 50 USD to Hanako"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    first = user(chat, text)
    response = await site.client.post("/api/chat", json=first)
    assert response.status_code == 200, response.text
    return first, chunks(response.text)


async def pending(site: Server, chat: str, count: int) -> list[dict[str, Any]]:
    for _ in range(500):
        found = (await site.client.get(f"/api/approvals?state=pending&chat={chat}", headers=AUTH)).json()
        if len(found["approvals"]) >= count:
            return list(found["approvals"])
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} pending approvals never appeared in {chat}")


def with_output(body: dict[str, Any], reply: list[dict[str, Any]], **result: Any) -> dict[str, Any]:
    """The continuation a page sends after running the browser tool of `reply` (`addToolOutput`)."""
    call = next(c for c in reply if c["type"] == "tool-input-available")
    part = {
        "type": f"tool-{call['toolName']}",
        "toolCallId": call["toolCallId"],
        "input": call["input"],
        **result,
    }
    assistant = {"id": reply[0]["messageId"], "role": "assistant", "parts": [{"type": "step-start"}, part]}
    return {**body, "messages": [*body["messages"][:1], assistant]}


Verdict = tuple[bool, str]
"""Approve or deny, with the reason a person gave."""


@dataclass
class Site:
    base: str
    ledger: Ledger
    wallets: Wallets


PLAYS = '[[tools.change_bgm]]\naction = "allow"\n'
"""The demo's acknowledged tool, which a policy for the demo must allow outright."""


async def serve_demo(runtime: str, policy: Policy) -> AsyncIterator[Site]:
    ledger, wallets = MemoryLedger(), Wallets()
    await ledger.start()
    app = create_app(
        demo_agent_for(runtime, wallets=wallets),
        ledger,
        Settings(token="t", anonymous=True, sweep=0.1),
        policy=policy,
    )
    async with in_loop(app) as host:
        yield Site(host, ledger, wallets)
    await ledger.close()


def tool_part(call: dict[str, Any], **state: Any) -> dict[str, Any]:
    return {
        "type": f"tool-{call['toolName']}",
        "toolCallId": call["toolCallId"],
        "input": call["input"],
        **state,
    }


def responded(call: dict[str, Any], request: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    approved, reason = verdict
    answer = {"id": request["approvalId"], "approved": approved, "reason": reason}
    return tool_part(call, state="approval-responded", approval=answer)


async def decided(site: Site, approval_id: str) -> None:
    for _ in range(300):
        if (await site.ledger.approvals.get(approval_id)).state is not State.PENDING:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"approval {approval_id} was never decided")
