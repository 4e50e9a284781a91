"""The native toolset: every call of the wrapped toolset goes through the gate, browser tools run in the
browser, and long-running tools are what signoff expects (the browser's wrapper also usable alone).

A refusal never raises into the agent loop: the model gets a typed result with the reason (see
`Refused.to_result`), so it can tell the person what happened and carry on. A deferred wait raises
pydantic-ai's own `ApprovalRequired`, so the run ends with `DeferredToolRequests` exactly as pydantic-ai
users expect, and resuming it with the same call ids picks the ledger's decision up again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter, with_config
from pydantic_ai import ApprovalRequired, CallDeferred, RunContext, ToolFailed, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
from pydantic_ai.toolsets.function import FunctionToolsetTool
from pydantic_core import SchemaValidator, ValidationError, to_jsonable_python
from typing_extensions import TypedDict

from signoff.core.call import ToolCall
from signoff.core.task import Task, with_note
from signoff.gate import Gate, Pending, Refused, Wait
from signoff.integrations.framework import GatedCall, Ran, Rejected, gated_call, in_browser, task_status
from signoff.tasks import is_long_running

_BROWSER = "signoff_browser"
LONG_RUNNING = {"signoff": "long-running"}
"""Tool metadata that declares a tool long-running, for tools not made from a function (`long_running`
marks a function)."""
TASK = "task_id"
"""The metadata key of a long-running call's task id, on a call the run ends with (see `call_tool`)."""
REFUSED = {"signoff": "refused"}
"""The metadata of a refused call's result: kept in the history (never sent to the model), so a transport,
live or rebuilding a chat later, shows the call as denied rather than as the tool's output."""


def _is_long_running(name: str, tool: ToolsetTool[Any]) -> bool:
    if _marked_long_running(tool):
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


def _as_browser(tool: ToolsetTool[Any]) -> dict[str, Any]:
    return {**(tool.tool_def.metadata or {}), _BROWSER: True}


def _is_browser(tool: ToolsetTool[Any]) -> bool:
    return bool((tool.tool_def.metadata or {}).get(_BROWSER))


def _marked_long_running(tool: ToolsetTool[Any]) -> bool:
    return (tool.tool_def.metadata or {}).get("signoff") == LONG_RUNNING["signoff"]


def _browser_made_callable(tools: dict[str, ToolsetTool[AgentDepsT]]) -> dict[str, ToolsetTool[AgentDepsT]]:
    """pydantic-ai hands an external tool out without calling any toolset: marked as the browser's, it
    looks like an ordinary one, so its call comes to the toolset."""
    return {
        name: replace(tool, tool_def=replace(tool.tool_def, kind="function", metadata=_as_browser(tool)))
        if tool.tool_def.kind == "external"
        else tool
        for name, tool in tools.items()
    }


async def _run_in_browser(gate: Gate, name: str, tool_args: dict[str, Any], ctx: RunContext[Any]) -> Any:
    """The call run in the turn's connected browser, or the run ended with it open (`CallDeferred`) for
    the browser to answer in the next request."""
    output = await in_browser(gate, ToolCall(ctx.tool_call_id or "", name, tool_args))
    if output is None:
        raise CallDeferred()
    if output.error_text is not None:
        raise ToolFailed(output.error_text)
    return output.output


@with_config(extra="forbid")
class _CheckTask(TypedDict):
    task_id: str


_CHECK_TASK_ARGS = TypeAdapter(_CheckTask)
_CHECK_TASK_VALIDATOR = SchemaValidator(_CHECK_TASK_ARGS.core_schema)
CHECK_TASK = ToolDefinition(
    name="check_task",
    description="Check a long-running call's task: its status and progress, or its result once it has ended.",
    parameters_json_schema=_CHECK_TASK_ARGS.json_schema(),
)
"""`check_task` as the model sees it: made once, at import. Building it from a function per run (its
docstring parsed, its schema generated) was the largest single cost of a request in the profile."""


