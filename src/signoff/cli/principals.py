"""`signoff principals`: the people (and services) who may act, each with a personal token.

`add` prints the new token alone on the last line of stdout, once: the ledger keeps only its hash, so a
lost token is revoked and a new principal added, never recovered.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from signoff.cli.common import (
    JsonOption,
    LedgerOption,
    operator,
    out,
    print_json,
    print_table,
    shown,
    when,
    with_ledger,
)
from signoff.core.principal import Registered

principals_app = typer.Typer(
    no_args_is_help=True, help="Add, list and revoke principals, their roles and their linked identities."
)

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
def principals_list(ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """List principals, oldest first, revoked ones too."""
    found = with_ledger(ledger, lambda lg: lg.principals.all(), create=False)
    if as_json:
        print_json({"principals": [_json(p) for p in found]})
        return
    columns = ("name", "display", "roles", "email", "slack", "added", "by", "revoked")
    print_table(found, columns, _row, empty="no principals")


def _json(p: Registered) -> dict[str, Any]:
    """A principal as `views.principal_json` names its fields (`name` is the name people read), with what
    the ledger keeps of it, `revoked` as a grant's is, and never its token's hash nor its MAC."""
    record: dict[str, Any] = {
        "id": p.id, "name": p.name, "roles": list(p.roles), "created_at": p.created_at,
        "created_by": p.created_by, "active": p.active,
    }  # fmt: skip
    record.update({kind: value for kind, value in (("email", p.email), ("slack", p.slack)) if value})
    if p.revoked_at is not None:
        record["revoked"] = {"at": p.revoked_at, "by": p.revoked_by}
    return record


def _row(p: Registered) -> tuple[str, ...]:
    revoked = f"{when(p.revoked_at)} by {shown(p.revoked_by)}" if p.revoked_at is not None else ""
    return (
        shown(p.id), shown(p.name), shown(", ".join(p.roles)), shown(p.email), shown(p.slack),
        when(p.created_at), shown(p.created_by), revoked,
    )  # fmt: skip


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


@principals_app.command("link")
def principals_link(
    name: str,
    ledger: LedgerOption = None,
    email: Annotated[
        str | None, typer.Option("--email", help="The address its approval emails go to.")
    ] = None,
    slack: Annotated[
        str | None, typer.Option("--slack", help="Its Slack user id (U…), whose clicks are its decisions.")
    ] = None,
) -> None:
    """Link a principal's channel identities: an answer from them is this principal's decision."""
    if email is None and slack is None:
        raise typer.BadParameter("give --email, --slack or both", param_hint="--email")
    record = with_ledger(
        ledger, lambda lg: lg.principals.link(name, email=email, slack=slack, actor=operator().id)
    )
    out.print(f"{shown(record.id)}: {_identities(record)}", highlight=False)


@principals_app.command("unlink")
def principals_unlink(
    name: str,
    ledger: LedgerOption = None,
    email: Annotated[bool, typer.Option("--email", help="Unlink its email address.")] = False,
    slack: Annotated[bool, typer.Option("--slack", help="Unlink its Slack user.")] = False,
) -> None:
    """Unlink a principal's channel identities (both, unless --email or --slack says which)."""
    both = not email and not slack
    record = with_ledger(
        ledger,
        lambda lg: lg.principals.link(
            name,
            email="" if email or both else None,
            slack="" if slack or both else None,
            actor=operator().id,
        ),
    )
    out.print(f"{shown(record.id)}: {_identities(record)}", highlight=False)


def _identities(record: Registered) -> str:
    linked = [
        f"email {record.email}" if record.email else "",
        f"slack {record.slack}" if record.slack else "",
    ]
    return shown(", ".join(filter(None, linked)) or "no linked identities")
