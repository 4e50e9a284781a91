"""One path for every gated tool call of every framework: the turn, the gate, and what came of it.

A framework adapter (pydantic-ai's toolset, ADK's plugin) describes the call and how to run it, and gets
back a tagged result it maps to its own idiom: a value to return, an exception that ends the run, a
placeholder. Everything between is here once: finding the turn, asking through its sink (and parking the
chat before a blocking wait), the single-use claim, starting long-running calls as tasks and following
them, and turning a claim that can't hold into a message for the model.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from pydantic_core import to_jsonable_python

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.claim import unknown
from signoff.core.errors import AlreadyConsumed, CallMismatch, SignoffError, Unproven
from signoff.core.task import Task
from signoff.gate import Gate, Pending, Refused, Wait
from signoff.integrations.chat.state import task_news
from signoff.integrations.chat.turn import Asked, Withheld, current_turn
from signoff.integrations.chat.ui import PartOutcome
from signoff.protocol import ToolOutput


@dataclass(frozen=True, slots=True)
class GatedCall:
    call: ToolCall
    run: Callable[[dict[str, Any]], Awaitable[Any]]
    """Runs the tool with the arguments that may run: the model's, or those a person edited."""
    schema: dict[str, Any] | None = None
    """The tool's JSON Schema for its arguments, which an edit must fit."""
    long_running: bool = False
    """The call starts a task once allowed (seed 004), and its first result is the task's status."""
    interruptible: bool = True
    """A long-running call's body can be cancelled where it awaits."""
    history: Sequence[object] | None = None
    """The framework's messages so far, when it can resume a run from them: a blocking wait then parks
    the chat first."""


class Ran(msgspec.Struct, frozen=True):
    value: Any


class Rejected(msgspec.Struct, frozen=True):
    reason: str


GatedResult = Ran | Pending | Refused | Rejected | Task
"""What came of a gated call:
- `Ran`: allowed, claimed and run, with the tool's own result;
- `Pending`: a person decides later; the run ends, and resuming it with the same call picks the decision up;
- `Refused`: the model gets the reason, and the tool never ran;
- `Rejected`: allowed once, but this claim can't hold (run already, another call, no valid proof): never run;
- `Task`: a long-running call's task, started and pending.
"""


async def gated_call(gate: Gate, gated: GatedCall, *, chat_id: str, wait: Wait) -> GatedResult:
    """Rule on `gated.call` and run it if allowed. Inside a chat request the turn supplies the chat, the
    wait mode and the requester; outside one, `chat_id` and `wait` do."""
    turn = current_turn.get()
    if turn is not None:
        chat_id, wait = turn.chat_id, turn.wait

    call_id = gated.call.call_id

    async def pending(approval: Approval) -> None:
        assert turn is not None
        if wait == "blocking":
            turn.waiting.add(call_id)
        turn.sink.emit(Asked(approval))
        if wait == "blocking" and gated.history is not None:
            await turn.sink.park(approval, gated.history)

    async def run(**args: Any) -> Any:
        if turn is not None:
            turn.waiting.discard(call_id)
        return await gated.run(args)

    on_pending = pending if turn else None
    requester = turn.requester if turn else ""
    result: Any
    try:
        if gated.long_running:
            result = await gate.start(
                gated.call, run, chat_id=chat_id, wait=wait, on_pending=on_pending,
                interruptible=gated.interruptible, requester=requester, schema=gated.schema,
            )  # fmt: skip
        else:
            result = await gate.run(
                gated.call, run, chat_id=chat_id, wait=wait, on_pending=on_pending,
                requester=requester, schema=gated.schema,
            )  # fmt: skip
    except AlreadyConsumed as used:  # this very call ran before: say what came of it, never run it again
        elsewhere = gated.long_running or used.approval.call.call_id != call_id  # a task tells its own
        result = Rejected(str(used)) if elsewhere else await _told(gate, used.approval, requester)
    except (CallMismatch, Unproven) as exc:
        result = Rejected(str(exc))
    finally:
        if turn is not None:
            turn.waiting.discard(call_id)
    if isinstance(result, Refused) and turn is not None:
        turn.sink.emit(Withheld(gated.call))
    if isinstance(result, Pending | Refused | Rejected):
        if turn is not None and turn.take(call_id) is not None:
            why = f"the browser's output is not used: the call was {_refusal(result)}"
            await gate.ledger.audit.record(
                "refuse", call_id, turn.requester, why=why, chat=chat_id, tool=gated.call.tool
            )
        return result
    if gated.long_running:
        assert isinstance(result, Task)
        if turn is not None:
            turn.started(gate.tasks, result)
        return result
    return Ran(result)


