"""The gate in front of every tool call of any ADK agent, as an ADK plugin.

`before_tool_callback` runs before each call and the first plugin to return a result replaces the tool's,
so the plugin rules there, through the gate like every other integration:
- allowed: the plugin runs the tool itself, after the single-use claim, with the arguments the person
  approved (an edit included), and returns its result;
- refused: the model gets the typed refusal with its reason instead of a result, and the body never runs;
- deferred: the plugin asks through ADK's own `request_confirmation`, so the run ends the way ADK users
  know, and their session service keeps it. On resume ADK calls the plugin again for the original call,
  and the gate finds the ledger's decision: ADK's `confirmed` flag is a client's claim and decides nothing.

Long-running tools (seed 004: `long_running_tool`, ADK's own `LongRunningFunctionTool`, or a function
marked `@long_running`) start a task once allowed, and their first result is its pending status; when every
call of a step is long-running, the run ends there. Their declarations get the seed's NOTE once, and
`check_task_tool()` reads a task of the same chat.

Browser tools (`browser_tool`, seed 001) run in the browser: when the browser stays connected (the live
socket) the plugin awaits its result within the turn; otherwise the run ends with the call open, as ADK
does for a long-running tool, and the result comes with the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext
from pydantic_core import to_jsonable_python

from signoff.core.approval import State
from signoff.core.call import ToolCall
from signoff.core.task import Task, with_note
from signoff.gate import Gate, Pending, Refused, Wait
from signoff.integrations.framework import (
    GatedCall,
    PartOutcome,
    Ran,
    Rejected,
    Withheld,
    current_turn,
    gated_call,
    in_browser,
    task_status,
)
from signoff.tasks import is_long_running, long_running

MARK = "signoff"
"""The key that marks a result signoff gave in place of the tool's: `refused`, or a placeholder no client
ever sees as the call's output: `pending` (a person decides later) or `browser` (the browser runs it)."""


def failure(error: str) -> dict[str, str]:
    """A failed call's result as ADK carries it: the model sees the error, the page an error output."""
    return {"error": error}


def failure_of(response: dict[str, Any]) -> str | None:
    """The error of a result `failure` made, else None."""
    return str(response["error"]) if set(response) == {"error"} else None


def parameters(tool: BaseTool) -> dict[str, Any] | None:
    """The JSON Schema of the tool's arguments, as ADK declares them to the model."""
    declared = tool._get_declaration()  # ADK's own hook for a tool's declaration
    schema = declared.parameters_json_schema if declared is not None else None
    return schema if isinstance(schema, dict) else None


def outcome(response: dict[str, Any]) -> PartOutcome | None:
    """What a function response is to the client, for the live stream and for a chat rebuilt later
    (None: a placeholder, not the call's output)."""
    match response.get(MARK):
        case "pending" | "browser":
            return None
        case "refused":
            return "output-denied", {}
    if (error := failure_of(response)) is not None:
        return "output-error", {"errorText": error}
    return "output-available", {"output": response}


class BrowserTool(FunctionTool):
    """A tool the browser runs: the function only declares it (name, docstring, parameters)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        super().__init__(func)
        self.is_long_running = True  # ADK ends the run with the call open, as for a long-running tool

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return None  # no result here: it comes from the browser


class AcknowledgedTool(FunctionTool):
    """A browser tool the server answers at once: its function returns the acknowledgment, and the browser
    acts on the call as it sees it (see `integrations.chat.acknowledged`)."""


def acknowledged_tool(func: Callable[..., Any]) -> AcknowledgedTool:
    """Declare a browser tool the server answers at once with what `func` returns; the policy must allow
    it outright."""
    return AcknowledgedTool(func)


def browser_tool(func: Callable[..., Any]) -> BrowserTool:
    """Declare a tool whose body runs in the browser, from a function with its name, docstring and
    parameters (its body never runs)."""
    return BrowserTool(func)


def long_running_tool(func: Callable[..., Any]) -> LongRunningFunctionTool:
    """Declare a long-running ADK tool (seed 004): its calls return at once with a task, and its body
    runs in the background, reporting with `signoff.progress`."""
    return LongRunningFunctionTool(long_running(func))


async def check_task(task_id: str) -> dict[str, Any]:
    """Check a long-running call's task: its status and progress, or its result once it has ended."""
    raise RuntimeError("check_task runs only behind signoff's plugin, which answers it from the ledger")


def check_task_tool() -> FunctionTool:
    """The `check_task` tool to give an ADK agent with long-running tools; the plugin answers it."""
    return FunctionTool(check_task)


def _long_running(tool: BaseTool) -> bool:
    """A browser tool is long-running to ADK (its run ends with the call open), but starts no task."""
    if isinstance(tool, BrowserTool):
        return False
    return bool(tool.is_long_running) or is_long_running(getattr(tool, "func", None))


class _Leave:
    """The browser runs it later: ADK keeps the call open."""


_LEAVE = _Leave()


