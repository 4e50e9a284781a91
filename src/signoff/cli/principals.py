"""`signoff principals`: the people (and services) who may act, each with a personal token.

`add` prints the new token alone on the last line of stdout, once: the ledger keeps only its hash, so a
lost token is revoked and a new principal added, never recovered.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from signoff.cli.common import LedgerOption, operator, out, shown, when, with_ledger

principals_app = typer.Typer(no_args_is_help=True, help="Add, list and revoke principals and their roles.")

RoleOption = Annotated[
    list[str] | None, typer.Option("--role", help="A role, such as finance; repeat for more.")
]


@principals_app.command("add")
def principals_add(
    name: str,
    ledger: LedgerOption = None,
    role: RoleOption = None,
    display: Annotated[str, typer.Option("--display", help="The name people read (default: NAME).")] = "",
) -> None:
    """Add a principal and print its personal token, once, alone on the last line."""
    record, token = with_ledger(
        ledger, lambda lg: lg.principals.register(name, role or [], display=display, actor=operator().id)
    )
    roles = ", ".join(record.roles) or "no roles"
    out.print(f"added {shown(record.id)} ({shown(roles)}); its token, shown only now:", highlight=False)
    print(token)


@principals_app.command("list")
def principals_list(ledger: LedgerOption = None) -> None:
    """List principals, oldest first, revoked ones too."""
    found = with_ledger(ledger, lambda lg: lg.principals.all())
    table = Table("name", "display", "roles", "added", "by", "revoked")
    for p in found:
        revoked = f"{when(p.revoked_at)} by {shown(p.revoked_by)}" if p.revoked_at is not None else ""
        table.add_row(
            shown(p.id),
            shown(p.name),
            shown(", ".join(p.roles)),
            when(p.created_at),
            shown(p.created_by),
            revoked,
        )
    out.print(table if found else "no principals")


@principals_app.command("revoke")
def principals_revoke(name: str, ledger: LedgerOption = None) -> None:
    """Revoke a principal's token: every worker refuses it from the next request on."""
    record = with_ledger(ledger, lambda lg: lg.principals.revoke(name, operator().id))
    out.print(f"{shown(record.id)} revoked by {shown(record.revoked_by)}", highlight=False)


@principals_app.command("roles")
def principals_roles(name: str, ledger: LedgerOption = None, role: RoleOption = None) -> None:
    """Set a principal's roles (no --role takes every role away)."""
    record = with_ledger(ledger, lambda lg: lg.principals.assign_roles(name, role or [], operator().id))
    out.print(f"{shown(record.id)}: {shown(', '.join(record.roles)) or 'no roles'}", highlight=False)
