"""`signoff tasks`: list, show and cancel long-running calls' tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from signoff.cli.common import (
    ChatFilter,
    JsonOption,
    LedgerOption,
    ReasonOption,
    operator,
    out,
    print_json,
    print_record,
    print_table,
    shown,
    uncut,
    when,
    with_ledger,
)
from signoff.cli.ids import TASK
from signoff.core.task import Task, TaskState
from signoff.ledger import Ledger
from signoff.tasks import Tasks

tasks_app = typer.Typer(no_args_is_help=True, help="List, show and cancel long-running calls' tasks.")


@tasks_app.command("list")
def tasks_list(
    ledger: LedgerOption = None,
    chat: ChatFilter = None,
    state: Annotated[TaskState | None, typer.Option(help="Only this state.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List tasks, oldest first, with how far each got."""

    async def read(lg: Ledger) -> tuple[list[Task], Callable[[str], str]]:
        found = await lg.tasks.query(chat_id=chat, state=state)
        return found, str if as_json else await TASK.shown(lg)

    found, short = with_ledger(ledger, read, create=False)
    if as_json:
        print_json({"tasks": [t.public() for t in found]})
        return
    columns = (uncut("id"), "state", "progress", "chat", "tool", "message", "created", "ended")
    print_table(found, columns, lambda t: _row(t, short), empty="no tasks")


def _row(t: Task, short: Callable[[str], str]) -> tuple[str, ...]:
    return (
        short(t.id), t.state, f"{t.progress}%", shown(t.chat_id), shown(t.call.tool),
        shown(t.error or t.message), when(t.created_at), when(t.finished_at),
    )  # fmt: skip


@tasks_app.command("show")
def tasks_show(task_id: str, ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """Show one task as the tasks API shows it."""

    async def read(lg: Ledger) -> dict[str, Any]:
        return (await lg.tasks.get(await TASK.resolve(lg, task_id))).public()

    record = with_ledger(ledger, read, create=False)
    if as_json:
        print_json(record)
    else:
        print_record(record)


@tasks_app.command("cancel")
def tasks_cancel(
    task_id: str,
    ledger: LedgerOption = None,
    reason: ReasonOption = "",
) -> None:
    """Ask a task to stop. Its worker stops the body at its next chance and records it cancelled."""

    async def cancel(lg: Ledger) -> Task:
        found = await TASK.resolve(lg, task_id)
        return await Tasks(lg).cancel(found, operator().id, reason, operator().described)

    task = with_ledger(ledger, cancel)
    asked = "cancelled" if task.state is TaskState.CANCELLED else "asked to cancel"
    out.print(f"{task.id} {asked} by {shown(task.cancel_by)}", highlight=False)
