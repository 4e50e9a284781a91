"""The API of pydantic-ai-blocking-approval 0.8.0, so its users switch by changing one import.

Names, constructor signatures, decisions, session memory and error messages match 0.8.0, because code
written for it (and the tests around that code) match on them: a denial is still a `PermissionError` whose
text the agent's caller may parse. What changes is the toolset's place in pydantic-ai: `ApprovalToolset` is
a `WrapperToolset`, so per-run copies, instructions, `apply` and `visit_and_replace` reach the toolset it
wraps, where the 0.8.0 class was an opaque leaf.

Callbacks are called inline on the event loop, and their result is awaited when it is awaitable, as in
0.8.0. `signoff.approvers.call_approver` does not fit: it moves sync callbacks to a worker thread (a 0.8.0
callback may touch loop-bound objects, and a nested approved call made from it would then run without a
loop), it wraps the callback's exceptions in `ApproverFailed` where 0.8.0 let them through unchanged, and
it speaks signoff's `Approval` and `Decision` rather than these models. Only its `is_async` check is
reused, so that `request_approval_sync` also refuses callables whose `__call__` is async.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel
from pydantic_ai import RunContext
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from signoff.approvers.callback import is_async


@dataclass(frozen=True)
class ApprovalResult:
    """A policy's verdict on one call, before any person is asked.

    Built with the `blocked`, `pre_approved` and `needs_approval` constructors, so that a blocked verdict
    always carries the reason the caller will see.
    """

    status: Literal["blocked", "pre_approved", "needs_approval"]
    block_reason: str | None = None

    @classmethod
    def blocked(cls, reason: str) -> ApprovalResult:
        return cls(status="blocked", block_reason=reason)

    @classmethod
    def pre_approved(cls) -> ApprovalResult:
        return cls(status="pre_approved")

    @classmethod
    def needs_approval(cls) -> ApprovalResult:
        return cls(status="needs_approval")

    @property
    def is_blocked(self) -> bool:
        return self.status == "blocked"

    @property
    def is_pre_approved(self) -> bool:
        return self.status == "pre_approved"

    @property
    def is_needs_approval(self) -> bool:
        return self.status == "needs_approval"


@runtime_checkable
class SupportsNeedsApproval(Protocol):
    """A wrapped toolset that knows better than a flat config which of its calls need a person.

    When the wrapped toolset has this method, `ApprovalToolset` asks it instead of reading `config`, so
    decisions can depend on the arguments (a read-only shell command, a path inside a sandbox).
    """

    def needs_approval(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any]
    ) -> ApprovalResult: ...


@runtime_checkable
class SupportsApprovalDescription(Protocol):
    """A wrapped toolset that can phrase its own calls for the person deciding.

    Without it the person sees `tool(arg=value, ...)`, which is exact but often not what they need to judge.
    """

    def get_approval_description(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any]) -> str: ...


class ApprovalRequest(BaseModel):
    """What the approval callback is shown. `tool_args` also keys the session memory."""

    tool_name: str
    tool_args: dict[str, Any]
    description: str


class ApprovalDecision(BaseModel):
    """The answer to one request. `remember="session"` lets identical later calls through unasked."""

    approved: bool
    note: str | None = None
    remember: Literal["none", "session"] = "none"


ApprovalCallback: TypeAlias = Callable[[ApprovalRequest], ApprovalDecision | Awaitable[ApprovalDecision]]
"""A sync callback for terminals, or an async one for a remote UI; both are accepted wherever one is."""


class ApprovalMemory:
    """Decisions remembered for the session, so a person is not asked the same thing twice.

    Two calls are the same when the tool name and the arguments' JSON with sorted keys are equal; values
    JSON cannot encode are compared by their `str`, so such arguments still get a key.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], ApprovalDecision] = {}

    def lookup(self, tool_name: str, args: dict[str, Any]) -> ApprovalDecision | None:
        return self._cache.get(_memory_key(tool_name, args))

    def store(self, tool_name: str, args: dict[str, Any], decision: ApprovalDecision) -> None:
        """Remember `decision` unless it asked not to be; callers need not check `remember` themselves."""
        if decision.remember != "none":
            self._cache[_memory_key(tool_name, args)] = decision

    def clear(self) -> None:
        self._cache.clear()

    def list_approvals(self) -> list[tuple[str, dict[str, Any], ApprovalDecision]]:
        return [(tool, json.loads(args), decision) for (tool, args), decision in self._cache.items()]

    def __len__(self) -> int:
        return len(self._cache)


