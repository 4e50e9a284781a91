"""An ADK session's events as AI SDK UI messages, for a page that loads or reloads a chat.

The tool parts come out as `signoff.integrations.ui` shapes them for every framework. ADK's own
confirmation calls and the placeholder results of deferred calls are signoff's plumbing, never parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.events.event import Event

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.integrations.adk.plugin import outcome
from signoff.integrations.adk.stream import CONFIRMATION
from signoff.integrations.state import ChatState
from signoff.integrations.ui import PartOutcome, Transcript, UIMessage, tool_part


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


def _results(events: Sequence[Event]) -> dict[str, PartOutcome]:
    results: dict[str, PartOutcome] = {}
    for event in events:
        for response in event.get_function_responses():
            if response.name == CONFIRMATION or not response.id:
                continue
            if (result := outcome(dict(response.response or {}))) is not None:
                results[response.id] = result
    return results


def ui_messages(
    events: Sequence[Event], state: ChatState, approvals: Iterable[Approval], tasks: Mapping[str, object] = {}
) -> list[UIMessage]:
    """`tasks` holds the status of each long-running call whose news the model has not had: the page
    shows how far the task got, not the pending result the session holds."""
    results = _results(events)
    results.update({call_id: ("output-available", {"output": status}) for call_id, status in tasks.items()})
    by_call = {a.call.call_id: a for a in approvals}
    transcript = Transcript()
    for event in events:
        parts = event.content.parts if event.content and event.content.parts else []
        if event.author == "user":
            if texts := [{"type": "text", "text": p.text} for p in parts if p.text]:
                transcript.user(texts)
            continue
        step: list[UIMessage] = []
        for part in parts:
            if part.text and not part.thought:
                step.append({"type": "text", "text": part.text, "state": "done"})
            elif (call := part.function_call) is not None and call.name != CONFIRMATION and call.id:
                made = ToolCall(call.id, call.name or "", dict(call.args or {}))
                step.append(tool_part(made, results.get(call.id), by_call, state.approvals))
        if step:
            transcript.step(step)
    return transcript.done(state.assistant_id)
