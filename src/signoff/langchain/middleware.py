"""The gate in front of every tool call of a LangChain agent or a LangGraph graph.

`SignoffMiddleware` is an `AgentMiddleware` for `create_agent`; `tool_node` is LangGraph's own `ToolNode`
with the same hook, for a graph written by hand. Each call is ruled on by the gate, the chat being the
graph's `thread_id` and the call its `tool_call_id`:
- allowed: the single-use claim is taken, then the tool runs, once, with the arguments a person approved
  (their edit included: LangChain's `edit`);
- refused (by the policy, a person, a deadline): the model gets a `ToolMessage` with the reason and
  status `error`, as LangChain's `reject` gives it; the tool never runs;
- waiting on a person (deferred): the graph stops with LangGraph's `interrupt()`, whose value has the
  `HITLRequest` shape of `HumanInTheLoopMiddleware`, so Agent Inbox and Agent Chat UI show it. Whatever
  `Command(resume=…)` brings back is never read: the node runs again, and the gate reads the decision from
  the ledger. A call nobody approved interrupts again; a forged "approve" runs nothing.

LangGraph's checkpointer keeps the graph, and the ledger keeps the approvals and their claims: a graph
resumed on another process, or twice from one checkpoint, runs an approved call once.

Browser tools (`browser_tool`) run in the browser of the turn when it stays connected (the live socket);
otherwise the graph stops with the call open, and the next request brings its result, which the server
checked, through the served run (never through the resume payload). Long-running tools (`long_running`
functions) start a task, whose pending status is their first result (a step of them alone ends the run:
`before_model`); `check_task_tool()` reads it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt
from pydantic_core import to_jsonable_python

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.errors import SignoffError
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
    heard,
    in_browser,
    task_status,
    tasks_only,
)
from signoff.protocol import ToolOutput
from signoff.tasks import is_long_running

Kind = Literal["tool", "browser", "acknowledged", "long-running", "check_task"]
Result = ToolMessage | Command[Any]
Handler = Callable[[ToolCallRequest], Awaitable[Result]]
DECISIONS = ["approve", "edit", "reject"]
"""What a person may decide, as `review_configs` tells LangChain's front ends (through signoff)."""


class NoGate(SignoffError):
    """A gated tool was called with no gate: outside a signoff server, the middleware needs its own."""


@dataclass
class Served:
    """What the server's run of a graph gives its tools: the gate, and the browser results the request
    brought, checked by the server against the calls the chat waits on."""

    gate: Gate
    outputs: dict[str, ToolOutput] = field(default_factory=dict)


served: ContextVar[Served | None] = ContextVar("signoff_langgraph", default=None)


def kind(tool: BaseTool | None) -> Kind:
    marked = (tool.metadata or {}).get("signoff") if tool is not None else None
    if marked in ("browser", "acknowledged", "long-running", "check_task"):
        return marked  # type: ignore[no-any-return]
    function = getattr(tool, "coroutine", None) or getattr(tool, "func", None)
    return "long-running" if is_long_running(function) else "tool"


def parameters(tool: BaseTool) -> dict[str, Any]:
    """The JSON Schema of the tool's arguments, as the model sees it."""
    schema: dict[str, Any] = convert_to_openai_tool(tool)["function"].get("parameters") or {}
    return schema or {"type": "object", "properties": {}}


def _marked(func: Callable[..., Any], mark: str, *, note: bool = False) -> StructuredTool:
    asynchronous = inspect.iscoroutinefunction(func)
    made = StructuredTool.from_function(
        None if asynchronous else func, coroutine=func if asynchronous else None, metadata={"signoff": mark}
    )
    made.description = with_note(made.description) if note else made.description
    return made


def browser_tool(func: Callable[..., Any]) -> StructuredTool:
    """A tool whose body runs in the browser, declared by a function (its body never runs here)."""
    return _marked(func, "browser")


def acknowledged_tool(func: Callable[..., Any]) -> StructuredTool:
    """A browser tool the server answers at once with what `func` returns; the policy must allow it."""
    return _marked(func, "acknowledged")


def long_running_tool(func: Callable[..., Any]) -> StructuredTool:
    """A long-running tool (seed 004): its calls return at once with a task, and the body runs on."""
    return _marked(func, "long-running", note=True)


