"""`signoff audit`: verify the keyed chain and the records against it, sign checkpoints, read the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape

from signoff.cli.common import (
    JsonOption,
    LedgerOption,
    err,
    fail,
    out,
    print_json,
    print_table,
    shown,
    when,
    with_ledger,
)
from signoff.core.audit import AuditEntry, Checkpoint
from signoff.core.errors import SignoffError
from signoff.ledger.evidence import default_checkpoints, read_checkpoints, verify

audit_app = typer.Typer(no_args_is_help=True, help="Verify and read the keyed audit log; sign checkpoints.")


@audit_app.command("verify")
def audit_verify(
    ledger: LedgerOption = None,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            help="A file of checkpoints (signoff audit checkpoint, or --audit-checkpoints): the audit must"
            " reach every one and match it; repeat for more files. Default: the file `serve`, `demo` and"
            " `mcp-gateway` keep for this ledger beside the audit key, where there is one.",
        ),
    ] = None,
) -> None:
    """Check the keyed chain, the checkpoints, and every record against its audit entries; exit 1 naming
    each fault."""
    default = None if checkpoint else default_checkpoints(ledger)
    files = checkpoint or [path for path in (default,) if path is not None and path.exists()]
    marks = [mark for path in files for mark in _checkpoints(path)]
    evidence = with_ledger(ledger, lambda lg: verify(lg, marks), create=False)
    if evidence.cut is not None:
        err.print(f"[red]audit broken:[/] {escape(evidence.shortfall())}", highlight=False)
        read = ", ".join(str(path) for path in files)
        mine = " (if you emptied or replaced this ledger yourself, move that file away)" if default else ""
        err.print(f"checkpoints read from {read}{mine}", highlight=False, markup=False, soft_wrap=True)
    elif evidence.broken is not None:
        broken = evidence.broken
        err.print(
            f"[red]audit broken at entry {broken.seq}:[/] {escape(broken.problem)}"
            f" ({evidence.count} entries hold before it)"
        )
    for problem in evidence.problems:
        err.print(f"[red]record does not match the audit:[/] {escape(problem)}", highlight=False)
    if not evidence.ok:
        raise typer.Exit(1)
    if files and default:
        against = f", {len(marks)} checkpoints in {default} hold"
    elif files:
        against = f", {len(marks)} checkpoints hold"
    else:  # nothing to hold the chain's end to: say so, and where a server would have kept them
        against = f" (no checkpoints at {default}: a ledger cut short would pass)" if default else ""
    said = f"audit ok: {evidence.count} entries{against}; every record matches its entries"
    out.print(said, markup=False, soft_wrap=True)


def _checkpoints(path: Path) -> list[Checkpoint]:
    """The checkpoints in `path`; a file that can't be read is said as every command says it."""
    try:
        return read_checkpoints(path)
    except SignoffError as exc:
        if isinstance(cause := exc.__cause__, OSError):
            fail(f"{path}: cannot read: {cause.strerror or cause}")
        fail(str(exc))


@audit_app.command("checkpoint")
def audit_checkpoint(ledger: LedgerOption = None) -> None:
    """Print a signed checkpoint (the entry count and the head hash) as one line of JSON: keep it outside
    the database, and `audit verify --checkpoint` fails for an audit that no longer reaches it."""
    mark = with_ledger(ledger, lambda lg: lg.audit.checkpoint(), create=False)
    print(msgspec.json.encode(mark).decode())


@audit_app.command("list")
def audit_list(
    ledger: LedgerOption = None,
    after: Annotated[int, typer.Option(help="Only entries after this sequence number.")] = 0,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Show audit entries in order; names and details with hidden characters spelled out."""
    entries = with_ledger(ledger, lambda lg: lg.audit.entries(after, limit), create=False)
    if as_json:  # each entry as the chain holds it, `before` and `after` left out where there are none
        print_json({"entries": [_json(e) for e in entries]})
        return
    columns = ("seq", "at", "actor", "action", "subject", "change", "detail")
    print_table(entries, columns, _row, empty="no audit entries")


def _json(entry: AuditEntry) -> dict[str, Any]:
    return {name: value for name, value in msgspec.to_builtins(entry).items() if value is not None}


def _row(e: AuditEntry) -> tuple[str, ...]:
    change = f"{e.before or ''} → {e.after or ''}" if e.before or e.after else ""
    detail = json.dumps(e.detail, ensure_ascii=False)
    return str(e.seq), when(e.at), shown(e.actor), shown(e.action), shown(e.subject), change, shown(detail)
