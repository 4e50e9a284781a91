"""What one chat request shares with the tools it runs: the chat, the wait mode, and where news goes.

An agent framework calls tools deep inside its own loop, with no handle on the HTTP request that started
the run. A context variable carries the request's `Turn` down to them: it is copied into every task the run
spawns, and two concurrent runs never see each other's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.errors import SignoffError
from signoff.core.task import Task
from signoff.gate import Gate, Wait
from signoff.integrations.chat.ui import PartOutcome
from signoff.protocol import ToolOutput
from signoff.tasks import Tasks


class BrowserTimeout(SignoffError):
    """The browser returned no result for a call it was handed in time."""


@dataclass(frozen=True, slots=True)
class Asked:
    """A call of the turn waits for a person: the transport shows the question."""

    approval: Approval


@dataclass(frozen=True, slots=True)
class Handed:
    """An allowed browser call was handed to the connected browser: the transport tells it to run it."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class Progressed:
    """A task a call of the turn started changed."""

    task: Task


@dataclass(frozen=True, slots=True)
class Answered:
    """A client answered the turn (on the live socket). `accepted`: the answer was taken, so the client
    follows the turn on a new stream, which must end when the turn waits on it again. `calls`: the calls
    it answered (not the parts it only echoed)."""

    accepted: bool
    calls: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Withheld:
    """A call's result is known now, before the framework reports it: ADK reports a step's results
    together, once every call of the step is done, so while a person still weighs one question of a
    step, the answer to another (its refusal, or what it returned) goes out at once."""

    call: ToolCall
    outcome: PartOutcome = ("output-denied", {})


GateEvent = Asked | Handed | Progressed | Answered | Withheld


class Sink(Protocol):
    """Where the gate's news of a turn goes: the one channel from the tools, deep in a framework's loop,
    to the transport streaming the turn."""

    def emit(self, event: GateEvent) -> None:
        """Take one event, in the order it happened; never blocks."""

    async def park(self, approval: Approval, history: Sequence[object]) -> None:
        """Save the chat as waiting on `approval`, with the framework's history so far, before a
        blocking wait starts: if this process dies during the wait, any worker can resume the chat as a
        deferred one."""


class Discard:
    """The sink of a turn nobody streams (a tool called outside a transport): its news goes nowhere."""

    def emit(self, event: GateEvent) -> None:
        pass

    async def park(self, approval: Approval, history: Sequence[object]) -> None:
        pass


@dataclass
class Browser:
    """The browser of a turn that stays connected while the turn runs (the live socket): a browser tool
    the gate allows is handed to it and its result awaited, so the turn goes on instead of ending.

    The future for a call exists before the browser hears of the call, so a result can never arrive
    before anyone waits for it (the seed bridge lost such results).
    """

    timeout: float
    awaited: dict[str, str] = field(default_factory=dict)
    """Calls handed over and not answered yet: call id to tool name."""
    _results: dict[str, asyncio.Future[ToolOutput]] = field(default_factory=dict)

    async def run(self, call: ToolCall, sink: Sink) -> ToolOutput:
        """Hand `call` over through `sink` and await its result; raises `BrowserTimeout` after `timeout`
        seconds."""
        result: asyncio.Future[ToolOutput] = asyncio.get_running_loop().create_future()
        self._results[call.call_id] = result
        self.awaited[call.call_id] = call.tool
        try:
            sink.emit(Handed(call))
            async with asyncio.timeout(self.timeout):
                return await result
        except TimeoutError:
            raise BrowserTimeout(f"the browser returned no result within {self.timeout:g} s") from None
        finally:
            self.awaited.pop(call.call_id, None)
            del self._results[call.call_id]

    def deliver(self, outputs: Mapping[str, ToolOutput]) -> dict[str, ToolOutput]:
        """Resolve the awaited calls among `outputs` (checked by `trust.accept_outputs` first), and return
        the others: they came before their call was handed over, and its run must take them."""
        early = {}
        for call_id, output in outputs.items():
            if (result := self._results.get(call_id)) is None:
                early[call_id] = output
            elif not result.done():
                result.set_result(output)
                del self.awaited[call_id]  # answered now, before its run wakes up to take it
        return early


@dataclass
class Turn:
    chat_id: str
    wait: Wait
    sink: Sink
    """Where the gate's news of this turn goes."""
    requester: str = ""
    """The chat's owner: the principal on whose behalf this turn's calls are made."""
    browser: Browser | None = None
    """Set when the browser answers within the turn; otherwise a browser tool ends the turn and its
    result comes with the next request."""
    held: dict[str, ToolOutput] = field(default_factory=dict)
    """Browser outputs that came with their call's approval in one message: its run takes its own."""
    early: dict[str, ToolOutput] = field(default_factory=dict)
    """Browser outputs that came on the live socket before their call was handed over (the browser ran
    it as soon as it was announced): its run takes its own."""
    waiting: set[str] = field(default_factory=set)
    """Calls blocked on a person's decision right now."""
    answering: set[str] = field(default_factory=set)
    """Calls a client's answer is being recorded for: whatever the ledger says, the turn does not wait
    on the client for them until the answer is taken (see `Translator.pause`)."""
    long_running: dict[str, str] = field(default_factory=dict)
    """The calls of this turn that started a task: call id to task id (seed 004's long-running ids)."""
    _unwatch: list[Callable[[], None]] = field(default_factory=list)

    def started(self, tasks: Tasks, task: Task) -> None:
        """A call of this turn started `task`: mark the call long-running, and follow the task while the
        turn runs."""
        self.long_running[task.call.call_id] = task.id
        self.sink.emit(Progressed(task))
        self._unwatch.append(tasks.watch(task.id, lambda changed: self.sink.emit(Progressed(changed))))

    def take(self, call_id: str) -> tuple[ToolOutput, str] | None:
        """The output the browser sent for a call before its run, and how it came, if it did."""
        if (output := self.held.pop(call_id, None)) is not None:
            return output, "the browser ran it with its approval, in one message"
        if (output := self.early.pop(call_id, None)) is not None:
            return output, "the browser ran it as soon as it was announced"
        return None

    def stop_following(self) -> None:
        for unwatch in self._unwatch:
            unwatch()
        self._unwatch.clear()


current_turn: ContextVar[Turn | None] = ContextVar("signoff_turn", default=None)


async def in_browser(gate: Gate, call: ToolCall) -> ToolOutput | None:
    """Run an allowed browser call in the browser of the current turn, if it stays connected: its output,
    or None when the turn must end with the call open for the browser to answer in the next request. An
    output the browser sent before (with the call's approval, or at once) is taken, and audited.

    A browser that does not answer in time gives an error output the model sees, and an audit entry."""
    turn = current_turn.get()
    if turn is not None and (taken := turn.take(call.call_id)) is not None:
        output, why = taken
        await gate.ledger.audit.record(
            "run", call.call_id, turn.requester, chat=turn.chat_id, tool=call.tool, why=why
        )
        return output
    if turn is None or turn.browser is None:
        return None
    try:
        return await turn.browser.run(call, turn.sink)
    except BrowserTimeout as exc:
        why = str(exc)
        await gate.ledger.audit.record(
            "expire", call.call_id, "signoff:server", chat=turn.chat_id, tool=call.tool, why=why
        )
        return ToolOutput(call_id=call.call_id, tool=call.tool, error_text=why)
