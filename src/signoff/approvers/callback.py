"""Calling an approver, whatever its flavour.

An approver is any callable taking the `Approval` and returning a `Decision`, or `None` to abstain. Async
callables are awaited; plain functions run in a worker thread, because a sync approver is usually a blocking
prompt and must not freeze every other chat on the event loop while it waits for a person.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from signoff.core.approval import Approval
from signoff.core.decision import Decision
from signoff.core.errors import SignoffError

Approver: TypeAlias = Callable[[Approval], Decision | Awaitable[Decision | None] | None]


class ApproverFailed(SignoffError):
    """The approver raised or returned something that is not a decision: a failure, never an approval."""


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


async def call_approver(approver: Approver, approval: Approval) -> Decision | None:
    try:
        result = approver(approval) if is_async(approver) else await asyncio.to_thread(approver, approval)
        if inspect.isawaitable(result):
            result = await result
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise ApproverFailed(f"{type(exc).__name__}: {exc}") from exc
    if result is not None and not isinstance(result, Decision):
        raise ApproverFailed(f"returned {type(result).__name__}, not a Decision")
    return result


def approver_name(approver: Callable[..., Any]) -> str:
    name = getattr(approver, "__qualname__", None) or type(approver).__qualname__
    return f"approver:{name}"