async def check_task(task_id: str) -> dict[str, Any]:
    """Check a long-running call's task: its status and progress, or its result once it has ended."""
    raise NoGate("check_task runs only behind signoff's middleware, which answers it from the ledger")


def check_task_tool() -> StructuredTool:
    """The `check_task` tool to give an agent with long-running tools; the middleware answers it."""
    return StructuredTool.from_function(coroutine=check_task, metadata={"signoff": "check_task"})


def message(call: ToolCall, content: Any, *, error: bool = False) -> ToolMessage:
    """A result in the model's terms: text, or JSON for anything else."""
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return ToolMessage(
        text, name=call.tool, tool_call_id=call.call_id, status="error" if error else "success"
    )


def hitl_request(approval: Approval) -> dict[str, Any]:
    """The interrupt's value, in the `HITLRequest` shape LangChain's front ends show."""
    call = approval.call
    action = {"name": call.tool, "args": call.args, "description": approval.description}
    review = {"action_name": call.tool, "allowed_decisions": DECISIONS}
    return {"action_requests": [action], "review_configs": [review], "signoff": {"approval_id": approval.id}}


class _Leave:
    """The browser runs it later: the graph stops with the call open."""


_LEAVE = _Leave()


class SignoffMiddleware(AgentMiddleware):
    """`create_agent(model, tools, middleware=[SignoffMiddleware(gate)], checkpointer=…)`.

    Served by signoff (`signoff serve --agent`), the server supplies the gate, the chat and the wait: give
    no gate. Outside a server the chat is the run's `thread_id`, and `wait` says whether a call waiting
    on a person interrupts the graph (`deferred`) or blocks the tool until someone decides (`blocking`).
    """

    def __init__(self, gate: Gate | None = None, *, wait: Wait = "deferred") -> None:
        super().__init__()
        self.gate = gate
        self.wait: Wait = wait

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """A step whose every call started a task ends the run, as on pydantic-ai and ADK: the work goes
        on outside the agent. Its pending results leave the thread, so its calls stay open and the chat
        waits on the tasks; the next user message brings the model each task's news (`chat.LangGraph`)."""
        messages = list(state.get("messages", []))
        step = max((n for n, m in enumerate(messages) if isinstance(m, AIMessage)), default=len(messages))
        told = messages[step + 1 :]
        if any(not isinstance(m, ToolMessage) for m in told) or not tasks_only(
            [m.tool_call_id for m in told]
        ):
            return None
        return {"messages": [RemoveMessage(id=m.id) for m in told if m.id], "jump_to": "end"}

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]
    ) -> Result:
        """The sync graph's hook: the gate is async, so it runs on a loop of its own here (a ledger that
        is bound to another loop needs `ainvoke`/`astream`)."""

        async def run(request: ToolCallRequest) -> Result:
            return handler(request)

        return asyncio.run(self.awrap_tool_call(request, run))

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Result:
        running = served.get()
        gate = self.gate or (running.gate if running else None)
        if gate is None:
            raise NoGate("SignoffMiddleware needs a gate outside a signoff server: SignoffMiddleware(gate)")
        tool_call, tool = request.tool_call, request.tool
        call = ToolCall(tool_call["id"] or "", tool_call["name"], to_jsonable_python(tool_call["args"]))
        chat_id = str(get_config().get("configurable", {}).get("thread_id", "default"))
        made = kind(tool)
        if made == "check_task":  # signoff's own read: not gated
            return message(call, await task_status(gate, str(call.args.get("task_id", "")), chat_id=chat_id))

        async def run(args: dict[str, Any]) -> Any:
            if made == "browser":
                output = await in_browser(gate, ToolCall(call.call_id, call.tool, args))
                return _LEAVE if output is None else output
            edited = request if args == call.args else request.override(tool_call={**tool_call, "args": args})
            return await handler(edited)

        schema = parameters(tool) if tool is not None else None
        gated = GatedCall(call, run, schema=schema, long_running=made == "long-running")
        browser: dict[str, Any] = {"signoff": {"browser": call.call_id}}
        while True:  # each pass after the first is a resumed graph: the ledger, not the payload, decides
            if running is not None and (output := running.outputs.pop(call.call_id, None)) is not None:
                return _answer(call, output)
            if made == "browser" and await _handed_over(gate, chat_id, call):
                asked = browser
            else:
                result = await gated_call(gate, gated, chat_id=chat_id, wait=self.wait)
                if not isinstance(result, Pending) and not (
                    isinstance(result, Ran) and result.value is _LEAVE
                ):
                    return _told(call, result)
                # left to the browser: the interrupt says so, as a resumed one does (`_handed_over`)
                asked = hitl_request(result.approval) if isinstance(result, Pending) else browser
            interrupt(asked)