def _memory_key(tool_name: str, args: dict[str, Any]) -> tuple[str, str]:
    return tool_name, json.dumps(args, sort_keys=True, default=str)


async def _ask(callback: ApprovalCallback, request: ApprovalRequest) -> ApprovalDecision:
    result = callback(request)
    if inspect.isawaitable(result):
        return await result
    return result


def _strict_denial(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=False, note=f"Strict mode: {request.tool_name} requires approval")


def _approve_all(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True)


_SYNC_CALLBACK_NEEDED = (
    "request_approval_sync() requires a sync callback. Use request_approval() for async callbacks."
)


class ApprovalController:
    """One place that holds the mode and the session memory shared by the toolsets of an application.

    `approve_all` and `strict` exist so tests and CI can run the same agent code without a person:
    everything is approved, or everything is refused with a note saying why.
    """

    def __init__(
        self,
        mode: Literal["interactive", "approve_all", "strict"] = "interactive",
        approval_callback: ApprovalCallback | None = None,
    ) -> None:
        self.mode = mode
        self._approval_callback = approval_callback
        self._memory = ApprovalMemory()

    @property
    def memory(self) -> ApprovalMemory:
        return self._memory

    def is_session_approved(self, request: ApprovalRequest) -> bool:
        cached = self._memory.lookup(request.tool_name, request.tool_args)
        return cached is not None and cached.approved

    def clear_session_approvals(self) -> None:
        self._memory.clear()

    def request_approval_sync(self, request: ApprovalRequest) -> ApprovalDecision:
        """Decide without an event loop, for callers that are not async themselves.

        An async callback cannot be awaited here, so it is refused with `TypeError` before it is called.
        A plain function can still return an awaitable (a lambda around an async function); that is
        refused the same way after the call, with its coroutine closed so it is never left un-awaited,
        rather than handed back as if it were a decision.
        """
        settled = self._settled(request)
        if settled is not None:
            return settled
        callback = self._approval_callback
        if callback is None:
            raise NotImplementedError("No approval_callback provided for interactive mode")
        if is_async(callback):
            raise TypeError(_SYNC_CALLBACK_NEEDED)
        decision = callback(request)
        if inspect.isawaitable(decision):
            if inspect.iscoroutine(decision):
                decision.close()
            raise TypeError(_SYNC_CALLBACK_NEEDED)
        return self._remembered(request, decision)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        settled = self._settled(request)
        if settled is not None:
            return settled
        if self._approval_callback is None:
            raise RuntimeError("No approval_callback provided for interactive mode")
        return self._remembered(request, await _ask(self._approval_callback, request))

    @property
    def approval_callback(self) -> ApprovalCallback:
        """The callback to hand to `ApprovalToolset`: the given one if any, else the mode's own.

        As in 0.8.0, a given callback wins over the mode here; only `request_approval` and
        `request_approval_sync` let `approve_all` and `strict` bypass it.
        """
        if self._approval_callback is not None:
            return self._approval_callback
        if self.mode == "approve_all":
            return _approve_all
        if self.mode == "strict":
            return _strict_denial
        raise RuntimeError("No approval_callback set for interactive mode")

    def _settled(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """The decision the mode or the session memory already gives, so nobody is asked for it."""
        if self.mode == "approve_all":
            return ApprovalDecision(approved=True)
        if self.mode == "strict":
            return _strict_denial(request)
        return self._memory.lookup(request.tool_name, request.tool_args)

    def _remembered(self, request: ApprovalRequest, decision: ApprovalDecision) -> ApprovalDecision:
        # Only approvals are remembered here: a remembered refusal would silently deny every later
        # identical call through this controller, with no prompt to change one's mind.
        if decision.approved:
            self._memory.store(request.tool_name, request.tool_args, decision)
        return decision


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
    ) -> None:
        super().__init__(inner)
        self._approval_callback = approval_callback
        self._memory = memory if memory is not None else ApprovalMemory()
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

        A remembered refusal does not refuse again: the person is asked anew, as in 0.8.0.
        """
        cached = self._memory.lookup(name, tool_args)
        if cached is not None and cached.approved:
            return
        request = ApprovalRequest(tool_name=name, tool_args=tool_args, description=description)
        decision = await _ask(self._approval_callback, request)
        self._memory.store(name, tool_args, decision)
        if not decision.approved:
            raise PermissionError(f"User denied {name}: {decision.note or 'no reason given'}")
