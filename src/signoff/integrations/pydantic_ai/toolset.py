"""The native toolset: every call of the wrapped toolset goes through the gate.

A refusal never raises into the agent loop: the model gets a typed result with the reason (see
`Refused.to_result`), so it can tell the person what happened and carry on. A deferred wait raises
pydantic-ai's own `ApprovalRequired`, so the run ends with `DeferredToolRequests` exactly as pydantic-ai
users expect, and resuming it with the same call ids picks the ledger's decision up again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import ApprovalRequired, CallDeferred, RunContext, Tool, ToolFailed, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
from pydantic_ai.toolsets.function import FunctionToolsetTool
from pydantic_core import ValidationError, to_jsonable_python

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyConsumed, CallMismatch, Unproven
from signoff.core.task import Task, with_note
from signoff.gate import Gate, Pending, Refused, Wait
from signoff.integrations.turn import Turn, current_turn, in_browser
from signoff.tasks import is_long_running

_EXTERNAL = "signoff_external"
LONG_RUNNING = {"signoff": "long-running"}
"""Tool metadata that declares a tool long-running, for tools not made from a function (`long_running`
marks a function)."""
TASK = "task_id"
"""The metadata key of a long-running call's task id, on a call the run ends with (see `call_tool`)."""
REFUSED = {"signoff": "refused"}
"""The metadata of a refused call's result: kept in the history (never sent to the model), so a transport,
live or rebuilding a chat later, shows the call as denied rather than as the tool's output."""


def _is_long_running(name: str, tool: ToolsetTool[Any]) -> bool:
    if (tool.tool_def.metadata or {}).get("signoff") == LONG_RUNNING["signoff"]:
        return True
    source = _source(tool)
    if isinstance(source, FunctionToolsetTool) and isinstance(source.toolset, FunctionToolset):
        function = source.toolset.tools.get(source.original_name or name)
        return function is not None and is_long_running(function.function)
    return False


def _source(tool: ToolsetTool[Any]) -> ToolsetTool[Any]:
    """The tool as the toolset that made it holds it, under any combining toolsets' wrappers."""
    while (inner := getattr(tool, "source_tool", None)) is not None:
        tool = inner
    return tool


def refused(part: object) -> bool:
    return isinstance(part, ToolReturnPart) and part.metadata == REFUSED


def _external(tool: ToolsetTool[Any]) -> dict[str, Any]:
    return {**(tool.tool_def.metadata or {}), _EXTERNAL: True}


