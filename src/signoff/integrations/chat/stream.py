"""The run driver shared by every framework: a run's events and the gate's news, merged into chunks.

Two sources feed one reply. The framework's event stream says what the model writes and what tools
return; the gate says, through the turn, when a call starts waiting for a person or is handed to the
browser. A blocked tool stops the framework's stream, so that news has to travel beside it: both go
through one `Relay`, in the order they happen, and a framework's `Translator` turns each into chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeGuard

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.task import Task
from signoff.integrations.chat.turn import (
    Answered,
    Asked,
    Handed,
    Progressed,
    Turn,
    Withheld,
    current_turn,
)
from signoff.integrations.chat.ui import PartOutcome
from signoff.integrations.chat.writing import Writing
from signoff.protocol import (
    Abort,
    Chunk,
    Data,
    Finish,
    FinishStep,
    StartStep,
    ToolApprovalRequest,
    ToolInputAvailable,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputDenied,
    ToolOutputError,
    sign,
)


class Translator:
    """Turns a framework's events, and the gate's events of its turn, into chunks; sans-I/O. This part
    is what every framework shares: the gate's news, and the steps (a step opens at the first part of a
    model response and closes before the next one or at the end)."""

    def __init__(
        self, turn: Turn, message_id: str, visible: Iterable[str] = (), *, signing_key: bytes = b""
    ) -> None:
        self.turn = turn
        self.message_id = message_id
        self.signing_key = signing_key
        self.visible = set(visible)
        """The calls of the message being streamed: its own and those of an earlier request it continues."""
        self.continued = frozenset(self.visible)
        """The calls of the earlier request this reply continues."""
        self.asked: dict[str, Approval] = {}
        """The calls this reply asked a person about, each with its approval as asked (to ask again at a
        later pause while it waits)."""
        self.since_pause: set[str] = set()
        """The calls whose question went out in the client's stream now open: since the last pause."""
        self.reopened: frozenset[str] | None = None
        """The calls answered by the message that opened the client's stream now open; None when no
        answer opened one since the last pause."""
        self.tasks: dict[str, str] = {}
        """The calls whose task this reply has shown: call id to task id. The framework's own result for
        such a call (the same pending status) is not sent again."""
        self.interrupt: Callable[[], None] = lambda: None
        """Stops the run where it is (set by `drive` while it runs): the reply ends with `abort`."""
        self.step_open = False
        self.responding = False
        self.unresolved: dict[str, str] = dict.fromkeys(self.visible, "")
        """The calls of the message with no result yet, to their tool's name where this reply announced
        them: a live turn pauses on them, and its browser's results may answer them."""
        self.paused = False
        """A live turn's stream paused, and nothing was streamed since."""
        self.shown: set[str] = set()
        """The calls whose question (to a person, or to the browser) went out in this reply."""
        self.withheld: set[str] = set()
        """Calls whose result went out before the framework reported it."""
        self.writing = Writing(message_id)

    def feed(self, item: Any) -> list[Chunk]:
        chunks = self._chunks(item)
        if self.turn.browser is None:  # only a live turn pauses: its client stays to answer
            return chunks
        if isinstance(item, Withheld) and item.call.call_id in self.unresolved:
            self.withheld.add(item.call.call_id)  # its result goes now, while the client may be paused
            chunks = [output(item.call.call_id, item.outcome)]
        elif self.withheld:  # the framework's own result for it comes later: it went already
            chunks = [c for c in chunks if not (_is_result(c) and c.tool_call_id in self.withheld)]
        for chunk in chunks:
            if isinstance(chunk, ToolInputAvailable):
                self.unresolved[chunk.tool_call_id] = chunk.tool_name
            elif _is_result(chunk):
                self.unresolved.pop(chunk.tool_call_id, None)
        match item:
            case Asked(approval):
                self.shown.add(approval.call.call_id)
            case Handed(call):
                self.shown.add(call.call_id)
        if isinstance(item, Answered) and item.accepted:
            self.reopened = item.calls
        if chunks or (isinstance(item, Answered) and item.accepted):
            self.paused = False
        if not self.paused and self.waits_on_client():
            self.paused = True
            chunks = [*chunks, *self.pause()]
        return chunks

    def waits_on_client(self) -> bool:
        """Whether every open call of a live turn waits for a person or for the browser, and none for an
        answer being recorded: then nothing comes until the client (or someone) answers."""
        turn, browser = self.turn, self.turn.browser
        assert browser is not None
        return bool(self.unresolved) and all(
            c in self.shown and (c in turn.waiting or c in browser.awaited) and c not in turn.answering
            for c in self.unresolved
        )

    def pause(self) -> list[Chunk]:
        """The pause of a live turn (issue 20): `finish-step`, where a standard AI SDK client ends its
        stream, so it may answer with an ordinary message; the rest of the turn streams into the stream
        that message opens. The results of the paused step's calls follow without a new `start-step`:
        the model's next response opens one.

        In a stream an answer opened, a question still waiting that the answer left alone and that went
        out in an earlier stream is asked again before it: a client answering a step's questions one at a
        time reads the rest of them in each stream it opens, and seed 000's transport ends a stream only
        at a `finish-step` that follows a question. A question the answer did answer (one vote of a
        quorum) is not asked again: its card already says it waits on others."""
        left = self.reopened
        again = [
            approval_request(approval, self.signing_key)
            for call_id, approval in self.asked.items()
            if left is not None
            and call_id in self.turn.waiting
            and call_id not in self.since_pause
            and call_id not in left
        ]
        self.since_pause.clear()
        self.reopened = None
        self.step_open = False
        return [*again, FinishStep()]

    def _chunks(self, item: Any) -> list[Chunk]:
        match item:
            case Asked(approval):
                if approval.call.call_id not in self.visible:
                    return []
                self.asked[approval.call.call_id] = approval
                self.since_pause.add(approval.call.call_id)
                return [approval_request(approval, self.signing_key)]
            case Handed(call):
                return handed(call) if call.call_id in self.visible else []
            case Progressed(task):
                return self.task(task)
            case Answered() | Withheld():
                return []
        return self.translate(item)

    def task(self, task: Task) -> list[Chunk]:
        """A task of this turn changed: its data part, kept by id so the page holds one per task; the
        call's first result, pending, the first time; and its final result when it ends in the stream."""
        call_id = task.call.call_id
        if call_id not in self.visible:
            return []
        chunks: list[Chunk] = [Data(name="task", id=task.id, data=task.public())]
        if call_id not in self.tasks or task.state.finished:
            chunks.append(ToolOutputAvailable(tool_call_id=call_id, output=task.status()))
        self.tasks[call_id] = task.id
        return chunks

    def translate(self, item: Any) -> list[Chunk]:
        """The chunks of one of the framework's own events."""
        raise NotImplementedError

    def handover(self, calls: Iterable[ToolCall]) -> list[Chunk]:
        """Of the browser calls the run ends with open, those a person approved: the client still holds
        them as asked or answered, so their input is said to be available again, which moves them to the
        state where the page runs them."""
        approved = self.asked.keys() | self.continued
        return [
            ToolInputAvailable(tool_call_id=c.call_id, tool_name=c.tool, input=c.args)
            for c in calls
            if c.call_id in approved and c.call_id not in self.tasks
        ]

    def called(self, call: ToolCall) -> list[Chunk]:
        """A call the model made, whole: the step it opens (if none is open), and the call announced with
        its input."""
        announced = self.announce(call.call_id, call.tool)
        available = ToolInputAvailable(tool_call_id=call.call_id, tool_name=call.tool, input=call.args)
        return [*self.open_step(), announced, available]

    def returned(self, call_id: str, outcome: PartOutcome) -> list[Chunk]:
        """A call's result, if the streamed message shows it: the call is the message's, and no task's
        status went out for it (that status is its news)."""
        self.responding = False
        shown = call_id in self.visible and call_id not in self.tasks
        return [output(call_id, outcome)] if shown else []

    def finish(
        self, left: Iterable[ToolCall], *, waiting: bool, usage: dict[str, int] | None = None
    ) -> list[Chunk]:
        """The run's end: the approved browser calls among those `left` open handed over (see `handover`),
        the step closed, and `finish`, whose reason says whether the chat now waits (on a person, the
        browser or a task) or the reply is done, with the run's token usage as the AI SDK names it
        (`inputTokens`, `outputTokens`, `totalTokens`) where the model reported any."""
        metadata = {"usage": usage} if usage else None
        finish = Finish(finish_reason="tool-calls" if waiting else "stop", message_metadata=metadata)
        return [*self.handover(left), *self.close_step(), finish]

    def announce(self, call_id: str, tool: str) -> ToolInputStart:
        """A call of the streamed message starts: the gate's news of it (its question, its hand-over to
        the browser) is this reply's to show from now on."""
        self.visible.add(call_id)
        return ToolInputStart(tool_call_id=call_id, tool_name=tool)

    def open_step(self) -> list[Chunk]:
        if self.responding:
            return []
        closing = self.close_step()
        self.responding = self.step_open = True
        return [*closing, StartStep()]

    def close_step(self) -> list[Chunk]:
        if not self.step_open:
            return []
        self.step_open = False
        return [FinishStep()]


