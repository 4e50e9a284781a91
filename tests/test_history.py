"""A long chat costs what is new, not what it holds: a worker keeps the history it saved last, parsed, and
saves a reply by appending its messages to the history as saved. Both must give exactly what parsing and
dumping the whole history would, on this worker and on any other."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from pydantic_ai.messages import ModelMessagesTypeAdapter

from signoff.core.principal import Principal
from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.gate import Gate
from signoff.integrations.pydantic_ai import chat as pydantic_chat
from signoff.integrations.pydantic_ai.chat import AgentChat, saved
from signoff.integrations.pydantic_ai.messages import open_calls
from signoff.integrations.state import load_state
from signoff.ledger import MemoryLedger
from signoff.protocol import ToolApprovalRequest, ToolInputAvailable, parse_chat_request

ME = Principal(id="browser:me", via="session")


async def turn(chat: AgentChat, messages: list[dict[str, Any]], message_id: str | None = None) -> list[Any]:
    body: dict[str, Any] = {"id": "c1", "messages": messages, "trigger": "submit-message"}
    if message_id:
        body["messageId"] = message_id
    reply = await chat.prepare(parse_chat_request(json.dumps(body).encode()), "deferred", ME)
    chunks: list[Any] = []
    await reply.run(chunks.append)
    return chunks


async def pay(chat: AgentChat, n: int) -> None:
    """One approved payment in chat c1, as the client sends it (its copy of the chat is not needed)."""
    prompt = {"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": "pay 5 USD to Hanako"}]}
    asked = await turn(chat, [prompt])
    call = next(c for c in asked if isinstance(c, ToolInputAvailable))
    question = next(c for c in asked if isinstance(c, ToolApprovalRequest))
    part = {
        "type": "tool-process_payment", "toolCallId": call.tool_call_id, "state": "approval-responded",
        "input": call.input, "approval": {"id": question.approval_id, "approved": True},
    }  # fmt: skip
    assistant = {"id": asked[0].message_id, "role": "assistant", "parts": [part]}
    answered = await turn(chat, [prompt, assistant], asked[0].message_id)
    assert "Paid 5 USD to Hanako" in "".join(getattr(c, "delta", "") for c in answered)


async def test_a_chat_saved_by_appending_reads_back_the_same_here_and_on_another_worker() -> None:
    async with MemoryLedger() as ledger:
        here = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        there = AgentChat(demo_agent(), Gate(ledger, demo_policy()))  # another worker: keeps nothing of c1
        parse = ModelMessagesTypeAdapter.validate_json
        # parses per flow: the new chat's first request; none while `here` holds what it saved; one where
        # the other worker saved last
        expected = [1, 0, 0, 1, 1]
        with mock.patch.object(
            pydantic_chat, "ModelMessagesTypeAdapter", wraps=ModelMessagesTypeAdapter
        ) as seen:
            for n, chat in enumerate([here, here, here, there, here]):
                parses = seen.validate_json.call_count
                await pay(chat, n)
                assert seen.validate_json.call_count - parses == expected[n], n
                saved = bytes((await load_state(ledger, "c1"))[1].history)
                assert saved == ModelMessagesTypeAdapter.dump_json(parse(saved))  # exactly a whole dump
                assert len(parse(saved)) == 4 * (n + 1)  # prompt, tool call, tool return, reply per flow


async def test_a_chat_saved_here_is_not_read_again_and_waits_on_what_its_record_says() -> None:
    """The worker that saved a chat reads only its version, and what it waits on from the kept last step;
    it must find exactly what reading the whole record finds, as a worker that did not save it does."""
    async with MemoryLedger() as ledger:
        here = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        for n in range(3):
            await pay(here, n)
        prompt = {"id": "u9", "role": "user", "parts": [{"type": "text", "text": "pay 5 USD to Hanako"}]}
        asked = await turn(here, [prompt])  # now it waits on this payment's approval
        stored, state = await load_state(ledger, "c1")
        kept = here.histories.at("c1", stored)
        call = next(c for c in asked if isinstance(c, ToolInputAvailable))
        assert kept is not None and len(kept.last_step()) < len(bytes(state.history)) / 3
        assert (
            open_calls(kept.last_step())
            == open_calls(bytes(state.history))
            == {call.tool_call_id: "process_payment"}
        )
        there = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        assert there.histories.at("c1", stored) is None
        mine, theirs = (await here.load("c1"))[1], (await there.load("c1"))[1]
        assert mine.approvals == theirs.approvals != {} and mine.assistant_id == theirs.assistant_id
        assert (await here.view("c1")).messages == (await there.view("c1")).messages


async def test_a_worker_reads_a_chat_anew_once_another_saved_it() -> None:
    async with MemoryLedger() as ledger:
        here = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        there = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        await pay(here, 0)
        await pay(there, 1)
        stored, state = await load_state(ledger, "c1")
        assert here.histories.at("c1", stored) is None  # its copy is of an older version
        read = here.histories.read("c1", (stored, state))
        assert saved(read) == bytes(state.history) and len(read.messages) == 8
