"""The gate in front of every function tool of an Agents SDK agent: its `needs_approval`, and its body.

The SDK asks a tool's `needs_approval` before it runs a call, and a `True` ends the run with the call as
an interruption (a `ToolApprovalItem`) that a `RunState` resumes. So `needs_approval` is where the gate
rules on a call that would wait (the deferred wait): a call a person must decide ends the run, and its
interruption is the ledger's approval. Everything else is left to the body, where the gate rules again
and takes the single-use claim before the tool's own body runs: a `RunState` resumed twice, in two
processes, with the SDK's `approve` or without, runs the tool once. The SDK's flag is never what allows
a call; the ledger's decision is.

Browser tools (`browser_tool`) run in the browser: within a live turn their result is awaited in the body;
otherwise the run ends with the call as an interruption, claimed and handed over, and the browser's result
comes with the next request. A result always reaches the model as JSON, so a page reloading the chat reads
it back as the live stream showed it (a refusal carries `"signoff": "refused"`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, RunState, function_tool
from agents.agent import ToolsToFinalOutputResult
from agents.tool import FunctionToolResult
from agents.tool_context import ToolContext
from pydantic_core import to_jsonable_python

import signoff.integrations.framework as fw
from signoff.core.call import ToolCall
from signoff.gate import Gate, Pending, Wait
from signoff.tasks import is_long_running


@dataclass
class Browsing:
    """A run's browser calls: the results it continues with, by call id (each call was claimed when it
    was handed over), and the calls it handed over to a browser that answers with the next request."""

    outputs: dict[str, Any] = field(default_factory=dict)
    handed: set[str] = field(default_factory=set)


browsing: ContextVar[Browsing | None] = ContextVar("signoff_browsing", default=None)


class BrowserTool(FunctionTool):
    """A tool the browser runs: its function only declares it (name, docstring, parameters)."""


class AcknowledgedTool(FunctionTool):
    """A browser tool the server answers at once with what its function returns; the browser acts on the
    call as it sees it, so the policy must allow it outright."""


def _as(kind: type[FunctionTool], tool: FunctionTool) -> Any:
    made = object.__new__(kind)
    made.__dict__.update(tool.__dict__)
    return made


def browser_tool(func: Callable[..., Any]) -> BrowserTool:
    """Declare a tool whose body runs in the browser, from a function with its name, docstring and
    parameters (its body never runs)."""
    return _as(BrowserTool, function_tool(func))  # type: ignore[no-any-return]


def acknowledged_tool(func: Callable[..., Any]) -> AcknowledgedTool:
    """Declare a browser tool the server answers at once with what `func` returns."""
    return _as(AcknowledgedTool, function_tool(func))  # type: ignore[no-any-return]


CHECK_TASK = function_tool(fw.check_task)
"""The `check_task` tool to give an agent with long-running tools (`signoff.tasks.long_running`)."""


def on_tasks(ctx: RunContextWrapper[Any], results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
    """The SDK's `tool_use_behavior`: a step whose every call started a task (in the turn) ends the run,
    as on pydantic-ai and ADK: the work goes on outside the agent, the model does not speak again, the
    chat waits on the tasks, and the next user message brings the model each task's news."""
    ended = fw.tasks_only([getattr(r.run_item, "call_id", None) for r in results])
    return ToolsToFinalOutputResult(ended, "\n".join(str(r.output) for r in results) if ended else None)


_LEAVE = object()
"""A browser call's value when the browser runs it later: the run ends with the call open."""


