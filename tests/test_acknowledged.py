"""Acknowledged browser tools (issue 31): the server answers the call at once, the browser acts on the call
as it sees it, and one stream carries the whole turn. Nobody can be asked first, so a policy that could ask
is refused when the chat is built; what the browser reports later is audited once and never reaches the
model. The demo's `change_bgm` is one, on both frameworks."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from signoff.core.errors import PolicyError
from signoff.core.policy import Policy
from signoff.core.principal import Principal
from signoff.demo.runtime import demo_agent_for
from signoff.gate import Gate
from signoff.integrations.chat.acknowledged import record_acted, result_digest
from signoff.ledger import MemoryLedger
from signoff.protocol import ToolOutput
from signoff.server.loading import chat_for
from tests.chats import PLAYS, Site, chunks, said, user


def chat_with(runtime: str, policy: str) -> None:
    gate = Gate(MemoryLedger(), Policy.from_toml(policy))
    chat_for(demo_agent_for(runtime), gate, model=None, signing_key=b"k" * 32, browser_timeout=5)


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param('[[tools.change_bgm]]\naction = "ask"\n', id="asked"),
        pytest.param('[[tools.change_bgm]]\naction = "allow"\nwhen = "track != \'x\'"\n', id="conditional"),
        pytest.param('[[tools.get_weather]]\naction = "allow"\n', id="left-to-the-default"),
        pytest.param('[[tools.change_bgm]]\naction = "deny"\n', id="denied"),
    ],
)
def test_a_policy_that_could_ask_about_an_acknowledged_tool_is_refused(runtime: str, policy: str) -> None:
    with pytest.raises(PolicyError, match=r"change_bgm is an acknowledged browser tool.*unconditional allow"):
        chat_with(runtime, policy)


def test_a_policy_that_allows_it_outright_is_taken(runtime: str) -> None:
    chat_with(runtime, PLAYS)


async def played(client: httpx.AsyncClient, chat: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    first = user(chat, "play lullaby")
    response = await client.post("/api/chat", json=first)
    assert response.status_code == 200, response.text
    return first, chunks(response.text)


def holding(first: dict[str, Any], reply: list[dict[str, Any]], part: dict[str, Any]) -> dict[str, Any]:
    """The chat as the client holds it, sent again: the assistant message last (`part`: the call's)."""
    assistant = {"id": reply[0]["messageId"], "role": "assistant", "parts": [{"type": "step-start"}, part]}
    return {**first, "messages": [*first["messages"], assistant]}


async def test_one_request_carries_the_whole_turn(site: Site) -> None:
    async with httpx.AsyncClient(base_url=f"http://{site.base}") as client:
        tools = {t["name"]: t for t in (await client.get("/api/chat/c1")).json()["tools"]}
        assert tools["change_bgm"]["browser"] is True and tools["change_bgm"]["acknowledged"] is True
        assert "acknowledged" not in tools["get_location"]
        _, reply = await played(client, "c1")
    kinds = [c["type"] for c in reply]
    assert "data-browser-call" not in kinds and "tool-approval-request" not in kinds
    (output,) = [c for c in reply if c["type"] == "tool-output-available"]
    assert output["output"] == {"success": True, "track": "lullaby", "message": "the browser plays lullaby"}
    assert "Now playing lullaby." in "".join(c["delta"] for c in reply if c["type"] == "text-delta")
    assert reply[-1]["type"] == "finish" and reply[-1].get("finishReason") != "tool-calls"


async def test_a_chat_sent_again_after_the_browser_reported_changes_nothing(site: Site) -> None:
    """A client that sends the chat again after its browser reported (addToolOutput, then a send): nothing
    waits, so the request is refused, nothing runs, the model hears nothing, and nothing is recorded (the
    live socket records a report made while the turn runs: see test_live.py)."""
    async with httpx.AsyncClient(base_url=f"http://{site.base}") as client:
        first, reply = await played(client, "c1")
        call = next(c for c in reply if c["type"] == "tool-input-available")
        part = {"type": "tool-change_bgm", "toolCallId": call["toolCallId"], "input": call["input"]}
        failed = holding(first, reply, {**part, "state": "output-error", "errorText": "autoplay was blocked"})
        response = await client.post("/api/chat", json=failed)
        assert response.status_code == 409, response.text
        assert "not waiting on any approval or tool result" in response.json()["error"]["message"]
        asked = user("c1", "weather in Oslo")["messages"][0]
        later = await client.post("/api/chat", json={**failed, "messages": [*failed["messages"], asked]})
        assert later.status_code == 200 and "autoplay" not in said(later.text) and "°C" in said(later.text)
    assert await acted(site, call["toolCallId"]) == []


async def test_a_report_is_recorded_once_and_an_echo_never() -> None:
    ledger, owner = MemoryLedger(), Principal(id="alice")
    sent = ToolOutput(call_id="c1", tool="change_bgm", output={"success": True})
    failed = ToolOutput(call_id="c1", tool="change_bgm", error_text="autoplay was blocked " + "x" * 5_000)
    known = {"c1": result_digest(sent), "c2": ""}
    async with ledger:
        await record_acted(ledger, "chat", owner, known, [sent])
        assert [e for e in await ledger.audit.entries(0, 100) if e.action == "acted"] == []
        for _ in range(3):
            await record_acted(ledger, "chat", owner, known, [failed, ToolOutput(call_id="c3", tool="x")])
        (entry,) = [e for e in await ledger.audit.entries(0, 100) if e.action == "acted"]
    assert (
        entry.subject == "c1" and entry.actor == "alice" and entry.detail["result"] == result_digest(failed)
    )
    assert entry.detail["why"] == REPORTED.format("it failed: autoplay was blocked " + "x" * 179)
    assert known["c1"] == result_digest(failed)


REPORTED = "the browser reported on an acknowledged call ({}); the model is not told"


async def acted(site: Site, call_id: str) -> list[dict[str, Any]]:
    entries = await site.ledger.audit.entries(0, 10_000)
    return [dict(e.detail) for e in entries if (e.action, e.subject) == ("acted", call_id)]
