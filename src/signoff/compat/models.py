"""0.8.0's models, session memory and controller (see the package's docstring)."""

from __future__ import annotations

import inspect
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel
from pydantic_ai import RunContext

from signoff.approvers.callback import is_async
from signoff.core.policy import Mode
from signoff.gate import Gate
from signoff.ledger.base import Ledger
from signoff.ledger.memory import MemoryLedger

ACTOR = "signoff:compat"


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
    JSON cannot encode are compared by their `str`, so such arguments still get a key. The remembered
    approvals the toolset records are also session grants of `session`, a chat of this memory's own in
    `ledger`: 0.8.0's API is synchronous, so the decisions themselves are kept here too.
    """

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else MemoryLedger()
        self.session = _new_session()
        self.gates: dict[Mode, Gate] = {}
        """One gate per mode (see `ApprovalToolset._gate`), for every toolset that shares this memory."""
        self._cleared: list[str] = []
        self._cache: dict[tuple[str, str], ApprovalDecision] = {}

    def lookup(self, tool_name: str, args: dict[str, Any]) -> ApprovalDecision | None:
        return self._cache.get(_memory_key(tool_name, args))

    def store(self, tool_name: str, args: dict[str, Any], decision: ApprovalDecision) -> None:
        """Remember `decision` unless it asked not to be; callers need not check `remember` themselves."""
        if decision.remember != "none":
            self._cache[_memory_key(tool_name, args)] = decision

    def clear(self) -> None:
        """Forget every remembered decision; the session's grants match nothing from now on (the memory
        moves to a new chat), and are revoked the next time the toolset asks."""
        self._cache.clear()
        self._cleared.append(self.session)
        self.session = _new_session()

    async def revoke_cleared(self) -> None:
        """Revoke the grants of the sessions `clear` left behind."""
        while self._cleared:
            session = self._cleared.pop()
            for grant in await self.ledger.grants.query(chat_id=session):
                if grant.chat_id == session:
                    await self.ledger.grants.revoke(grant.id, ACTOR)

    def list_approvals(self) -> list[tuple[str, dict[str, Any], ApprovalDecision]]:
        return [(tool, json.loads(args), decision) for (tool, args), decision in self._cache.items()]

    def __len__(self) -> int:
        return len(self._cache)


def _memory_key(tool_name: str, args: dict[str, Any]) -> tuple[str, str]:
    return tool_name, json.dumps(args, sort_keys=True, default=str)


def _new_session() -> str:
    return "compat-" + secrets.token_urlsafe(12)


async def ask_callback(callback: ApprovalCallback, request: ApprovalRequest) -> ApprovalDecision:
    result = callback(request)
    if inspect.isawaitable(result):
        return await result
    return result


def _strict_denial(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=False, note=f"Strict mode: {request.tool_name} requires approval")


class ModeCallback:
    """The callback of a controller in `approve_all` or `strict` mode: called, it answers as 0.8.0 did;
    handed to a toolset, it becomes the mode of the gate's policy, so nobody is asked at all."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(approved=True) if self.mode == "approve_all" else _strict_denial(request)


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
        *,
        ledger: Ledger | None = None,
    ) -> None:
        self.mode = mode
        self._approval_callback = approval_callback
        self._memory = ApprovalMemory(ledger)

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
        return self._remembered(request, await ask_callback(self._approval_callback, request))

    @property
    def approval_callback(self) -> ApprovalCallback:
        """The callback to hand to `ApprovalToolset`: the given one if any, else the mode's own.

        As in 0.8.0, a given callback wins over the mode here; only `request_approval` and
        `request_approval_sync` let `approve_all` and `strict` bypass it.
        """
        if self._approval_callback is not None:
            return self._approval_callback
        if self.mode in ("approve_all", "strict"):
            return ModeCallback(self.mode)
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
