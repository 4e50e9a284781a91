"""What one chat request shares with the tools it runs: the chat, the wait mode, and a way to report back.

An agent framework calls tools deep inside its own loop, with no handle on the HTTP request that started
the run. A context variable carries the request's `Turn` down to them: it is copied into every task the run
spawns, and two concurrent runs never see each other's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from signoff.core.approval import Approval
from signoff.gate import Wait


@dataclass
class Turn:
    chat_id: str
    wait: Wait
    asked: Callable[[Approval], None] = lambda approval: None
    """Called when a call of this turn waits for a person, before the wait starts."""
    parked: Callable[[Approval, Sequence[object]], Awaitable[None]] | None = None
    """Awaited before a blocking wait starts, with the framework's message history so far: the chat saves
    itself as waiting on that approval, so if this process dies during the wait, any worker can resume
    the chat as a deferred one."""


current_turn: ContextVar[Turn | None] = ContextVar("signoff_turn", default=None)
