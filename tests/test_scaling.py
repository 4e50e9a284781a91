"""Several workers, one ledger: real `signoff serve` processes sharing PostgreSQL or Redis, with the
decisions made by a separate approver process through the other worker than the one that waits."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.ledger import open_ledger
from tests.conftest import ROOT, drop_url, shared_url
from tests.servers import signoff_server

TOKEN = "scale-" + os.urandom(6).hex()
AUTH = {"authorization": f"Bearer {TOKEN}"}
POLICY = str(ROOT / "src" / "signoff" / "demo" / "policy.toml")
CHATS = 500
"""Chats per wait mode: the issue asks for 500 blocking and 500 deferred."""


@pytest.fixture(params=["postgres", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    url = shared_url(str(request.param), tmp_path)
    yield url
    asyncio.run(drop_url(url))


def workers(
    stack: ExitStack, tmp_path: Path, url: str, count: int = 2
) -> list[tuple[str, subprocess.Popen[bytes]]]:
    """`count` independent `signoff serve` processes on one ledger, each on its own port."""
    args = ["serve", "--agent", "tests.scale_agent:agent", "--policy", POLICY, "--ledger", url]
    env = {"SIGNOFF_TEST_RUNS": str(tmp_path / "runs.jsonl"), "PYTHONPATH": str(ROOT)}
    return [
        stack.enter_context(
            signoff_server(
                tmp_path, [*args, "--keepalive", "1"], TOKEN, env=env, name=f"worker{i}", timeout=30
            )
        )
        for i in range(count)
    ]


def user(chat: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {"id": "u-" + chat, "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat, "trigger": "submit-message", "messages": [message], **extra}


def chunks(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def continuation(first: dict[str, Any], reply: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client sends after its user answered: the ledger's earlier decision stands either way."""
    inputs = {c["toolCallId"]: c for c in reply if c["type"] == "tool-input-available"}
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    for asked in (c for c in reply if c["type"] == "tool-approval-request"):
        call = inputs[asked["toolCallId"]]
        parts.append(
            {
                "type": f"tool-{call['toolName']}",
                "toolCallId": call["toolCallId"],
                "state": "approval-responded",
                "input": call["input"],
                "approval": {"id": asked["approvalId"], "approved": True},
            }
        )
    return {
        **first,
        "messages": [*first["messages"], {"id": reply[0]["messageId"], "role": "assistant", "parts": parts}],
    }


def runs(tmp_path: Path) -> Counter[str]:
    path = tmp_path / "runs.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(json.loads(line)["recipient"] for line in lines)


def finished(body: str) -> bool:
    return body.count("[DONE]") == 1 and chunks(body)[-1]["type"] == "finish"


async def test_two_workers_and_an_approver_run_every_approved_call_exactly_once(
    url: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        bases = [base for base, _ in workers(stack, tmp_path, url)]
        approver = subprocess.Popen(
            [sys.executable, "-m", "tests.workers", "approve", ",".join(bases), TOKEN, str(2 * CHATS)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        limits = httpx.Limits(max_connections=2 * CHATS + 50, max_keepalive_connections=100)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            gate = asyncio.Semaphore(300)

            async def blocking(n: int) -> str:
                worker = n % 2
                chat = f"blk-{worker}-{n}"
                async with gate:
                    response = await client.post(
                        f"{bases[worker]}/api/chat",
                        json=user(chat, f"pay {n + 1} USD to b{n}", wait="blocking"),
                    )
                assert response.status_code == 200 and finished(response.text), response.text[-300:]
                return response.text

            async def deferred(n: int) -> str:
                worker = n % 2
                chat = f"def-{worker}-{n}"
                first = user(chat, f"pay {n + 1} USD to d{n}", wait="deferred")
                async with gate:
                    response = await client.post(f"{bases[worker]}/api/chat", json=first)
                assert response.status_code == 200 and finished(response.text), response.text[-300:]
                reply = chunks(response.text)
                [asked] = [c for c in reply if c["type"] == "tool-approval-request"]
                while True:  # the approver decides through the other worker; this chat's user reloads there
                    view = (await client.get(f"{bases[1 - worker]}/api/chat/{chat}")).json()
                    if view["approvals"][0]["state"] != "pending":
                        break
                    await asyncio.sleep(0.1)
                assert view["approvals"][0]["id"] == asked["approvalId"]
                async with gate:  # and the reply goes on there, on the worker that did not start it
                    response = await client.post(
                        f"{bases[1 - worker]}/api/chat", json=continuation(first, reply)
                    )
                assert response.status_code == 200 and finished(response.text), response.text[-300:]
                return response.text

            replies = await asyncio.wait_for(
                asyncio.gather(*(blocking(n) for n in range(CHATS)), *(deferred(n) for n in range(CHATS))),
                600,
            )
        out, _ = approver.communicate(timeout=60)
        assert approver.returncode == 0 and json.loads(out)["decided"] == 2 * CHATS

    denied = {f"{mode}{n}" for mode in "bd" for n in range(0, CHATS, 10)}
    ran = runs(tmp_path)
    assert set(ran.values()) == {1}, "a call ran more than once"
    assert set(ran) == {f"{mode}{n}" for mode in "bd" for n in range(CHATS)} - denied
    for n, text in enumerate(replies[:CHATS]):
        said = "".join(c["delta"] for c in chunks(text) if c["type"] == "text-delta")
        assert ("not this one" in said) == (n % 10 == 0), said
    async with open_ledger(url) as ledger:
        assert await ledger.approvals(state="pending") == []
        actions = Counter(e.action for e in await ledger.audit(limit=100_000))
        assert actions["open"] == 2 * CHATS and actions["consume"] == len(ran)
        assert actions["approve"] == len(ran) and actions["deny"] == len(denied)
        assert (await ledger.verify_audit())[1] is None
