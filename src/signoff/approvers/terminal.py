"""The terminal approver: shows the call with Rich and reads the answer without blocking the event loop.

Rich's `Prompt.ask` calls `input()`, which would freeze every other waiter and could not be abandoned when
another channel decides first. So the prompt is rendered with Rich and the line is read through the event
loop's reader on the input's file descriptor, which a cancelled task simply stops listening to.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
from typing import TextIO

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from signoff.core.approval import Approval
from signoff.core.decision import Decision

PROMPT = (
    "[bold][a][/]pprove, [bold][d][/]eny, approve for this [bold][s][/]ession, or [bold][i][/]gnore here? "
)


class TerminalApprover:
    """Asks one question at a time, so answers to two concurrent approvals never interleave."""

    def __init__(
        self, console: Console | None = None, stream: TextIO | None = None, by: str | None = None
    ) -> None:
        self.console = console or Console(stderr=True)
        self.stream = stream or sys.stdin
        self.by = by or f"terminal:{getpass.getuser()}"
        self._turn = asyncio.Lock()

    async def __call__(self, approval: Approval) -> Decision | None:
        async with self._turn:
            self.console.print(render(approval))
            while True:
                self.console.print(PROMPT, end="")
                answer = (await self._readline()).strip().lower()
                if answer in ("a", "approve", "y", "yes"):
                    return Decision.approve(self.by)
                if answer in ("s", "session"):
                    return Decision.approve(self.by, remember="session")
                if answer in ("d", "deny", "n", "no"):
                    self.console.print("reason (optional): ", end="")
                    return Decision.deny(self.by, (await self._readline()).strip())
                if answer in ("i", "ignore", ""):
                    return None
                self.console.print(f"[red]unknown answer {answer!r}[/]")

    async def _readline(self) -> str:
        """One line from the stream; end of input reads as an empty line, which abstains."""
        loop = asyncio.get_running_loop()
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return self.stream.readline()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(fd, readable)
        except (PermissionError, ValueError, NotImplementedError):
            return await asyncio.to_thread(self.stream.readline)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        return self.stream.readline()


def render(approval: Approval) -> Panel:
    """What a person needs in one glance: the tool, its arguments, why it asks, and the deadline."""
    table = Table.grid(padding=(0, 2))
    table.add_row("[bold]tool[/]", approval.call.tool)
    for key, value in approval.call.args.items():
        table.add_row(f"[bold]{key}[/]", json.dumps(value, ensure_ascii=False))
    table.add_row("[bold]chat[/]", approval.chat_id)
    table.add_row("[bold]why[/]", approval.rule)
    if approval.deadline is not None:
        table.add_row(
            "[bold]deadline[/]", f"{approval.deadline - approval.created_at:.0f}s after it was asked"
        )
    return Panel(table, title=f"approve? {approval.description}", subtitle=approval.id, expand=False)