def _is_result(chunk: Chunk) -> TypeGuard[ToolOutputAvailable | ToolOutputError | ToolOutputDenied]:
    return isinstance(chunk, ToolOutputAvailable | ToolOutputError | ToolOutputDenied)


def approval_request(approval: Approval, signing_key: bytes) -> ToolApprovalRequest:
    """The request carries a signature that clients able to keep it (ai ≥ 6.0.221, 7.x) send back; the
    encoder leaves it out for clients whose schema would reject it."""
    call = approval.call
    signature = sign(signing_key, approval.id, call.call_id, call.tool, call.args) if signing_key else None
    return ToolApprovalRequest(approval_id=approval.id, tool_call_id=call.call_id, signature=signature)


def output(call_id: str, result: PartOutcome) -> Chunk:
    """A call's result as the chunk that moves its tool part to the same state a reload shows."""
    match result:
        case "output-denied", _:
            return ToolOutputDenied(tool_call_id=call_id)
        case "output-error", fields:
            return ToolOutputError(tool_call_id=call_id, error_text=fields["errorText"])
        case _, fields:
            return ToolOutputAvailable(tool_call_id=call_id, output=fields["output"])


def handed(call: ToolCall) -> list[Chunk]:
    """A browser call handed over within a live turn: the call was announced once, with its input, so
    only a transient `data-browser-call` says that it may run now (one approved elsewhere, say); a
    client that ran it already, or runs it with its approval, has sent or will send its result."""
    return [Data(name="browser-call", id=call.call_id, data={"toolCallId": call.call_id}, transient=True)]


