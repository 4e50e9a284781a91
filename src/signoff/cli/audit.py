"""`signoff audit`: verify the hash chain and read the log."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from signoff.cli.common import LedgerOption, err, out, shown, when, with_ledger

audit_app = typer.Typer(no_args_is_help=True, help="Inspect and verify the hash-chained audit log.")


@audit_app.command("verify")
def audit_verify(ledger: LedgerOption = None) -> None:
    """Check the hash chain; exit 1 naming the first broken entry."""
    count, broken = with_ledger(ledger, lambda lg: lg.verify_audit())
    if broken is not None:
        err.print(
            f"[red]audit broken at entry {broken.seq}:[/] {broken.problem} ({count} entries hold before it)"
        )
        raise typer.Exit(1)
    out.print(f"audit ok: {count} entries")


@audit_app.command("list")
def audit_list(
    ledger: LedgerOption = None,
    after: Annotated[int, typer.Option(help="Only entries after this sequence number.")] = 0,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
) -> None:
    """Show audit entries in order; names and details with hidden characters spelled out."""
    entries = with_ledger(ledger, lambda lg: lg.audit(after, limit))
    table = Table("seq", "at", "actor", "action", "subject", "change", "detail")
    for e in entries:
        change = f"{e.before or ''} → {e.after or ''}" if e.before or e.after else ""
        detail = json.dumps(e.detail, ensure_ascii=False)
        table.add_row(
            str(e.seq), when(e.at), shown(e.actor), shown(e.action), shown(e.subject), change, shown(detail)
        )
    out.print(table if entries else "no audit entries")
