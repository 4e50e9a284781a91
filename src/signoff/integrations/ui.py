"""A tool call as a UI message part, the way a chat page holds it: one answer for every framework.

A reloaded page takes its messages from the server, so each tool part comes back in the state the live
stream left it in: a call waiting on a person is `approval-requested` with its approval id, one waiting on
the browser is `input-available`, a refused call is `output-denied`. A reload then renders what the stream
rendered, and the buttons still work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall

UIMessage = dict[str, Any]
PartOutcome = tuple[Literal["output-available", "output-error", "output-denied"], dict[str, Any]]
_APPROVED = (State.APPROVED, State.CONSUMED)


class Transcript:
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


def tool_part(
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
