"""An ADK session's events read two ways: for what they leave open, and told in signoff's words for a
page that loads or reloads the chat (`integrations.chat.ui` renders them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.events.event import Event
from google.genai import types

from signoff.core.call import ToolCall
from signoff.integrations.adk.plugin import outcome
from signoff.integrations.adk.stream import CONFIRMATION
from signoff.integrations.framework import Entry, Prompt, Result, Said, Step


def calls_of(events: Iterable[Event]) -> dict[str, ToolCall]:
    """Every call the agent made in these events, by id."""
    return {
        call.id: ToolCall(call.id, call.name or "", dict(call.args or {}))
        for event in events
        for call in event.get_function_calls()
        if call.id and call.name != CONFIRMATION
    }


@dataclass(frozen=True)
class SessionCalls:
    """What a session's events leave open: every call made (by id), the calls with no result yet (call id
    to tool name), ADK's unanswered confirmation call for each call it asked about, and the calls that
    have had a later response from the user's side (a long-running call's news)."""

    made: dict[str, ToolCall]
    calls: dict[str, str]
    confirmations: dict[str, str]
    told: set[str]


def open_in(events: Sequence[Event]) -> SessionCalls:
    made = calls_of(events)
    last: dict[str, dict[str, Any]] = {}
    told: set[str] = set()
    asked: dict[str, str] = {}
    confirmed: set[str] = set()
    for event in events:
        for call in event.get_function_calls():
            if call.name == CONFIRMATION and call.id:
                original = dict(call.args or {}).get("originalFunctionCall") or {}
                asked[str(original.get("id"))] = call.id
        for response in event.get_function_responses():
            if not response.id:
                continue
            if response.name == CONFIRMATION:
                confirmed.add(response.id)
                continue
            last[response.id] = dict(response.response or {})
            if event.author == "user":
                told.add(response.id)
    calls = {c: call.tool for c, call in made.items() if c not in last or outcome(last[c]) is None}
    confirmations = {c: id_ for c, id_ in asked.items() if id_ not in confirmed}
    return SessionCalls(made, calls, confirmations, told)


def transcript(events: Sequence[Event]) -> Iterator[Entry]:
    """The session in the words `integrations.chat.ui` renders. ADK's confirmation calls and the placeholder
    results of deferred calls are signoff's plumbing, never parts."""
    for event in events:
        parts = event.content.parts if event.content and event.content.parts else []
        if event.author == "user":
            if texts := [p.text for p in parts if p.text]:
                yield Prompt(texts)
        else:
            yield Step([said for part in parts if (said := _said(part)) is not None])
        for response in event.get_function_responses():
            result = outcome(dict(response.response or {}))
            if response.name != CONFIRMATION and response.id and result is not None:
                yield Result(response.id, result)


def _said(part: types.Part) -> Said | ToolCall | None:
    if part.text and not part.thought:
        return Said(part.text)
    if (call := part.function_call) is not None and call.name != CONFIRMATION and call.id:
        return ToolCall(call.id, call.name or "", dict(call.args or {}))
    return None
