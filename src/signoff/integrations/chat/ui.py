"""A chat's history as the UI messages a page holds: one rendering for every framework.

A framework's codec tells its history in a few words (`Entry`: a user's `Prompt`, the model's `Step` of
things `Said` and calls made, a call's `Result`), and `ui_messages` renders them. A reloaded page takes its
messages from the server, so each tool part comes back in the state the live stream left it in: a call
waiting on a person is `approval-requested` with its approval id, one waiting on the browser is
`input-available`, a refused call is `output-denied`. A reload then renders what the stream rendered, and
the buttons still work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.integrations.chat.state import ChatState

UIMessage = dict[str, Any]
PartOutcome = tuple[Literal["output-available", "output-error", "output-denied"], dict[str, Any]]
_APPROVED = (State.APPROVED, State.CONSUMED)


@dataclass(frozen=True, slots=True)
class Prompt:
    """A user message, as its texts."""

    texts: list[str]


@dataclass(frozen=True, slots=True)
class Said:
    """Text the model wrote, or its reasoning."""

    text: str
    reasoning: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """One model response: what it said and the calls it made, in order."""

    parts: list[Said | ToolCall]


@dataclass(frozen=True, slots=True)
class Result:
    """A call's result, as the page shows it (a framework's placeholder for a result is none)."""

    call_id: str
    outcome: PartOutcome


Entry = Prompt | Step | Result


def ui_messages(
    entries: Iterable[Entry], state: ChatState, approvals: Iterable[Approval], tasks: Mapping[str, object]
) -> list[UIMessage]:
    """The history as the page shows it: `state` says which calls wait on a person (its `approvals`) and
    the id the last assistant message streamed under. `tasks` holds the status of each long-running call
    whose news the model has not had, which the page shows in place of any result the history holds. Any
    other call with no result waits on the browser (or its run stopped before it ran)."""
    told = list(entries)
    results = {e.call_id: e.outcome for e in told if isinstance(e, Result)}
    results.update({call_id: ("output-available", {"output": status}) for call_id, status in tasks.items()})
    by_call = {a.call.call_id: a for a in approvals}
    transcript = _Transcript()
    for entry in told:
        match entry:
            case Prompt(texts):
                transcript.user([{"type": "text", "text": text} for text in texts])
            case Step(parts) if parts:
                transcript.step([_part(p, results, by_call, state.approvals) for p in parts])
    return transcript.done(state.assistant_id)


def _part(
    part: Said | ToolCall,
    results: Mapping[str, PartOutcome],
    approvals: Mapping[str, Approval],
    asking: Mapping[str, str],
) -> UIMessage:
    if isinstance(part, ToolCall):
        return _tool_part(part, results.get(part.call_id), approvals, asking)
    return {"type": "reasoning" if part.reasoning else "text", "text": part.text, "state": "done"}


class _Transcript:
    """A chat's UI messages, built in order from any framework's history. Every step the agent takes
    between two user messages goes into one assistant message, after a `step-start`, as the live stream
    puts it; the ids are positional, so a reload gives every message the id it had before."""

    def __init__(self) -> None:
        self.messages: list[UIMessage] = []
        self._assistant: UIMessage | None = None

    def user(self, parts: list[UIMessage]) -> None:
        self._assistant = None
        self.messages.append({"id": f"user-{len(self.messages)}", "role": "user", "parts": parts})

    def step(self, parts: Sequence[UIMessage]) -> None:
        if self._assistant is None:
            self._assistant = {"id": f"assistant-{len(self.messages)}", "role": "assistant", "parts": []}
            self.messages.append(self._assistant)
        self._assistant["parts"] += [{"type": "step-start"}, *parts]

    def done(self, assistant_id: str | None) -> list[UIMessage]:
        """The messages, the last assistant one under `assistant_id` if given: a continuation streams
        into the message it continues, so the page must hold it by that id."""
        if assistant_id and self.messages and self.messages[-1]["role"] == "assistant":
            self.messages[-1]["id"] = assistant_id
        return self.messages


def _tool_part(
    call: ToolCall, result: PartOutcome | None, approvals: Mapping[str, Approval], asking: Mapping[str, str]
) -> UIMessage:
    """`asking` maps the calls waiting on a person to their approval ids; a call with no `result` and no
    question waits on the browser (or the run stopped before it ran)."""
    ui: UIMessage = {"type": f"tool-{call.tool}", "toolCallId": call.call_id, "input": call.args}
    if call.call_id in asking:
        return {**ui, "state": "approval-requested", "approval": {"id": asking[call.call_id]}}
    answer = _answer(approvals.get(call.call_id))
    if result is None:
        return {**ui, "state": "input-available", **answer}
    state, fields = result
    return {**ui, "state": state, **fields, **answer}


def _answer(approval: Approval | None) -> dict[str, Any]:
    """The part's `approval` as the client would hold it after a response: absent if nobody was asked."""
    if approval is None or approval.state is State.PENDING:
        return {}
    answer: dict[str, Any] = {"id": approval.id, "approved": approval.state in _APPROVED}
    reason = approval.decision.reason if approval.decision else approval.closed_reason
    if reason:
        answer["reason"] = reason
    return {"approval": answer}
