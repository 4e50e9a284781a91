"""What one chat request shares with the tools it runs: the chat, the wait mode, and a way to report back.

An agent framework calls tools deep inside its own loop, with no handle on the HTTP request that started
the run. A context variable carries the request's `Turn` down to them: it is copied into every task the run
spawns, and two concurrent runs never see each other's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.task import Task
from signoff.gate import Gate, Wait
from signoff.protocol import ToolOutput
from signoff.tasks import Tasks


class BrowserTimeout(Exception):
    """The browser returned no result for a call it was handed in time."""


@dataclass
class Browser:
    """The browser of a turn that stays connected while the turn runs (the live socket): a browser tool
    the gate allows is handed to it and its result awaited, so the turn goes on instead of ending.

    The future for a call exists before the browser hears of the call, so a result can never arrive
    before anyone waits for it (the seed bridge lost such results).
    """

    timeout: float
    handed: Callable[[ToolCall], None] = lambda call: None
    """Called when a call is handed over: the transport tells the browser to run it."""
    awaited: dict[str, str] = field(default_factory=dict)
    """Calls handed over and not answered yet: call id to tool name."""
    _results: dict[str, asyncio.Future[ToolOutput]] = field(default_factory=dict)

    async def run(self, call: ToolCall) -> ToolOutput:
        """Hand `call` over and await its result; raises `BrowserTimeout` after `timeout` seconds."""
        result: asyncio.Future[ToolOutput] = asyncio.get_running_loop().create_future()
        self._results[call.call_id] = result
        self.awaited[call.call_id] = call.tool
        try:
            self.handed(call)
            async with asyncio.timeout(self.timeout):
                return await result
        except TimeoutError:
            raise BrowserTimeout(f"the browser returned no result within {self.timeout:g} s") from None
        finally:
            del self.awaited[call.call_id], self._results[call.call_id]

    def deliver(self, outputs: Mapping[str, ToolOutput]) -> None:
        """Resolve the awaited calls among `outputs` (checked by `trust.accept_outputs` first)."""
        for call_id, output in outputs.items():
            if (result := self._results.get(call_id)) is not None and not result.done():
                result.set_result(output)


@dataclass
class Turn:
    chat_id: str
    wait: Wait
    requester: str = ""
    """The chat's owner: the principal on whose behalf this turn's calls are made."""
    asked: Callable[[Approval], None] = lambda approval: None
    """Called when a call of this turn waits for a person, before the wait starts."""
    parked: Callable[[Approval, Sequence[object]], Awaitable[None]] | None = None
    """Awaited before a blocking wait starts, with the framework's message history so far: the chat saves
    itself as waiting on that approval, so if this process dies during the wait, any worker can resume
    the chat as a deferred one."""
    browser: Browser | None = None
    """Set when the browser answers within the turn; otherwise a browser tool ends the turn and its
    result comes with the next request."""
    news: Callable[[Task], None] = lambda task: None
    """Called with each change of a task this turn's calls started, while the turn runs."""
    long_running: dict[str, str] = field(default_factory=dict)
    """The calls of this turn that started a task: call id to task id (seed 004's long-running ids)."""
    _unwatch: list[Callable[[], None]] = field(default_factory=list)

    def started(self, tasks: Tasks, task: Task) -> None:
        """A call of this turn started `task`: mark the call long-running, and follow the task while the
        turn runs."""
        self.long_running[task.call.call_id] = task.id
        self.news(task)
        self._unwatch.append(tasks.watch(task.id, self.news))

    def stop_following(self) -> None:
        for unwatch in self._unwatch:
            unwatch()
        self._unwatch.clear()


current_turn: ContextVar[Turn | None] = ContextVar("signoff_turn", default=None)


async def in_browser(gate: Gate, call: ToolCall) -> ToolOutput | None:
    """Run an allowed browser call in the browser of the current turn, if it stays connected: its output,
    or None when the turn must end with the call open for the browser to answer in the next request.

    A browser that does not answer in time gives an error output the model sees, and an audit entry."""
    turn = current_turn.get()
    if turn is None or turn.browser is None:
        return None
    try:
        return await turn.browser.run(call)
    except BrowserTimeout as exc:
        why = str(exc)
        await gate.ledger.record(
            "expire", call.call_id, "signoff:server", chat=turn.chat_id, tool=call.tool, why=why
        )
        return ToolOutput(call_id=call.call_id, tool=call.tool, error_text=why)
