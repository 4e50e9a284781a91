"""The conversation machine: every framework's chat takes the same action for the same request in the same
state, so the rule is tested once here, and through both adapters by the conformance tests."""

from __future__ import annotations

import json

import pytest

from signoff.integrations.chat.machine import (
    REFUSALS,
    TRANSITIONS,
    Action,
    Open,
    Request,
    Waits,
    next_action,
    request_of,
    streams_into_open_message,
)
from signoff.integrations.chat.state import encode_state, state_of
from signoff.ledger import MemoryLedger
from signoff.protocol import parse_chat_request


def test_every_state_answers_every_request() -> None:
    assert set(TRANSITIONS) == set(Waits)
    for state, row in TRANSITIONS.items():
        assert set(row) == set(Request), state
        if Action.REFUSE in row.values():
            assert state in REFUSALS  # a refused client is always told why


@pytest.mark.parametrize(
    ("open_", "waits"),
    [
        (Open(), Waits.NOTHING),
        (Open(approvals=True), Waits.PERSON),
        (Open(approvals=True, browser=True), Waits.BROWSER),
        (Open(approvals=True, browser=True, overdue=True), Waits.OVERDUE),
        (Open(tasks=True), Waits.TASKS),
        (Open(approvals=True, tasks=True), Waits.PERSON),  # only a message moves a chat on from its tasks
    ],
)
def test_what_a_chat_waits_on_comes_from_what_is_open(open_: Open, waits: Waits) -> None:
    assert open_.waits is waits


def test_answers_continue_only_a_chat_that_waits_on_them() -> None:
    assert next_action(Open(approvals=True), Request.ANSWERS) is Action.CONTINUE
    assert next_action(Open(browser=True), Request.ANSWERS) is Action.CONTINUE
    assert next_action(Open(), Request.ANSWERS) is Action.REFUSE
    assert next_action(Open(tasks=True), Request.ANSWERS) is Action.REFUSE


def test_a_new_message_supersedes_whatever_is_open() -> None:
    assert next_action(Open(), Request.MESSAGE) is Action.RUN
    for open_ in (
        Open(approvals=True),
        Open(browser=True),
        Open(browser=True, overdue=True),
        Open(tasks=True),
    ):
        assert next_action(open_, Request.MESSAGE) is Action.SUPERSEDE


def test_the_servers_own_continuation_runs_only_once_results_are_overdue() -> None:
    assert next_action(Open(browser=True, overdue=True), Request.OVERDUE) is Action.EXPIRE
    assert next_action(Open(browser=True, overdue=True), Request.ANSWERS) is Action.EXPIRE  # late: unused
    for open_ in (Open(), Open(browser=True), Open(approvals=True), Open(tasks=True)):
        assert next_action(open_, Request.OVERDUE) is Action.IGNORE


def test_only_a_continuation_streams_into_the_open_assistant_message() -> None:
    assert {a for a in Action if streams_into_open_message(a)} == {Action.CONTINUE, Action.EXPIRE}


def test_a_request_is_classified_by_what_it_carries() -> None:
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    message = parse_chat_request(b'{"id": "c1", "messages": [' + _json(user) + b"]}")
    assert request_of(message) is Request.MESSAGE
    assert request_of(message, server=True) is Request.OVERDUE
    regenerate = parse_chat_request(
        b'{"id": "c1", "trigger": "regenerate-message", "messages": [' + _json(user) + b"]}"
    )
    assert request_of(regenerate) is Request.REGENERATE


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


async def test_a_chat_saved_before_the_rename_still_waits_on_its_browser_calls() -> None:
    """Chat state is stored: the browser calls keep the field names the first chats were saved with."""
    async with MemoryLedger() as ledger:
        saved = b'{"frontend": {"c1": "get_location"}, "frontend_due": 5.0, "assistant_id": "m1"}'
        await ledger.chats.save("chat", saved, version=0, owner="alice")
        state = state_of(await ledger.chats.load("chat"))
    assert state.browser_calls == {"c1": "get_location"} and state.browser_due == 5.0
    assert not state.overdue(4.9) and state.overdue(5.0)
    assert b'"frontend":{"c1":"get_location"}' in encode_state(state)
