"""What every `signoff` command shares: the ledger option, the operator's identity, and safe output.

The CLI works on the ledger directly, with the audit key, so whoever runs it holds what the deployment's owner
holds anyway: it acts as the operator, `cli:<os user>`, with role admin. The user is the process's, from the
operating system, never `$USER` or `$LOGNAME`: anyone can set those, and one operator typing a command
twice under two names met a quorum of two. Everything it prints that someone else wrote (descriptions,
arguments, names) goes through `shown`, which spells out hidden characters (see `core.visible`) and escapes
Rich markup, so a recipient named `[red]ok[/]` or one hiding a right-to-left override prints as it is.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from signoff.core.errors import SignoffError
from signoff.core.principal import ADMIN, Principal, Proven
from signoff.core.visible import reveal
from signoff.ledger import Ledger, open_ledger
from signoff.ledger.keyfile import KeyFile, load_keyring
from signoff.ledger.url import ENV_VAR

T = TypeVar("T")
R = TypeVar("R")

out = Console()
err = Console(stderr=True, soft_wrap=True)

LedgerOption = Annotated[
    str | None, typer.Option("--ledger", envvar=ENV_VAR, help="Ledger URL (default sqlite:///signoff.db).")
]
ChatFilter = Annotated[str | None, typer.Option("--chat", help="Only this chat.")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why.")]


def os_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a user id with no passwd entry (a container's, say) is still one person
        return str(os.getuid())


def operator() -> Principal:
    user = os_user()
    return Principal(id=f"cli:{user}", name=user, roles=(ADMIN,), via="cli")


def operator_proven() -> Proven:
    """The operator, to decide as: proven by the operating system, whose user runs this process, and by
    the audit key it holds."""
    return Proven(principal=operator())


def with_ledger(url: str | None, action: Callable[[Ledger], Awaitable[T]]) -> T:
    """Run `action` on the opened ledger, with the audit key; a `SignoffError` is one line on stderr and
    exit 1."""

    async def go() -> T:
        async with open_ledger(url, keyring=audit_key().keyring) as ledger:
            return await action(ledger)

    try:
        return asyncio.run(go())
    except SignoffError as exc:
        fail(str(exc))


def audit_key() -> KeyFile:
    """The audit key file; a new one is announced, since it must be kept, and kept apart from the ledger."""
    found = load_keyring()
    if found.created:
        err.print(
            f"signoff: made a new audit key in {found.path}: keep it, and apart from the ledger's database",
            highlight=False,
        )
    return found


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def shown(text: str) -> str:
    """Someone else's text, safe to print: hidden characters spelled out, markup escaped."""
    return escape(reveal(text))


def when(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def print_table(
    records: Sequence[R], columns: Sequence[str | Column], row: Callable[[R], Sequence[str]], *, empty: str
) -> None:
    """Records one row each, or `empty` in words where a table with no rows would read as a glitch."""
    table = Table(*columns)
    for record in records:
        table.add_row(*row(record))
    out.print(table if records else empty)


def print_record(data: object) -> None:
    """A record in full, as JSON, its strings shown as `shown` shows them."""
    out.print_json(data=_revealed(data), highlight=False)


def _revealed(value: object) -> object:
    if isinstance(value, str):
        return reveal(value)
    if isinstance(value, dict):
        return {reveal(str(key)): _revealed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_revealed(item) for item in value]
    return value
