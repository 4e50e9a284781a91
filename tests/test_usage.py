"""An ADK reply's `finish` carries the run's token usage in `messageMetadata.usage`, as the README says: what
the AI SDK's own servers send, and what a page shows or bills by. The scripted model reports usage as
Gemini does, so the figures come from ADK's events, not from signoff."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from signoff.demo.walkthrough import demo_policy
from tests.chats import Site, chunks, serve_demo, user


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async for served in serve_demo("adk", demo_policy()):
        yield served


def usage_of(reply: list[dict[str, Any]]) -> dict[str, Any]:
    [finish] = [c for c in reply if c["type"] == "finish"]
    return dict(finish.get("messageMetadata", {}).get("usage", {}))


@pytest.mark.parametrize(
    ("text", "reason"), [("weather in Tokyo", "stop"), ("pay 50 USD to Hanako", "tool-calls")]
)
async def test_an_adk_finish_carries_the_runs_token_usage(site: Site, text: str, reason: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://{site.base}", timeout=20) as client:
        reply = chunks((await client.post("/api/chat", json=user("c1", text))).text)
    assert [c["finishReason"] for c in reply if c["type"] == "finish"] == [reason]
    usage = usage_of(reply)
    assert set(usage) == {"inputTokens", "outputTokens", "totalTokens"}, usage
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
