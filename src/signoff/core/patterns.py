"""`matches(text, "regex")`, the one condition that takes a regular expression: RE2's, which runs in time
linear in the text whatever the pattern, so a hostile argument cannot stall a ruling the way a backtracking
engine (Python's `re`) can. The pattern must be a literal, compiled when the policy loads, so a bad one is
an `ExprError` at its column, not a surprise on the first call.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import re2  # type: ignore[import-untyped]

from signoff.core.grammar import ExprError
from signoff.core.values import EvalError, show

MAX_PATTERN: Final = 1000
_OPTIONS: Final = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the policy author's ExprError, not a line on stderr
_OPTIONS.max_mem = 8 << 20

_Eval = Callable[[Mapping[str, Any]], Any]


class _Compiling(Protocol):
    def compile(self, node: ast.AST, depth: int, boolean: bool) -> Any: ...
    def error(self, message: str, node: ast.AST) -> ExprError: ...
    def source(self, node: ast.AST) -> str: ...


def matches(compiler: _Compiling, node: ast.Call, depth: int) -> _Eval:
    """Compile `matches(text, "regex")`: true when the regex finds a match anywhere in `text` (anchor it
    with `^…$` for the whole text)."""
    if node.keywords or len(node.args) != 2 or any(isinstance(a, ast.Starred) for a in node.args):
        raise compiler.error("matches() takes a string and a regular expression", node)
    subject, pattern = node.args
    if not isinstance(pattern, ast.Constant) or not isinstance(pattern.value, str):
        raise compiler.error("matches() takes its regular expression as a string literal", pattern)
    if len(pattern.value) > MAX_PATTERN:
        raise compiler.error(f"regular expression longer than {MAX_PATTERN} characters", pattern)
    try:
        regex = re2.compile(pattern.value, _OPTIONS)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise compiler.error(f"bad regular expression: {why}", pattern) from None
    inner = compiler.compile(subject, depth + 1, boolean=False)
    what = compiler.source(subject)

    def evaluate(args: Mapping[str, Any]) -> bool:
        value = inner.value if hasattr(inner, "value") else inner(args)
        if not isinstance(value, str):
            raise EvalError(f"matches() takes a string, but {what} is {show(value)}")
        return regex.search(value) is not None

    return evaluate