async def _handed_over(gate: Gate, chat_id: str, call: ToolCall) -> bool:
    """A browser call whose approval was used to hand it over: it waits on the browser, not the gate."""
    approval = await gate.ledger.approvals.find(chat_id, call.call_id)
    return approval is not None and approval.state is State.CONSUMED


def _answer(call: ToolCall, output: ToolOutput) -> ToolMessage:
    if output.error_text is not None:
        return message(call, output.error_text, error=True)
    return message(call, output.output)


def outcome(message: ToolMessage) -> PartOutcome:
    """What a tool message is to the client, for the live stream and for a chat rebuilt later."""
    if message.additional_kwargs.get("lc_source") == "signoff":
        return "output-denied", {}
    if message.status == "error":
        return "output-error", {"errorText": str(message.text)}
    try:
        return "output-available", {"output": json.loads(str(message.text))}
    except ValueError:
        return "output-available", {"output": str(message.text)}


def _told(call: ToolCall, result: Ran | Refused | Rejected | Task) -> Result:
    """The call's result; one that ran is told to a live turn now: LangGraph reports a step's results
    once every call of the step is done, which may be after a person answers another of them."""
    made = _result(call, result)
    if isinstance(result, Ran) and isinstance(made, ToolMessage) and (turn := current_turn.get()) is not None:
        turn.sink.emit(Withheld(call, outcome(made)))
    return made


def _result(call: ToolCall, result: Ran | Refused | Rejected | Task) -> Result:
    match result:
        case Ran(value) if isinstance(value, ToolMessage | Command):
            return value
        case Ran(ToolOutput() as output):
            return _answer(call, output)
        case Ran(value):  # told, not run: what the call returned when it ran (its message, as kept)
            return message(
                call, value.get("content") if isinstance(value, dict) and "content" in value else value
            )
        case Refused() as refusal:
            return _rejected(call, refusal.to_result())
        case Task() | Rejected():  # a rejected call was allowed, but its claim can't hold: told why
            return message(call, heard(result))


def _rejected(call: ToolCall, result: dict[str, str]) -> ToolMessage:
    """A call that did not run, as LangChain's `reject` tells the model: status `error`, with the reason,
    marked the way LangChain marks its own (`add_notification_metadata`), so a page shows it as denied."""
    rejected = message(call, result, error=True)
    rejected.additional_kwargs.update(lc_source="signoff", lc_data={"decision": "reject", **result})
    return rejected


def tool_node(
    tools: Sequence[BaseTool | Callable[..., Any]], gate: Gate | None = None, **options: Any
) -> ToolNode:
    """LangGraph's `ToolNode` for `tools`, each call through the gate: the node helper for a graph written
    by hand (`builder.add_node("tools", tool_node(tools))`). `options` go to `SignoffMiddleware`."""
    hook = SignoffMiddleware(gate, **options)
    return ToolNode(tools, wrap_tool_call=hook.wrap_tool_call, awrap_tool_call=hook.awrap_tool_call)


def is_gated(node: ToolNode) -> bool:
    """Whether signoff's hook wraps the node's calls, alone or among other middleware."""
    return _holds(getattr(node, "_awrap_tool_call", None), set())


def _holds(hook: object, seen: set[int]) -> bool:
    if hook is None or id(hook) in seen:
        return False
    seen.add(id(hook))
    if isinstance(getattr(hook, "__self__", None), SignoffMiddleware):
        return True
    cells = getattr(hook, "__closure__", None) or ()
    inner = [
        getattr(hook, "__wrapped__", None),
        getattr(hook, "func", None),
        *(c.cell_contents for c in cells),
    ]
    return any(_holds(h, seen) for h in inner if callable(h))
