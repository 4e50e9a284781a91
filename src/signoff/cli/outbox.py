"""`signoff outbox`: what channels were told of each approval, and how each delivery went."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.table import Column

from signoff.cli.common import (
    JsonOption,
    LedgerOption,
    operator,
    out,
    print_json,
    print_table,
    shown,
    uncut,
    when,
    with_ledger,
)
from signoff.cli.ids import APPROVAL, NOTICE
from signoff.core.notice import Delivery, Notice
from signoff.core.views import notice_json
from signoff.ledger import Ledger

Shorts = tuple[Callable[[str], str], Callable[[str], str]]
"""How a table shows notice ids and approval ids."""

outbox_app = typer.Typer(no_args_is_help=True, help="List the outbox's notices, and retry one.")


@outbox_app.command("list")
def outbox_list(
    ledger: LedgerOption = None,
    state: Annotated[Delivery | None, typer.Option(help="Only notices in this state.")] = None,
    approval: Annotated[str | None, typer.Option(help="Only this approval's notices.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List notices, oldest first: the event, the channel, and how its delivery stands."""

    async def read(lg: Ledger) -> tuple[list[Notice], Shorts]:
        of = None if approval is None else await APPROVAL.resolve(lg, approval)
        found = await lg.outbox.query(state=state, approval_id=of)
        if as_json:
            return found, (str, str)
        return found, (await NOTICE.shown(lg), await APPROVAL.shown(lg))

    found, shorts = with_ledger(ledger, read, create=False)
    if as_json:
        print_json({"notices": [_notice_json(n) for n in found]})
        return
    copied = [uncut(name) for name in ("id", "approval", "channel", "type")]  # copied into commands
    columns: list[str | Column] = [*copied, "state", "attempts", "created", "delivered", "error"]
    print_table(found, columns, lambda n: _row(n, shorts), empty="no notices")


def _notice_json(notice: Notice) -> dict[str, Any]:
    """The approvals API's notice (`notice_json`), which leaves out its approval since it is shown inside
    one; a list of notices from any approval needs it."""
    return {"approval_id": notice.approval_id, **notice_json(notice)}


def _row(n: Notice, shorts: Shorts) -> tuple[str, ...]:
    notice, approval = shorts
    return (
        notice(n.id), approval(n.approval_id), n.channel, n.type.removeprefix("approval."), n.state,
        str(n.attempts), when(n.created_at), when(n.delivered_at), shown(n.last_error),
    )  # fmt: skip


@outbox_app.command("retry")
def outbox_retry(notice_id: str, ledger: LedgerOption = None) -> None:
    """Put a notice back in line to be delivered now (a failed one, say): audited in your name."""

    async def retry(lg: Ledger) -> Notice:
        return await lg.outbox.retry(await NOTICE.resolve(lg, notice_id), operator().id)

    notice = with_ledger(ledger, retry)
    out.print(f"{notice.id} ({notice.channel}, {notice.type}) will be delivered again", highlight=False)