class SignoffPlugin(BasePlugin):
    """`App(root_agent=agent, plugins=[SignoffPlugin(gate)])`.

    Outside a signoff server the chat id and wait mode come from here; inside one, the request's turn
    supplies them.
    """

    def __init__(self, gate: Gate, *, chat_id: str = "default", wait: Wait = "blocking") -> None:
        super().__init__(name="signoff")
        self.gate = gate
        self.chat_id = chat_id
        self.wait = wait
        self._long_running: dict[str, set[str]] = {}
        """The long-running tools of each agent, by name, as its last model request offered them."""

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        """Tell the model which tools are long-running (the NOTE, once), and remember them for the turn's
        end: a step of long-running calls only ends the run."""
        names = {name for name, tool in llm_request.tools_dict.items() if _long_running(tool)}
        self._long_running[callback_context.agent_name] = names
        for declared in (llm_request.config.tools or []) if llm_request.config else []:
            for declaration in getattr(declared, "function_declarations", None) or []:
                if declaration.name in names:
                    declaration.description = with_note(declaration.description)

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        if isinstance(tool, FunctionTool) and tool.func is check_task:  # signoff's own read: not gated
            return await task_status(self.gate, str(tool_args.get("task_id", "")), chat_id=self.chat_id)
        call = ToolCall(tool_context.function_call_id or "", tool.name, to_jsonable_python(tool_args))

        async def run(args: dict[str, Any]) -> Any:
            if isinstance(tool, BrowserTool):
                return await _in_browser(self.gate, ToolCall(call.call_id, tool.name, args))
            return await tool.run_async(args=args, tool_context=tool_context)

        gated = GatedCall(call, run, schema=parameters(tool), long_running=_long_running(tool))
        result = await gated_call(self.gate, gated, chat_id=self.chat_id, wait=self.wait)
        match result:
            case Ran(value) if value is _LEAVE:
                return _placeholder(tool_context, "browser")
            case Pending(approval=approval):
                tool_context.request_confirmation(
                    hint=approval.description, payload={"approval_id": approval.id}
                )
                return _placeholder(tool_context, "pending", approval_id=approval.id)
            case Task() as task:
                return self._started(task, tool_context)
        await self._hold(call, tool_context)
        match result:
            case Ran(value):
                return _told(call, value if isinstance(value, dict) else {"result": value})
            case Refused() as refusal:
                return {**refusal.to_result(), MARK: "refused"}
            case Rejected(reason):
                return {"status": "error", "message": reason}

    async def _hold(self, call: ToolCall, tool_context: ToolContext) -> None:
        """A deferred run that answers some questions of a step resumes only their calls, while another of
        the step still waits for a person: the run ends with this result, and the model hears the step's
        results once that one is answered too (it would see the other's pending stand-in otherwise)."""
        turn = current_turn.get()
        chat_id, wait = (turn.chat_id, turn.wait) if turn else (self.chat_id, self.wait)
        if wait != "deferred":  # a blocking step's calls all end within the run, before the model's turn
            return
        for other in _step(tool_context, call.call_id):
            asked = await self.gate.ledger.approvals.find(chat_id, other) if other != call.call_id else None
            if asked is not None and asked.state is State.PENDING:
                tool_context.actions.skip_summarization = True
                return

    def _started(self, task: Task, tool_context: ToolContext) -> dict[str, Any]:
        """The first result is the task's pending status; when every call of the step is long-running,
        the run ends after their results, without another model call."""
        names = set(_step(tool_context, task.call.call_id).values())
        if names and names <= self._long_running.get(tool_context.agent_name, set()):
            tool_context.actions.skip_summarization = True
        return task.status()


def _step(tool_context: ToolContext, call_id: str) -> dict[str, str]:
    """The calls of the model's step that made `call_id`, id to tool name (on resume, ADK's confirmation
    calls come after that step)."""
    made = (event.get_function_calls() for event in reversed(tool_context.session.events))
    step = next((calls for calls in made if any(c.id == call_id for c in calls)), [])
    return {c.id: c.name or "" for c in step if c.id}


def _told(call: ToolCall, response: dict[str, Any]) -> dict[str, Any]:
    """A call that ran: ADK reports its result once every call of its step is done, which may be after
    a person answers another of them, so the turn hears of it now (see `Withheld`)."""
    if (turn := current_turn.get()) is not None and (told := outcome(response)) is not None:
        turn.sink.emit(Withheld(call, told))
    return response


def _placeholder(tool_context: ToolContext, waiting: str, **detail: str) -> dict[str, Any]:
    """The call stays open: the run ends here, without the model seeing this stand-in (the answer that
    comes with a later request replaces it in the model's view)."""
    tool_context.actions.skip_summarization = True
    return {"status": "pending", **detail, MARK: waiting}


async def _in_browser(gate: Gate, call: ToolCall) -> Any:
    output = await in_browser(gate, call)
    if output is None:
        return _LEAVE
    return failure(output.error_text) if output.error_text is not None else output.output
