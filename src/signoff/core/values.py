"""What a condition's operators mean on the JSON values a call carries (see `core.expr`).

The semantics are JSON's, not Python's: booleans are not numbers, and values of different kinds are never
compared at all; only `null` compares with anything. Whatever does not fit raises `EvalError`, which the
policy turns into asking a person rather than a guess.

Text a caller controls can look like a listed value without being equal to it (`mallory`, `"Mallory "`,
a fullwidth `\\uff2dallory`, `Mallory` with a zero-width space). Conditions get helpers that normalize a
string before comparing: `casefold(s)`, `nfkc(s)` (Unicode compatibility forms), `strip(s)` (outer
whitespace), `visible(s)` (drops invisible and format characters) and `normal(s)`, all of them at once,
with inner runs of whitespace made one space. A deny list reads `normal(recipient) in ["mallory", "eve"]`.
"""

from __future__ import annotations

import ast
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Final

from signoff.core.errors import SignoffError
from signoff.core.visible import hidden


class EvalError(SignoffError):
    """A condition that cannot be decided for these arguments: an argument is missing or has the wrong type.

    It is not a `ValueError` on purpose: the policy catches exactly this and escalates to a person.
    """


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    raise EvalError(f"{type(value).__name__} is not a JSON value")


def show(value: Any) -> str:
    """A short description of a value for an error message: the person reading it sees what was there."""
    kind = kind_of(value)
    if kind in ("array", "object"):
        return f"an {kind}"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}" if kind != "null" else "null"


def equal(a: Any, b: Any) -> bool:
    """JSON equality. Values of different kinds can't be compared (an error), except with null: a type
    mismatch read as "not equal" would turn a negated or a deny condition into an allow."""
    kind = kind_of(a)
    if kind != kind_of(b):
        if "null" in (kind, kind_of(b)):
            return False
        raise EvalError(f"cannot compare {show(a)} with {show(b)}")
    if kind == "array":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if kind == "object":
        return a.keys() == b.keys() and all(equal(a[key], b[key]) for key in a)
    return bool(a == b)


def ordering(symbol: str, test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(a: Any, b: Any) -> bool:
        ka, kb = kind_of(a), kind_of(b)
        if ka != kb or ka not in ("number", "string"):
            raise EvalError(f"cannot compare {show(a)} {symbol} {show(b)}")
        return test(a, b)

    return compare


def contains(item: Any, container: Any) -> bool:
    kind = kind_of(container)
    if kind == "array":
        return any(equal(item, element) for element in container)
    if kind in ("string", "object"):
        if not isinstance(item, str):
            raise EvalError(
                f"cannot test {show(item)} in {show(container)}: only a string can be in a {kind}"
            )
        return item in container
    raise EvalError(f"cannot test membership in {show(container)}")


def visible_text(text: str) -> str:
    return "".join(c for c in text if c == " " or not hidden(c) or c.isspace())


def normal_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", visible_text(text)).casefold().split())


HELPERS: Final[dict[str, Callable[[str], str]]] = {
    "casefold": str.casefold,
    "nfkc": lambda text: unicodedata.normalize("NFKC", text),
    "strip": str.strip,
    "visible": visible_text,
    "normal": normal_text,
}
"""The functions a condition may call, each from one string to one string."""


COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], bool]]] = {
    ast.Eq: equal,
    ast.NotEq: lambda a, b: not equal(a, b),
    ast.Lt: ordering("<", lambda a, b: a < b),
    ast.LtE: ordering("<=", lambda a, b: a <= b),
    ast.Gt: ordering(">", lambda a, b: a > b),
    ast.GtE: ordering(">=", lambda a, b: a >= b),
    ast.In: contains,
    ast.NotIn: lambda a, b: not contains(a, b),
}
ORDERING: Final = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
MEMBERSHIP: Final = (ast.In, ast.NotIn)


def truth(value: Any, what: str) -> bool:
    """Only a real boolean is a truth value: `"false"` or `0` deciding a payment would be a silent guess."""
    if isinstance(value, bool):
        return value
    raise EvalError(f"{what} is {show(value)}, not a bool")