class Gated:
    """The gate's hooks on one agent's tools; outside a signoff server `chat_id` and `wait` say where
    its calls are asked about, inside one the request's turn does."""

    def __init__(self, gate: Gate, *, chat_id: str = "default", wait: Wait = "blocking") -> None:
        self.gate, self.chat_id, self.wait = gate, chat_id, wait
        self.gated_tools: list[FunctionTool] = []

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of `agent` whose every function tool is gated, and whose run ends on a step of tasks
        (unless it says itself when tools end it); the agent itself is left as it was."""
        tools = [self.tool(t) if isinstance(t, FunctionTool) else t for t in agent.tools]
        self.gated_tools = [t for t in tools if isinstance(t, FunctionTool)]
        behavior = on_tasks if agent.tool_use_behavior == "run_llm_again" else agent.tool_use_behavior
        return agent.clone(tools=tools, tool_use_behavior=behavior)

    def tool(self, tool: FunctionTool) -> FunctionTool:
        gated = copy.copy(tool)
        body = tool.on_invoke_tool
        func = getattr(tool, "__wrapped__", None)
        long_running = is_long_running(func)

        async def needs(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            return await self.needs(tool, ToolCall(call_id, tool.name, to_jsonable_python(params)))

        async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            call = ToolCall(ctx.tool_call_id, tool.name, json.loads(arguments or "{}"))
            outputs = run_browsing.outputs if (run_browsing := browsing.get()) else {}
            if call.call_id in outputs and isinstance(tool, BrowserTool):
                return fw.json_text(outputs[call.call_id])
            if func is fw.check_task:  # signoff's own read: not gated
                return fw.json_text(
                    await fw.task_status(self.gate, str(call.args.get("task_id")), chat_id=self.chat_id)
                )

            async def run(args: dict[str, Any]) -> Any:
                if isinstance(tool, BrowserTool):
                    return await self._in_browser(ToolCall(call.call_id, tool.name, args))
                return await body(ctx, json.dumps(args))

            result = await self._gated(tool, call, run, long_running)
            told = fw.json_text(fw.heard(result))
            # the SDK tells a step's results together: a live turn hears this one now
            if (turn := fw.current_turn.get()) is not None and isinstance(result, fw.Ran | fw.Rejected):
                turn.sink.emit(fw.Withheld(call, fw.json_outcome(told)))
            return told

        gated.needs_approval = needs
        gated.on_invoke_tool = invoke
        return gated

    async def resume(self, state: RunState[Any]) -> RunState[Any]:
        """`state` with each interruption the gate no longer holds open approved: the ledger answered it
        (the body's gate rules on the call, so a refusal is told there), or the browser's result is here."""
        tools = {t.name: t for t in self.gated_tools}
        for item in state.get_interruptions():
            call = ToolCall(item.call_id or "", item.name or "", fw.json_arguments(item.arguments))
            if (tool := tools.get(call.tool)) is not None and not await self.needs(tool, call):
                state.approve(item)
        return state

    async def needs(self, tool: FunctionTool, call: ToolCall) -> bool:
        """Whether the run ends with `call` open: a person decides it later (deferred), or the browser
        runs it and is not here to answer within the turn. A call the gate allows or refuses goes on to
        the body, where the gate rules again and claims it."""
        turn = fw.current_turn.get()
        chat_id, wait = (turn.chat_id, turn.wait) if turn else (self.chat_id, self.wait)
        if isinstance(tool, BrowserTool):
            run = browsing.get() or Browsing()
            if call.call_id in run.outputs or (turn is not None and turn.browser is not None):
                return False
            result = await self._gated(
                tool, call, lambda args: self._in_browser(ToolCall(call.call_id, call.tool, args))
            )
            if isinstance(result, fw.Ran) and result.value is _LEAVE:
                run.handed.add(call.call_id)
                return True
            if isinstance(result, fw.Ran):  # it ran with its approval, in one message: the body hands it on
                run.outputs[call.call_id] = result.value
            return isinstance(result, Pending)
        if wait == "blocking":
            return False
        on_pending = (lambda approval: turn.sink.emit(fw.Asked(approval))) if turn else None
        ruled = await self.gate.authorize(
            call, chat_id=chat_id, wait="deferred", on_pending=on_pending,
            requester=turn.requester if turn else "", schema=tool.params_json_schema,
        )  # fmt: skip
        return isinstance(ruled, Pending)

    async def _gated(
        self,
        tool: FunctionTool,
        call: ToolCall,
        run: Callable[[dict[str, Any]], Any],
        long_running: bool = False,
    ) -> fw.GatedResult:
        gated = fw.GatedCall(call, run, schema=tool.params_json_schema, long_running=long_running)
        return await fw.gated_call(self.gate, gated, chat_id=self.chat_id, wait=self.wait)

    async def _in_browser(self, call: ToolCall) -> Any:
        """The browser's result for an allowed call: the one it sent ahead, or the connected browser's;
        `_LEAVE` where it answers with the next request."""
        output = await fw.in_browser(self.gate, call)
        return _LEAVE if output is None else fw.browser_result(output)
