"""0.8.0's `ApprovalToolset`, asking through signoff's gate (see the package's docstring)."""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from signoff.approvers.callback import approver_name
from signoff.compat.models import (
    ACTOR,
    ApprovalCallback,
    ApprovalDecision,
    ApprovalMemory,
    ApprovalRequest,
    ApprovalResult,
    ModeCallback,
    SupportsApprovalDescription,
    SupportsNeedsApproval,
    ask_callback,
)
from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import InvalidCall, SignoffError
from signoff.core.policy import Mode, Policy
from signoff.gate import Gate, Pending, Refused
from signoff.ledger.base import Ledger


@dataclass(init=False, eq=False)
class ApprovalToolset(WrapperToolset[AgentDepsT]):
    """Asks before each call of the wrapped toolset runs; secure by default.

    A tool needs approval unless `config` marks it `{"pre_approved": True}`, or unless the wrapped toolset
    implements `SupportsNeedsApproval`, which then decides instead of `config`. A blocked call and a
    refused one raise `PermissionError`, which pydantic-ai lets out of the agent run unchanged.

    `memory` is taken as given, even when empty, so that `memory=controller.memory` really shares the
    controller's memory (0.8.0 replaced an empty one with a fresh memory of its own).
    """

    _approval_callback: ApprovalCallback
    _memory: ApprovalMemory
    config: dict[str, dict[str, Any]]

    def __init__(
        self,
        inner: AbstractToolset[AgentDepsT],
        approval_callback: ApprovalCallback,
        memory: ApprovalMemory | None = None,
        config: dict[str, dict[str, Any]] | None = None,
        *,
        ledger: Ledger | None = None,
    ) -> None:
        super().__init__(inner)
        self._approval_callback = approval_callback
        self._memory = memory if memory is not None else ApprovalMemory(ledger)
        self.config = config if config is not None else {}

    # 0.8.0 toolsets were hashable and compared by identity; keep it so they can still key a dict, and so
    # two toolsets with separate memories around the same inner toolset are never "equal".
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @property
    def inner(self) -> AbstractToolset[AgentDepsT]:
        return self.wrapped

    @property
    def _inner(self) -> AbstractToolset[AgentDepsT]:
        return self.wrapped

    @property
    def id(self) -> str | None:
        return self.wrapped.id

    def __getattr__(self, name: str) -> Any:
        # Reached only for names this toolset lacks. Dunders are not forwarded: copy and pickle probe for
        # them on the instance and would otherwise rebuild this toolset with the inner one's protocol.
        # `wrapped` is read from __dict__ so an instance still being rebuilt cannot recurse into itself.
        wrapped = self.__dict__.get("wrapped")
        if wrapped is None or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(wrapped, name)

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        wrapped = await self.wrapped.for_run(ctx)
        return self if wrapped is self.wrapped else self._around(wrapped)

    async def for_run_step(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        wrapped = await self.wrapped.for_run_step(ctx)
        return self if wrapped is self.wrapped else self._around(wrapped)

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[AgentDepsT]], AbstractToolset[AgentDepsT]]
    ) -> AbstractToolset[AgentDepsT]:
        return self._around(self.wrapped.visit_and_replace(visitor))

    def _around(self, wrapped: AbstractToolset[AgentDepsT]) -> ApprovalToolset[AgentDepsT]:
        """This toolset around another one, sharing callback, memory and config.

        `WrapperToolset` makes these copies with `dataclasses.replace`, which calls the constructor with
        `wrapped=`; this constructor keeps 0.8.0's `inner`, and the session memory must remain one object.
        """
        twin = copy.copy(self)
        twin.wrapped = wrapped
        return twin

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        verdict = self._get_approval_result(name, tool_args, ctx)
        if verdict.is_blocked:
            raise PermissionError(verdict.block_reason)
        if verdict.is_needs_approval:
            await self._prompt_for_approval(name, tool_args, self._get_description(name, tool_args, ctx))
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)

    # The three hooks below keep 0.8.0's names because subclasses of its toolset override them.

    def _get_approval_result(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT]
    ) -> ApprovalResult:
        if isinstance(self.wrapped, SupportsNeedsApproval):
            return self.wrapped.needs_approval(name, tool_args, ctx)
        if self.config.get(name, {}).get("pre_approved"):
            return ApprovalResult.pre_approved()
        return ApprovalResult.needs_approval()

    def _get_description(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT]) -> str:
        if isinstance(self.wrapped, SupportsApprovalDescription):
            return self.wrapped.get_approval_description(name, tool_args, ctx)
        return f"{name}({', '.join(f'{key}={value!r}' for key, value in tool_args.items())})"

    async def _prompt_for_approval(self, name: str, tool_args: dict[str, Any], description: str) -> None:
        """Raise `PermissionError` unless the session memory or the callback approves this call.

        It takes the one gated-call path: the gate records the approval in the memory's ledger, asks the
        callback as its approver, and takes the single-use claim as this returns, the call running right
        after (0.8.0's hook only asks, and subclasses override it as such). A remembered refusal does not
        refuse again: the person is asked anew, as in 0.8.0. A callback that raises cancels the approval,
        and its error is the caller's, as in 0.8.0.
        """
        memory, callback = self._memory, self._approval_callback
        cached = memory.lookup(name, tool_args)
        if cached is not None and cached.approved:
            return
        await memory.revoke_cleared()
        mode: Mode = callback.mode if isinstance(callback, ModeCallback) else "interactive"
        failed: list[BaseException] = []

        async def approver(approval: Approval) -> Decision:
            request = ApprovalRequest(tool_name=name, tool_args=tool_args, description=description)
            try:
                decision = await ask_callback(callback, request)
            except BaseException as exc:  # nothing stays asked; the error goes to the caller below
                failed.append(exc)
                await _withdraw(memory.ledger, approval.id, "the approval callback failed")
                raise
            memory.store(name, tool_args, decision)
            return _recorded(decision, approver_name(callback))

        approver.__qualname__ = approver_name(callback).removeprefix("approver:")
        outcome: object = await self._gate(mode).run(
            _call(name, tool_args), _claimed, chat_id=memory.session, approvers=[approver],
            describe=description,
        )  # fmt: skip
        if failed:
            raise failed[0]
        if isinstance(outcome, Refused):
            note = f"Strict mode: {name} requires approval" if mode == "strict" else outcome.reason
            raise PermissionError(f"User denied {name}: {note or 'no reason given'}")
        if isinstance(outcome, Pending):  # a blocking wait ends decided, so only a lost waiter gets here
            raise PermissionError(f"User denied {name}: the approval is still pending")

    def _gate(self, mode: Mode) -> Gate:
        """One gate per memory and mode, not one per call: its policy is the mode alone (0.8.0 asks about
        every call that needs approval)."""
        gates = self._memory.gates
        if mode not in gates:
            gates[mode] = Gate(self._memory.ledger, Policy(mode=mode), actor=ACTOR)
        return gates[mode]


async def _claimed(**_: Any) -> object:
    """What the gate runs under the claim: nothing, as the call runs once the hook returns."""


def _call(name: str, tool_args: dict[str, Any]) -> ToolCall:
    """The call as the gate sees it, its id fresh: 0.8.0 asks about every call anew. Arguments JSON
    can't say are recorded by their `str`, as the session memory keys them."""
    call_id = "compat_" + secrets.token_urlsafe(9)
    try:
        return ToolCall(call_id, name, tool_args)
    except InvalidCall:
        return ToolCall(call_id, name, json.loads(json.dumps(tool_args, default=str)))


def _recorded(decision: ApprovalDecision, by: str) -> Decision:
    """The callback's answer as the ledger records it; `remember="session"` becomes a session grant."""
    if not decision.approved:
        return Decision.deny(by, decision.note or "")
    return Decision.approve(by, decision.note or "", "session" if decision.remember == "session" else "once")


async def _withdraw(ledger: Ledger, approval_id: str, why: str) -> None:
    """Cancel the approval a failed callback leaves open; best effort, as the callback's error goes on."""
    with contextlib.suppress(SignoffError):
        await ledger.approvals.cancel(approval_id, ACTOR, why)