class Relay:
    """The sink of a streamed reply, and the way its chunks go out: the framework's events and the gate's
    news (a blocked tool stops the framework's stream, so that news can't travel inside it) are translated
    where they happen, in the order they happen, and each chunk goes to `push` at once. No queue and no
    task sits between a run and its reader: a chunk crossed two of each before, a task switch per event.
    Parking is the chat's: `park` saves it, when the framework can resume from its history."""

    def __init__(
        self,
        push: Callable[[Chunk], None],
        park: Callable[[Approval, Sequence[object]], Awaitable[None]] | None = None,
    ) -> None:
        self.push = push
        self._park = park
        self.translator: Translator | None = None
        """Set while the run goes on; events that come before or after it are dropped."""
        self.failure: Exception | None = None
        """What the translator raised, which ended the run."""

    def emit(self, item: Any) -> None:
        """Take a framework event or a gate event (`GateEvent`); never blocks."""
        if (translator := self.translator) is None:
            return
        try:
            chunks = translator.feed(item)
        except Exception as exc:  # a translator's bug ends this reply, not the tool that reported news
            self.failure = exc
            translator.interrupt()
            return
        for chunk in chunks:
            self.push(chunk)

    async def park(self, approval: Approval, history: Sequence[object]) -> None:
        if self._park is not None:
            await self._park(approval, history)


async def drive(
    run: Callable[[Callable[[Any], None]], Coroutine[Any, Any, None]], translator: Translator, relay: Relay
) -> None:
    """Run the framework's turn under the translator's turn, each of its events and the gate's news going
    through `relay` as it happens: `run(emit)` hands each of the framework's events to `emit`. Raises
    what the run raised.

    `run` is called inside a task that carries the turn, so every tool the run calls sees it. The
    translator's `interrupt` stops the run where it is, and the reply ends with `abort`.
    """
    token = current_turn.set(translator.turn)
    try:
        running = asyncio.get_running_loop().create_task(run(relay.emit), name="signoff-run")
    finally:
        current_turn.reset(token)

    def interrupt() -> None:
        if relay.translator is not None:
            relay.translator = None
            if relay.failure is None:
                relay.push(Abort(reason="interrupted"))
            running.cancel()

    translator.interrupt = interrupt
    relay.translator = translator
    try:
        await running
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not running.cancelled() or (current is not None and current.cancelling()):
            raise  # this task itself was cancelled (the server stops), not only the run
    finally:
        relay.translator = None
        translator.turn.stop_following()
    if relay.failure is not None:
        raise relay.failure
