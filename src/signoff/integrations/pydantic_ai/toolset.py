"""The native toolset: every call of the wrapped toolset goes through the gate.

A refusal never raises into the agent loop: the model gets a typed result with the reason (see
`Refused.to_result`), so it can tell the person what happened and carry on. A deferred wait raises
pydantic-ai's own `ApprovalRequired`, so the run ends with `DeferredToolRequests` exactly as pydantic-ai
users expect, and resuming it with the same call ids picks the ledger's decision up again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import ApprovalRequired, CallDeferred, RunContext, ToolFailed, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import ValidationError, to_jsonable_python

from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.errors import AlreadyConsumed, CallMismatch
from signoff.gate import Gate, Pending, Refused, Wait
from signoff.integrations.turn import current_turn, in_browser

_EXTERNAL = "signoff_external"
REFUSED = {"signoff": "refused"}
"""The metadata of a refused call's result: kept in the history (never sent to the model), so a transport,
live or rebuilding a chat later, shows the call as denied rather than as the tool's output."""


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

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """External tools (run by the browser) look like ordinary ones to pydantic-ai, which would otherwise
        hand them out without calling this toolset; `call_tool` defers them once the gate allows."""
        tools = await super().get_tools(ctx)
        return {
            name: replace(tool, tool_def=replace(tool.tool_def, kind="function", metadata=_external(tool)))
            if tool.tool_def.kind == "external"
            else tool
            for name, tool in tools.items()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
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

        try:
            result = await self.gate.run(
                call, run, chat_id=chat_id, wait=wait, on_pending=pending if turn else None
            )
        except (AlreadyConsumed, CallMismatch) as exc:
            return {"status": "error", "message": str(exc)}
        if isinstance(result, Pending):
            raise ApprovalRequired(metadata={"approval_id": result.approval.id})
        if isinstance(result, Refused):
            return ToolReturn(return_value=result.to_result(), metadata=REFUSED)
        return result

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
