"""A coding agent's calls as a person judges them: a shell command as its lines, with where it runs; a file
edit as a unified diff; a new file as its path and the start of its content. frontend/src/shared/
argumentViews.ts is a port of this module (tests/test_argument_views.py runs both on the same calls).

A call is recognised by its tool's name and its arguments' shape together, Claude Code's:

- `Bash` `{command, description?, timeout?, run_in_background?, dangerouslyDisableSandbox?}`;
- `Edit` `{file_path, old_string, new_string, replace_all?}`;
- `MultiEdit` `{file_path, edits: [{old_string, new_string, replace_all?}]}`;
- `Write` `{file_path, content}`.

Any other argument, or one of another type, and the call is shown as rows (`argument_rows.rows`), as every
other call is: a view never leaves an argument out, and another tool that happens to be called `Bash` is
shown as its arguments are. The arguments a view does not turn into a block stay rows, by name.

The diff is Python's `difflib.unified_diff` of the two strings' lines, without the `---`/`+++` header (the
path is the row above it); its hunks' line numbers count within `old_string` and `new_string`. Lines are
split at line feeds only: any other line break is the content's and is spelled out like every hidden
character (`core.visible`), on each line's text and never on the diff's marks.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, Final

from signoff.core.argument_rows import Code, Item, Row, rows
from signoff.core.call import normalize
from signoff.core.visible import reveal

CONTEXT: Final = 3
"""Unchanged lines a diff shows around each change, as `diff -u` does."""
WRITE_LINES: Final = 40
WRITE_CHARACTERS: Final = 2000
"""How much of a new file's content is shown: its first lines, up to this many of each (a longer first
line is cut). The rest is counted, not shown: enough to judge, on any channel's screen."""

_ONE_EDIT: Final = {"old_string": "string", "new_string": "string", "replace_all": "boolean"}
_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "edits": lambda v: (
        isinstance(v, list) and bool(v) and all(_fits(e, _ONE_EDIT, ("old_string", "new_string")) for e in v)
    ),
}
_BASH: Final = {
    "command": "string",
    "description": "string",
    "timeout": "number",
    "run_in_background": "boolean",
    "dangerouslyDisableSandbox": "boolean",
}
_EDIT: Final = {"file_path": "string", **_ONE_EDIT}
_MULTI_EDIT: Final = {"file_path": "string", "edits": "edits"}
_WRITE: Final = {"file_path": "string", "content": "string"}


def view(tool: str, args: Mapping[str, Any], context: Mapping[str, str] | None = None) -> list[Item]:
    """The call's arguments as a person judges them: a block and rows where the tool and the arguments
    are of a shape this module knows, rows otherwise. `context` is where the call was made (`cwd`)."""
    json: dict[str, Any] = normalize(args)
    shape = _SHAPES.get(tool)
    if shape is None or not _fits(json, *shape[:2]):
        return list(rows(json))
    return shape[2](json, context or {})


def _fits(args: Any, types: Mapping[str, str], required: tuple[str, ...]) -> bool:
    return (
        isinstance(args, dict)
        and all(name in args for name in required)
        and all(name in types and _TYPES[types[name]](value) for name, value in args.items())
    )


def _bash(args: dict[str, Any], context: Mapping[str, str]) -> list[Item]:
    cwd = context.get("cwd")
    name = f"command in {reveal(cwd)}" if cwd else "command"
    return [Code(name, "shell", lines(args["command"])), *_rest(args, "command")]


def _edit(args: dict[str, Any], context: Mapping[str, str]) -> list[Item]:
    change = Code("old_string → new_string", "diff", diff(args["old_string"], args["new_string"]))
    return [_path(args), change, *_rest(args, "file_path", "old_string", "new_string")]


def _multi_edit(args: dict[str, Any], context: Mapping[str, str]) -> list[Item]:
    edits: list[dict[str, Any]] = args["edits"]
    blocks: list[Item] = []
    for number, edit in enumerate(edits, 1):
        every = ", replace_all" if edit.get("replace_all") else ""
        name = f"edit {number} of {len(edits)}{every}: old_string → new_string"
        blocks.append(Code(name, "diff", diff(edit["old_string"], edit["new_string"])))
    return [_path(args), *blocks]


def _write(args: dict[str, Any], context: Mapping[str, str]) -> list[Item]:
    every = _split(args["content"])
    shown: list[str] = []
    size = 0
    for line in every[:WRITE_LINES]:
        if size + len(line) > WRITE_CHARACTERS:
            shown += [] if shown else [line[:WRITE_CHARACTERS]]  # one long line: its start, at least
            break
        shown.append(line)
        size += len(line)
    left = len(every) - len(shown)
    more = f"… {left} more {_lines(left)} not shown" if left else ""
    if shown and len(shown[-1]) < len(every[len(shown) - 1]):
        more = "… the rest of this line" + (f" and {more.removeprefix('… ')}" if left else " not shown")
    named = f"content, {len(every)} {_lines(len(every))}"
    return [_path(args), Code(named, "text", tuple(map(reveal, shown)), more)]


def lines(text: str) -> tuple[str, ...]:
    """`text`'s lines (`_split`), each revealed."""
    return tuple(map(reveal, _split(text)))


def _split(text: str) -> list[str]:
    """`text`'s lines, split at line feeds; the one that ends the text makes no line of its own."""
    split = text.split("\n")
    return split[:-1] if len(split) > 1 and split[-1] == "" else split


def diff(old: str, new: str) -> tuple[str, ...]:
    """The unified diff of `old`'s lines to `new`'s (without its two file lines), each line's text revealed
    after its mark; every line of `old`, unmarked, when nothing changed. A line feed that ends both makes
    no line; one that ends only one of them is a change, and shows as one."""
    both = old.endswith("\n") and new.endswith("\n")
    before, after = (
        (old[:-1].split("\n"), new[:-1].split("\n")) if both else (old.split("\n"), new.split("\n"))
    )
    made = list(difflib.unified_diff(before, after, lineterm="", n=CONTEXT))[2:]
    if not made:
        return tuple(" " + reveal(line) for line in before)
    return tuple(line if line.startswith("@@") else line[0] + reveal(line[1:]) for line in made)


def _path(args: dict[str, Any]) -> Row:
    return ("file_path", reveal(args["file_path"]))


def _rest(args: dict[str, Any], *shown: str) -> list[Row]:
    return rows({name: value for name, value in args.items() if name not in shown})


def _lines(count: int) -> str:
    return "line" if count == 1 else "lines"


_View = Callable[[dict[str, Any], Mapping[str, str]], list[Item]]
_SHAPES: Final[dict[str, tuple[Mapping[str, str], tuple[str, ...], _View]]] = {
    "Bash": (_BASH, ("command",), _bash),
    "Edit": (_EDIT, ("file_path", "old_string", "new_string"), _edit),
    "MultiEdit": (_MULTI_EDIT, ("file_path", "edits"), _multi_edit),
    "Write": (_WRITE, ("file_path", "content"), _write),
}
