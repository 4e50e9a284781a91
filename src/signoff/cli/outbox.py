"""`signoff outbox`: what channels were told of each approval, and how each delivery went."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column

from signoff.cli.common import LedgerOption, operator, out, print_table, shown, when, with_ledger
from signoff.core.notice import Delivery, Notice

outbox_app = typer.Typer(no_args_is_help=True, help="List the outbox's notices, and retry one.")


@outbox_app.command("list")
def outbox_list(
    ledger: LedgerOption = None,
    state: Annotated[Delivery | None, typer.Option(help="Only notices in this state.")] = None,
    approval: Annotated[str | None, typer.Option(help="Only this approval's notices.")] = None,
) -> None:
    """List notices, oldest first: the event, the channel, and how its delivery stands."""
    found = with_ledger(ledger, lambda lg: lg.outbox.query(state=state, approval_id=approval))
    copied = [Column(name, no_wrap=True) for name in ("id", "approval", "channel", "type")]  # never wrapped
    columns: list[str | Column] = [*copied, "state", "attempts", "created", "delivered", "error"]
    print_table(found, columns, _row, empty="no notices")


def _row(n: Notice) -> tuple[str, ...]:
    return (
        n.id, n.approval_id, n.channel, n.type.removeprefix("approval."), n.state, str(n.attempts),
        when(n.created_at), when(n.delivered_at), shown(n.last_error),
    )  # fmt: skip


@outbox_app.command("retry")
def outbox_retry(notice_id: str, ledger: LedgerOption = None) -> None:
    """Put a notice back in line to be delivered now (a failed one, say): audited in your name."""
    notice = with_ledger(ledger, lambda lg: lg.outbox.retry(notice_id, operator().id))
    out.print(f"{notice.id} ({notice.channel}, {notice.type}) will be delivered again", highlight=False)
