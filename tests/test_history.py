"""A long chat costs what is new, not what it holds: a worker keeps the history it saved last, parsed, and
saves a reply by appending its messages to the history as saved. Both must give exactly what parsing and
dumping the whole history would, on this worker and on any other."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from unittest import mock

from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse

from signoff.core.approval import State
from signoff.core.decision import Decision
from signoff.core.principal import Principal
from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.gate import Gate
from signoff.integrations.chat.history import Histories
from signoff.integrations.chat.state import ChatState, state_of
from signoff.integrations.pydantic_ai import chat as pydantic_chat
from signoff.integrations.pydantic_ai.chat import MESSAGES, AgentChat, History
from signoff.integrations.pydantic_ai.messages import open_calls
from signoff.ledger import Ledger, MemoryLedger, SqliteLedger
from signoff.ledger.records import Entries, StoredChat
from signoff.protocol import ToolApprovalRequest, ToolInputAvailable, parse_chat_request

ME = Principal(id="browser:me", via="session")


def last_step(history: History) -> bytes:
    return history.since(lambda message: isinstance(message, ModelResponse))


async def load_state(ledger: Ledger, chat_id: str) -> tuple[StoredChat | None, ChatState]:
    stored = await ledger.chats.load(chat_id)
    return stored, state_of(stored)


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
        assert kept is not None and len(last_step(kept.history)) < len(bytes(state.history)) / 3
        assert (
            open_calls(last_step(kept.history))
            == open_calls(bytes(state.history))
            == {call.tool_call_id: "process_payment"}
        )
        there = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        assert there.histories.at("c1", stored) is None
        mine, theirs = (await here.load("c1")).state, (await there.load("c1")).state
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
        read = (await here.load("c1")).history
        assert read.json() == bytes(state.history) and len(read.messages) == 8


async def test_a_save_writes_only_the_messages_it_adds_and_an_older_chat_moves_its_history_out() -> None:
    """A chat's history is stored as its entries, a message each, so a save passes the ledger only the
    new messages. A chat saved before entries holds its history in its state: it reads as before, and its
    next save moves the whole history into entries."""
    async with MemoryLedger() as ledger:
        chat = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        await pay(chat, 0)
        stored, state = await load_state(ledger, "c1")
        assert stored is not None and len(stored.entries) == 4
        older = b'{"history":%s,"assistant_id":"%s"}' % (bytes(state.history), state.assistant_id.encode())
        await ledger.chats.save("c1", older, version=stored.version, entries=Entries(0))
        added: list[tuple[int, int]] = []
        with mock.patch.object(ledger.chats, "save", wraps=ledger.chats.save) as saves:
            later = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
            for n in range(1, 3):
                await pay(later, n)
                entries = [
                    call.kwargs["entries"] for call in saves.call_args_list if "entries" in call.kwargs
                ]
                added += [(e.kept, len(e.added)) for e in entries[len(added) :]]
        # the first save moves the older chat's whole history (4 messages, and the 2 of the new question);
        # each later one keeps what the ledger holds but the last message, which the run may have rebuilt
        assert added[0] == (0, 6) and len(added) == 4, added
        totals = [6, 8, 10, 12]  # per flow: the prompt and the model's call, its result and the answer
        for (kept, new), before, after in zip(added[1:], totals[:-1], totals[1:], strict=True):
            assert before - 1 <= kept <= before and kept + new == after, added
        stored, state = await load_state(ledger, "c1")
        assert stored is not None and "history" not in json.loads(stored.state)
        assert bytes(state.history) == ModelMessagesTypeAdapter.dump_json(
            ModelMessagesTypeAdapter.validate_json(bytes(state.history))
        )
        assert len(stored.entries) == 12


async def test_a_parked_reply_keeps_the_history_it_began_from_as_the_entries() -> None:
    """While a blocking reply waits, the chat's entries are the history it began from and the parked
    state holds the run's own; a worker that picks the chat up reads the parked history, and its save
    writes only what the entries lack."""
    async with MemoryLedger() as ledger:
        here = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        await pay(here, 0)
        began = list((await ledger.chats.load("c1")).entries)  # type: ignore[union-attr]
        prompt = {"id": "u9", "role": "user", "parts": [{"type": "text", "text": "pay 5 USD to Hanako"}]}
        body = {"id": "c1", "messages": [prompt], "trigger": "submit-message"}
        reply = await here.prepare(parse_chat_request(json.dumps(body).encode()), "blocking", ME)
        running = asyncio.create_task(reply.run(lambda chunk: None))
        while not json.loads((await ledger.chats.load("c1")).state).get("parked"):  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
        stored, _ = await load_state(ledger, "c1")
        assert stored is not None and list(stored.entries) == began
        there = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        read = (await there.load("c1")).history
        assert len(read.messages) == len(began) + 2 and read.stored == len(began)  # the question, the call
        [waiting] = await ledger.approvals.query(state=State.PENDING)
        await ledger.approvals.decide(waiting.id, Decision.approve("bob"))
        await running
        stored, state = await load_state(ledger, "c1")
        assert stored is not None and "parked" not in json.loads(stored.state)
        assert list(stored.entries[: len(began)]) == began and len(stored.entries) == len(began) + 4
        assert (await here.load("c1")).history.json() == bytes(state.history)


async def test_a_chat_dropped_here_while_its_record_is_read_is_read_whole(tmp_path: Path) -> None:
    """A worker asks for the version it holds without its state; if the chat leaves its keeping while that
    read is under way (pushed out by others, or saved anew by another request here), the record came
    without the state it now needs, and it reads it again rather than fail."""
    async with SqliteLedger(tmp_path / "s.db") as ledger:
        here = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        here.histories = Histories(size=1)
        await pay(here, 0)
        read = ledger.chats.load

        async def load_chat(chat_id: str, *, held: int | None = None) -> StoredChat | None:
            found = await read(chat_id, held=held)
            here.histories.keep("other", 1, History(MESSAGES, []), ChatState())  # meanwhile: pushed out
            return found

        with mock.patch.object(ledger.chats, "load", load_chat):
            await pay(here, 1)
        stored = await ledger.chats.load("c1")
        assert stored is not None and len(stored.entries) == 8
