"""Where a path a call names really points: made absolute against the call's working directory, `~` made the
home directory, and resolved, so that neither `..` nor a symlink leads out of a directory a rule names.

Resolving a symlink reads the filesystem, which the core never does itself: the policy is given the
function (`Policy(resolve=os.path.realpath)`) by whoever loads it, and without one a rule over paths cannot be
decided, so it asks. `..` is the resolver's too: `a/link/..` is the parent of where `link` points, not `a`.

The working directory and home directory come with the call, in its `context` (`ToolCall.context`, which
an integration fills in: Claude Code's hook gives `cwd` and `permission_mode`), never in its arguments,
which an approver may edit; a home the call does not carry is the policy's (`Policy(home=...)`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from signoff.core.values import EvalError

Resolve = Callable[[str], str]
"""An absolute path to itself with every symlink in it resolved where it exists (`os.path.realpath`)."""
CONTEXT: Final = "context"
"""The name a condition reads a call's context by (`context.cwd`), beside its arguments."""


class Place:
    """Where one call runs, as its paths are read: the working directory, the home, and the resolver."""

    __slots__ = ("context", "home", "resolve")

    def __init__(self, context: Mapping[str, str], home: str | None, resolve: Resolve | None) -> None:
        self.context = context
        self.home = home
        self.resolve = resolve

    def locate(self, path: str) -> str:
        """`path` absolute and resolved; `EvalError` when that cannot be known."""
        cwd = _absolute(self.context.get("cwd"), "cwd")
        home = _absolute(self.context.get("home"), "home") or self.home
        if not path or "\0" in path:
            raise EvalError(f"{path!r} is not a path")
        if path == "~" or path.startswith("~/"):
            if home is None:
                raise EvalError(f"{path} names the home directory, and the call does not say where it is")
            path = home.rstrip("/") + path[1:]
        elif path.startswith("~"):
            raise EvalError(f"{path} names another user's home directory")
        elif not path.startswith("/"):
            if cwd is None:
                raise EvalError(f"{path} is relative, and the call carries no {CONTEXT}.cwd")
            path = f"{cwd.rstrip('/')}/{path}"
        if self.resolve is None:
            raise EvalError("paths are resolved by the policy's resolve (os.path.realpath), and it has none")
        resolved = self.resolve(path)
        if not isinstance(resolved, str) or not resolved.startswith("/"):
            raise EvalError(f"{path} resolved to {resolved!r}, not an absolute path")
        return resolved


def _absolute(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise EvalError(f"{CONTEXT}.{name} must be an absolute path, not {value!r}")
    return value


def inside(path: str, directory: str) -> bool:
    """Whether the resolved `path` is `directory` or under it (`/srcs` is not under `/src`)."""
    directory = directory.rstrip("/")
    return path == directory or path.startswith(directory + "/") or not directory
