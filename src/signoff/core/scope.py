"""What a rule covers besides its condition: the shell commands (`commands`, globs) and the paths (`paths`,
directories) of a call, each checked when the policy loads and matched when a call arrives.

A shell tool's call is judged part by part (`core.shell`): each simple command by the first rule whose
`commands` (or no scope) covers it, each file it writes by the first rule whose `paths` (or no scope)
covers it, and the call by its most restrictive part, deny over ask over allow. Any other tool's
`paths` are tested against its `file_path` argument. Globs are `fnmatch`'s (`*`, `?`, `[…]`), matched
against the command's words joined by one space, with no backtracking blow-up.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Final

from signoff.core.paths import Place, inside
from signoff.core.rule_settings import Invalid
from signoff.core.shell import Part
from signoff.core.values import EvalError
from signoff.core.visible import hidden

MAX_PATTERN: Final = 1000
MAX_PATTERNS: Final = 1000
PATH_ARGUMENT: Final = "file_path"
"""The argument a tool other than a shell names its file with (Claude Code's `Edit`, `Write`, `Read`)."""
RANK: Final = {"allow": 0, "ask": 1, "deny": 2}


def _entries(value: Any, what: str, example: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise Invalid(f"must be a list of {what} such as {example}, not {value!r}")
    if not value or len(value) > MAX_PATTERNS:
        raise Invalid(f"must list from 1 to {MAX_PATTERNS} {what}")
    for entry in value:
        if not isinstance(entry, str) or not entry.strip():
            raise Invalid(f"must list {what} as non-empty strings, not {entry!r}")
        if len(entry) > MAX_PATTERN:
            raise Invalid(f"{entry[:40]!r}… is longer than {MAX_PATTERN} characters")
        if any(hidden(char) or (char.isspace() and char != " ") for char in entry):
            raise Invalid(f"{entry!r} holds a control or invisible character")
    return tuple(value)


def commands(value: Any) -> tuple[str, ...] | None:
    """Globs over a simple command's words joined by one space (`"git status"`, `"git diff *"`)."""
    patterns = _entries(value, "globs", '["git status", "git diff *"]')
    for pattern in patterns or ():
        if pattern != pattern.strip() or "  " in pattern:
            raise Invalid(f"{pattern!r} never matches: a command's words are joined by one space")
    return patterns


def directories(value: Any) -> tuple[str, ...] | None:
    """Directories (`"src"`, `"~/.ssh"`, `"/etc"`); a relative one is taken against the call's `cwd`."""
    found = _entries(value, "directories", '["src", "~/.ssh"]')
    for directory in found or ():
        if any(char in directory for char in "*?[]"):
            raise Invalid(f"{directory!r} is a glob; paths are directories, and cover what is under them")
        if directory.startswith("~") and directory != "~" and not directory.startswith("~/"):
            raise Invalid(f"{directory!r} names another user's home directory; write its absolute path")
    return found


def covers(rule_commands: tuple[str, ...] | None, rule_paths: tuple[str, ...] | None,
           part: Part | None, args: Mapping[str, Any], place: Place) -> bool:  # fmt: skip
    """Whether a rule with these scopes covers `part` of a shell call (or, `part` None, a whole call).

    A scoped rule covers only its kind of part: `commands` a command, `paths` a write. `EvalError` when
    it cannot be told (no `file_path`, a path that cannot be resolved): the policy then asks."""
    if part is not None and part.kind == "command":
        if rule_paths is not None:
            return False
        return rule_commands is None or any(fnmatch.fnmatchcase(part.text, p) for p in rule_commands)
    if rule_commands is not None:
        return False
    if rule_paths is None:
        return True
    if part is None:
        path = args.get(PATH_ARGUMENT)
        if not isinstance(path, str):
            raise EvalError(f"{PATH_ARGUMENT} is {'missing' if path is None else 'not a string'}")
    else:
        path = part.text
    located = place.locate(path)
    return any(inside(located, place.locate(directory)) for directory in rule_paths)


def describe(rule_commands: tuple[str, ...] | None, rule_paths: tuple[str, ...] | None) -> str | None:
    """A rule's scope as a policy file writes it, for the reason a ruling gives."""
    if rule_commands is not None:
        return "commands = [" + ", ".join(f'"{p}"' for p in rule_commands) + "]"
    if rule_paths is not None:
        return "paths = [" + ", ".join(f'"{p}"' for p in rule_paths) + "]"
    return None