@dataclass
class SignoffToolset(WrapperToolset[AgentDepsT]):
    """Wrap any toolset so the gate rules on each call.

    Outside a signoff server the chat id and wait mode come from here; inside one, the request's turn
    supplies them.
    """

    gate: Gate = field(kw_only=True)
    chat_id: str = field(default="default", kw_only=True)
    wait: Wait = field(default="blocking", kw_only=True)

    def __post_init__(self) -> None:
        self._long_running: set[str] = set()
        self._checker = FunctionToolset[AgentDepsT]([Tool(self._check_task, name="check_task")])

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """External tools (run by the browser) look like ordinary ones to pydantic-ai, which would otherwise
        hand them out without calling this toolset; `call_tool` defers them once the gate allows.

        A long-running tool's description gets seed 004's NOTE, and the agent gets `check_task`."""
        tools = await super().get_tools(ctx)
        self._long_running = {name for name, tool in tools.items() if _is_long_running(name, tool)}
        shown = {
            name: replace(tool, tool_def=replace(tool.tool_def, kind="function", metadata=_external(tool)))
            if tool.tool_def.kind == "external"
            else tool
            for name, tool in tools.items()
        }
        for name in self._long_running:
            tool = shown[name]
            shown[name] = replace(
                tool, tool_def=replace(tool.tool_def, description=with_note(tool.tool_def.description))
            )
        if self._long_running:
            shown.update(await self._checker.get_tools(ctx))
        return shown

    async def _check_task(self, task_id: str) -> dict[str, Any]:
        """Check a long-running call's task: its status and progress, or its result once it has ended."""
        turn = current_turn.get()
        return await self.gate.tasks.check(task_id, turn.chat_id if turn else self.chat_id)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        if tool.toolset is self._checker:  # signoff's own read of this chat's tasks: nothing to gate
            return await self._checker.call_tool(name, tool_args, ctx, tool)
        turn = current_turn.get()
        chat_id, wait = (turn.chat_id, turn.wait) if turn else (self.chat_id, self.wait)
        call = ToolCall(ctx.tool_call_id or "", name, to_jsonable_python(tool_args))

        async def run(**args: Any) -> Any:
            if (tool.tool_def.metadata or {}).get(_EXTERNAL):
                return await self._in_browser(ToolCall(call.call_id, name, args))
            if args == call.args:
                return await self.wrapped.call_tool(name, tool_args, ctx, tool)
            try:  # a person edited the arguments: they must fit the tool's schema too
                edited = tool.args_validator.validate_python(args)
            except ValidationError as exc:
                return {"status": "error", "message": f"the edited arguments do not fit {name}: {exc}"}
            return await self.wrapped.call_tool(name, edited, ctx, tool)

        async def pending(approval: Approval) -> None:
            assert turn is not None
            turn.asked(approval)
            if wait == "blocking" and turn.parked is not None:
                await turn.parked(approval, ctx.messages)

        on_pending = pending if turn else None
        asks: dict[str, Any] = {
            "chat_id": chat_id, "wait": wait, "on_pending": on_pending,
            "requester": turn.requester if turn else "", "schema": tool.tool_def.parameters_json_schema,
        }  # fmt: skip
        try:
            if name in self._long_running:
                source = _source(tool)
                interruptible = not isinstance(source, FunctionToolsetTool) or source.is_async
                result = await self.gate.start(call, run, interruptible=interruptible, **asks)
            else:
                result = await self.gate.run(call, run, **asks)
        except (AlreadyConsumed, CallMismatch, Unproven) as exc:
            return {"status": "error", "message": str(exc)}
        if isinstance(result, Pending):
            raise ApprovalRequired(metadata={"approval_id": result.approval.id})
        if isinstance(result, Refused):
            return ToolReturn(return_value=result.to_result(), metadata=REFUSED)
        if isinstance(result, Task):
            return self._started(result, ctx, turn)
        return result

    def _started(self, task: Task, ctx: RunContext[AgentDepsT], turn: Turn | None) -> Any:
        """The first result of a long-running call is its pending status. When every call of the step is
        long-running, the run ends here instead (pydantic-ai's deferred call: the work goes on outside the
        agent), and the next request gives the model the task's status then, its result if it has ended."""
        if turn is not None:
            turn.started(self.gate.tasks, task)
        step = next((m for m in reversed(ctx.messages) if isinstance(m, ModelResponse)), None)
        names = [p.tool_name for p in step.parts if isinstance(p, ToolCallPart)] if step else []
        if names and all(n in self._long_running for n in names):
            raise CallDeferred(metadata={TASK: task.id})
        return task.status()

    async def _in_browser(self, call: ToolCall) -> Any:
        """Allowed: the browser runs it, within the turn or after it ends."""
        output = await in_browser(self.gate, call)
        if output is None:
            raise CallDeferred()
        if output.error_text is not None:
            raise ToolFailed(output.error_text)
        return output.output


@dataclass
class Signoff(AbstractCapability[AgentDepsT]):
    """Gate every tool of an agent, whatever toolsets it was built with.

    `Agent(..., capabilities=[Signoff(gate)])`, or per run: `agent.run(..., capabilities=[Signoff(gate)])`.
    """

    gate: Gate
    chat_id: str = "default"
    wait: Wait = "blocking"

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        return SignoffToolset(toolset, gate=self.gate, chat_id=self.chat_id, wait=self.wait)
