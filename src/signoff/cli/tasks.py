"""`signoff tasks`: list, show and cancel long-running calls' tasks."""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from signoff.cli.common import (
    ChatFilter,
    LedgerOption,
    ReasonOption,
    operator,
    out,
    print_record,
    print_table,
    shown,
    when,
    with_ledger,
)
from signoff.core.task import Task, TaskState
from signoff.tasks import Tasks

tasks_app = typer.Typer(no_args_is_help=True, help="List, show and cancel long-running calls' tasks.")


@tasks_app.command("list")
def tasks_list(
    ledger: LedgerOption = None,
    chat: ChatFilter = None,
    state: Annotated[TaskState | None, typer.Option(help="Only this state.")] = None,
) -> None:
    """List tasks, oldest first, with how far each got."""
    found = with_ledger(ledger, lambda lg: lg.tasks.query(chat_id=chat, state=state))
    columns = ("id", "state", "progress", "chat", "tool", "message", "created", "ended")
    print_table(found, columns, _row, empty="no tasks")


def _row(t: Task) -> tuple[str, ...]:
    return (
        t.id, t.state, f"{t.progress}%", shown(t.chat_id), shown(t.call.tool), shown(t.error or t.message),
        when(t.created_at), when(t.finished_at),
    )  # fmt: skip


@tasks_app.command("show")
def tasks_show(task_id: str, ledger: LedgerOption = None) -> None:
    """Show one task in full, as JSON."""
    print_record(msgspec.to_builtins(with_ledger(ledger, lambda lg: lg.tasks.get(task_id))))


@tasks_app.command("cancel")
def tasks_cancel(
    task_id: str,
    ledger: LedgerOption = None,
    reason: ReasonOption = "",
) -> None:
    """Ask a task to stop. Its worker stops the body at its next chance and records it cancelled."""
    task = with_ledger(
        ledger, lambda lg: Tasks(lg).cancel(task_id, operator().id, reason, operator().described)
    )
    asked = "cancelled" if task.state is TaskState.CANCELLED else "asked to cancel"
    out.print(f"{task.id} {asked} by {shown(task.cancel_by)}", highlight=False)