def _long_running_marked(
    tools: dict[str, ToolsetTool[AgentDepsT]], owner: AbstractToolset[AgentDepsT]
) -> dict[str, ToolsetTool[AgentDepsT]]:
    """Long-running tools (seed 004) marked, their descriptions with the seed's NOTE, and, if there are
    any, `check_task`, answered by `owner`."""
    marked = {name for name, tool in tools.items() if _is_long_running(name, tool)}
    for name in marked:
        tool = tools[name]
        metadata = {**(tool.tool_def.metadata or {}), **LONG_RUNNING}
        described = with_note(tool.tool_def.description)
        tools[name] = replace(tool, tool_def=replace(tool.tool_def, description=described, metadata=metadata))
    if marked:
        tools[CHECK_TASK.name] = ToolsetTool(
            toolset=owner, tool_def=CHECK_TASK, max_retries=1, args_validator=_CHECK_TASK_VALIDATOR
        )
    return tools


def is_check_task(tool: ToolsetTool[Any]) -> bool:
    """`tool` is signoff's own `check_task`."""
    return tool.tool_def is CHECK_TASK


@dataclass
class BrowserToolset(WrapperToolset[AgentDepsT]):
    """Browser tools (pydantic-ai's external tools) run in the browser of the turn; for a toolset used
    without the gate. (`SignoffToolset` does the same in its one wrapper.)"""

    gate: Gate = field(kw_only=True)

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        return _browser_made_callable(await super().get_tools(ctx))

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        if _is_browser(tool):
            return await _run_in_browser(self.gate, name, tool_args, ctx)
        return await super().call_tool(name, tool_args, ctx, tool)


@dataclass
class SignoffToolset(BrowserToolset[AgentDepsT]):
    """Wrap any toolset so the gate rules on each call; browser tools run in the browser of the turn, and
    long-running tools are marked, with `check_task` beside them.

    One wrapper, not three stacked: pydantic-ai copies every wrapper of a run's toolset at each run and
    step, and the copies of two more showed in every request's profile. It is a `BrowserToolset`, whose
    own `call_tool` runs a call once the gate allowed it.

    Outside a signoff server the chat id and wait mode come from here; inside one, the request's turn
    supplies them.
    """

    chat_id: str = field(default="default", kw_only=True)
    wait: Wait = field(default="blocking", kw_only=True)

    def __post_init__(self) -> None:
        self._long_running: set[str] = set()

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools = _long_running_marked(await super().get_tools(ctx), self)
        self._long_running = {name for name, tool in tools.items() if _marked_long_running(tool)}
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        if is_check_task(tool):  # signoff's own read: not gated
            return await task_status(self.gate, tool_args["task_id"], chat_id=self.chat_id)
        call = ToolCall(ctx.tool_call_id or "", name, to_jsonable_python(tool_args))
        allowed = super().call_tool  # in the browser for a browser tool, else by the wrapped toolset

        async def run(args: dict[str, Any]) -> Any:
            if args != call.args:
                try:  # a person edited the arguments: they must fit the tool's schema too
                    edited = tool.args_validator.validate_python(args)
                except ValidationError as exc:
                    return {"status": "error", "message": f"the edited arguments do not fit {name}: {exc}"}
                return await allowed(name, edited, ctx, tool)
            return await allowed(name, tool_args, ctx, tool)

        source = _source(tool)
        gated = GatedCall(
            call,
            run,
            schema=tool.tool_def.parameters_json_schema,
            long_running=name in self._long_running,
            interruptible=not isinstance(source, FunctionToolsetTool) or source.is_async,
            history=ctx.messages,
        )
        match await gated_call(self.gate, gated, chat_id=self.chat_id, wait=self.wait):
            case Ran(value):
                return value
            case Pending(approval=approval):
                raise ApprovalRequired(metadata={"approval_id": approval.id})
            case Refused() as refusal:
                return ToolReturn(return_value=refusal.to_result(), metadata=REFUSED)
            case Rejected(reason):
                return {"status": "error", "message": reason}
            case Task() as task:
                return self._started(task, ctx)

    def _started(self, task: Task, ctx: RunContext[AgentDepsT]) -> Any:
        """The first result of a long-running call is its pending status. When every call of the step is
        long-running, the run ends here instead (pydantic-ai's deferred call: the work goes on outside the
        agent), and the next request gives the model the task's status then, its result if it has ended."""
        step = next((m for m in reversed(ctx.messages) if isinstance(m, ModelResponse)), None)
        names = [p.tool_name for p in step.parts if isinstance(p, ToolCallPart)] if step else []
        if names and all(n in self._long_running for n in names):
            raise CallDeferred(metadata={TASK: task.id})
        return task.status()


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