UNKNOWN = "outcome unknown"
"""The status of a call that started and whose outcome was never recorded: what a page shows it as."""


async def _told(gate: Gate, approval: Approval, requester: str) -> Any:
    """What the model hears of a call whose claim was taken before: a continuation on another worker, or
    after a crash, of the very call that ran. Its recorded result; the error it ended with; or, where its
    process died before it could say, that it started and how it ended is unknown (audited): never a
    refusal, since it may well have done what it does."""
    ended = approval.outcome
    if ended is not None:
        return ended.result if ended.ok else {"status": "failed", "error": ended.result}
    said = unknown(approval)
    actor = requester or gate.actor
    await gate.ledger.audit.record(UNKNOWN, approval.id, actor, why=said, worker=approval.worker)
    return {"status": UNKNOWN, "message": said}


async def task_status(gate: Gate, task_id: str, *, chat_id: str) -> dict[str, Any]:
    """What signoff's own `check_task` tool answers: the task's status and progress, or its result, for
    the turn's chat (`chat_id` outside a server). It only reads, so it is never gated."""
    turn = current_turn.get()
    return await gate.tasks.check(task_id, turn.chat_id if turn else chat_id)


def _refusal(result: Pending | Refused | Rejected) -> str:
    match result:
        case Refused():
            return f"{result.status}: {result.reason or 'no reason given'}"
        case Rejected():
            return f"rejected: {result.reason}"
    return "not decided yet"


USAGE = {"input_tokens": "inputTokens", "output_tokens": "outputTokens", "total_tokens": "totalTokens"}
"""A run's token counts as the AI SDK names them, by the names OpenAI's and LangChain's usage give them."""

MARK = "signoff"
"""The key of a JSON result signoff gave the model in place of the tool's: `refused`."""


def heard(result: GatedResult) -> Any:
    """What the model hears of a gated call, for a framework whose tools return JSON: the tool's value, a
    refusal's reason (marked, so the page shows it as denied), a claim that can't hold, a task's status."""
    match result:
        case Ran(value):
            return value
        case Refused() as refusal:
            return {**refusal.to_result(), MARK: "refused"}
        case Rejected(reason):
            return {"status": "error", "message": reason}
        case Task() as task:
            return task.status()
        case Pending(approval=approval):
            return {"status": "pending", "message": f"waiting for a decision on {approval.id}"}


class Ungated(SignoffError):
    """A tool signoff's gate answers itself (`check_task`) was run without it."""


async def check_task(task_id: str) -> dict[str, Any]:
    """Check a long-running call's task: its status and progress, or its result once it has ended."""
    raise Ungated("check_task runs only behind signoff's gate, which answers it from the ledger")


def tasks_only(call_ids: Collection[str | None]) -> bool:
    """Whether every call of a step started a task in the turn: such a step ends the run, as a
    pydantic-ai deferred call does. The work goes on outside the agent, the chat waits on the tasks,
    and the next user message brings the model each task's news (`moved_on`)."""
    turn = current_turn.get()
    return turn is not None and bool(call_ids) and all(c in turn.long_running for c in call_ids)


async def moved_on(gate: Gate, tasks: dict[str, str], calls: Iterable[str], withdrawn: Any) -> dict[str, Any]:
    """What the model hears of each call a new user message leaves open: its task's news (its status
    now, or its result), or `withdrawn`."""
    news = await task_news(gate.ledger, tasks)
    return {call_id: news.get(call_id, withdrawn) for call_id in calls}


def json_text(value: Any) -> str:
    """A result as a model reads it where the framework sends text: JSON (not Python's `repr` of a dict)."""
    return value if isinstance(value, str) else json.dumps(to_jsonable_python(value))


def json_outcome(result: Any) -> PartOutcome:
    """What a JSON result (as the model got it, see `heard`) is to the client: live, and for a chat rebuilt
    later."""
    try:
        value = json.loads(result) if isinstance(result, str) else result
    except ValueError:
        value = result
    if isinstance(value, dict) and value.get(MARK) == "refused":
        return "output-denied", {}
    if isinstance(value, dict) and set(value) == {"error"}:
        return "output-error", {"errorText": str(value["error"])}
    return "output-available", {"output": value}


def browser_result(output: ToolOutput) -> Any:
    """A browser's result as a JSON tool's value: its output, or its error as `{"error": ...}`."""
    return {"error": output.error_text} if output.error_text is not None else output.output


def json_arguments(raw: str | None) -> dict[str, Any]:
    """A call's arguments as a framework gives them, JSON text (an object, or nothing)."""
    parsed = json.loads(raw or "{}")
    return parsed if isinstance(parsed, dict) else {}
