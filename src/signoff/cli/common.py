"""What every `signoff` command shares: the ledger option, the operator's identity, and safe output.

The CLI works on the ledger directly, with the audit key, so whoever runs it holds what the deployment's owner
holds anyway: it acts as the operator, `cli:<os user>`, with role admin. The user is the process's, from the
operating system, never `$USER` or `$LOGNAME`: anyone can set those, and one operator typing a command
twice under two names met a quorum of two. Everything it prints that someone else wrote (descriptions,
arguments, names) goes through `shown`, which spells out hidden characters (see `core.visible`) and escapes
Rich markup, so a recipient named `[red]ok[/]` or one hiding a right-to-left override prints as it is.

What a script reads is `--json`: one document, with the field names of the REST API's JSON wherever the API
shows the same record. Tables are for people: on a terminal an id is its shortest unique prefix (see
`cli.ids`), and piped each record is one line with its ids whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pwd
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from signoff.core.errors import SignoffError
from signoff.core.policy import Policy
from signoff.core.principal import ADMIN, Principal, Proven
from signoff.core.visible import hidden, reveal
from signoff.ledger import Ledger, open_ledger
from signoff.ledger.keyfile import KeyFile, load_keyring
from signoff.ledger.url import ENV_VAR, NoLedger, existing

T = TypeVar("T")
R = TypeVar("R")

out = Console()
err = Console(stderr=True, soft_wrap=True)

LedgerOption = Annotated[
    str | None, typer.Option("--ledger", envvar=ENV_VAR, help="Ledger URL (default sqlite:///signoff.db).")
]
ChatFilter = Annotated[str | None, typer.Option("--chat", help="Only this chat.")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why.")]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document, its fields as the README's CLI section says.")
]


class Unreadable(SignoffError):
    """A file named on the command line that cannot be read."""


def read_text(path: str | Path) -> str:
    """The text of a file a person named, or `Unreadable` in the words every command uses for one it can't
    read: `<path>: cannot read: <why>`, as the channels file says it too."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise Unreadable(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise Unreadable(f"{path}: cannot read: not UTF-8 text") from None


def read_policy(path: str | Path) -> Policy:
    """The policy file a person named, with this machine's filesystem for rules over `paths`: symlinks
    resolved where the file exists, `~` as this user's home (the core sees no filesystem of its own)."""
    return Policy.from_toml(
        read_text(path), source=str(path), resolve=os.path.realpath, home=os.path.expanduser("~")
    )


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


def with_ledger(url: str | None, action: Callable[[Ledger], Awaitable[T]], *, create: bool = True) -> T:
    """Run `action` on the opened ledger, with the audit key; a `SignoffError` is one line on stderr and
    exit 1. A command that only reads passes `create=False`: where no SQLite database is, it says so and how
    to name the right ledger, and makes nothing, neither a database nor an audit key."""

    async def go() -> T:
        async with open_ledger(url if create else existing(url), keyring=audit_key().keyring) as ledger:
            return await action(ledger)

    try:
        return asyncio.run(go())
    except NoLedger as exc:
        fail(f"{exc}: pass --ledger URL or set {ENV_VAR}")
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
    say_error(message)
    raise typer.Exit(code)


def say_error(message: str) -> None:
    """`error: <what>: <why>` on one line of stderr, whatever lines the message came in."""
    line = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    err.print(f"[red]error:[/] {escape(line)}", highlight=False)


def shown(text: str) -> str:
    """Someone else's text, safe to print: hidden characters spelled out, markup escaped."""
    return escape(reveal(text))


def when(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def terminal() -> bool:
    """Whether a person reads stdout. Asked of the file itself, not of Rich, which `FORCE_COLOR` persuades:
    a script that pipes a table must get its ids whole."""
    return out.file.isatty()


def uncut(header: str) -> Column:
    """A column that is never wrapped nor cut, however narrow the terminal: ids, which are copied."""
    return Column(header, no_wrap=True)


def print_table(
    records: Sequence[R], columns: Sequence[str | Column], row: Callable[[R], Sequence[str]], *, empty: str
) -> None:
    """Records one row each, or `empty` in words where a table with no rows would read as a glitch.
    Piped, the table takes its own width, so that each record is one line for `grep` and the like."""
    if not records:
        out.print(empty)
        return
    rows = [row(record) for record in records]
    table = Table(*(_whole(column, [cells[index] for cells in rows]) for index, column in enumerate(columns)))
    for cells in rows:
        table.add_row(*cells)
    if terminal():
        out.print(table)
    else:
        width = Measurement.get(out, out.options.update_width(1 << 20), table).maximum
        Console(file=out.file, width=width).print(table)


def _whole(column: str | Column, cells: list[str]) -> str | Column:
    """An `uncut` column as wide as its widest cell: Rich cuts even unwrapped columns to fit."""
    if isinstance(column, str) or not column.no_wrap:
        return column
    return dataclasses.replace(column, min_width=max(Text.from_markup(cell).cell_len for cell in cells))


def print_json(document: object) -> None:
    """`document` as one JSON document on stdout, its strings exactly as stored, for a script to read. A
    hidden character is written as its JSON escape, which reads back the same: a terminal shows it as such
    rather than obeying it (see `core.visible`)."""
    text = json.dumps(document, ensure_ascii=False, indent=2)
    print("".join(_escaped(char) if char != "\n" and hidden(char) else char for char in text))


def _escaped(char: str) -> str:
    units = char.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[at : at + 2]):04x}" for at in range(0, len(units), 2))


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
