"""Conditions: the tiny language a policy uses to look at a call's arguments (`amount > 100`).

It is hand-written on purpose. A condition decides whether a payment runs without a person, so the language is
part of the security boundary, and a general evaluator (`eval`, simpleeval and the like) is the wrong tool:
they allow calls and real attribute access, which reach into Python objects, and they find most faults only
when the condition runs, which in a policy means on the first call that matters. This grammar is small enough
to check completely when the policy loads: `ast.parse` does the parsing, and only a whitelist of node types
gets through; everything else is refused with the construct and the column, so a typo fails at startup and not
during a payment.

The values are JSON values, with JSON's semantics (see `core.values`): a mismatch raises `EvalError` rather
than guessing, so the policy escalates the call to a person instead of silently allowing or skipping it; a
mismatch read as "not equal" once let `not (role == "admin")` allow.

A deny list compares normalized text (`normal(recipient) in ["mallory", "eve"]`; see `core.values`), and
`matches(url, "^https://")` tests a regular expression in linear time (`core.patterns`).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Final

from signoff.core.grammar import BINOP, COLLECTION, MAX_DEPTH, MAX_LENGTH, REJECTED, ExprError
from signoff.core.patterns import matches
from signoff.core.values import COMPARE, HELPERS, MEMBERSHIP, ORDERING, EvalError, kind_of, show, truth

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Condition", "EvalError", "ExprError", "compile_condition"]

_Eval = Callable[[Mapping[str, Any]], Any]
_MISSING: Final = object()


class _Literal:
    """A value known at compile time, so constant-only faults (`"a" < 1`, `-"x"`) are caught at load time."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _run_chain(
    steps: list[Callable[[Any, Any], bool]],
    compiled: list[_Literal | _Eval],
    args: Mapping[str, Any],
) -> bool:
    """`a < b <= c` means `a < b and b <= c`: `b` is evaluated once; the chain stops at the first false."""

    def value(part: _Literal | _Eval) -> Any:
        return part.value if isinstance(part, _Literal) else part(args)

    left = value(compiled[0])
    for index, test in enumerate(steps):
        right = value(compiled[index + 1])
        if not test(left, right):
            return False
        left = right
    return True


class _Compiler:
    def __init__(self, text: str) -> None:
        body = text.lstrip()
        prefix = text[: len(text) - len(body)]
        self.body = body
        # Positions are reported in the caller's text, so the stripped leading whitespace is added back.
        self.line_shift = prefix.count("\n")
        self.col_shift = len(prefix) - (prefix.rfind("\n") + 1)
        self.lines = re.split(r"\r\n|\r|\n", body)
        self.names: set[str] = set()

    def position(self, line: int | None, byte_col: int | None) -> tuple[int, int]:
        """ast columns are UTF-8 byte offsets; a person counts characters, from 1."""
        line = line or 1
        col = 0
        if byte_col is not None and 0 < line <= len(self.lines):
            col = len(self.lines[line - 1].encode()[:byte_col].decode(errors="ignore"))
        elif byte_col is not None:
            col = byte_col
        if line == 1:
            col += self.col_shift
        return line + self.line_shift, col + 1

    def error(self, message: str, node: ast.AST) -> ExprError:
        line, column = self.position(getattr(node, "lineno", None), getattr(node, "col_offset", None))
        return ExprError(message, column, line)

    def error_at_attr(self, message: str, node: ast.Attribute) -> ExprError:
        """Point at the attribute name itself (the `__class__` of `a.__class__`); ast does not record it."""
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None:
            return self.error(message, node)
        line, column = self.position(end_line, end_col - len(node.attr.encode()))
        return ExprError(message, column, line)

    # Each method returns either a `_Literal` (known now) or an evaluator closure (known when a call arrives).

    def compile(self, node: ast.AST, depth: int, boolean: bool) -> _Literal | _Eval:
        if depth > MAX_DEPTH:
            raise self.error(f"expression nested too deeply (more than {MAX_DEPTH} levels)", node)
        if isinstance(node, ast.BoolOp):
            return self.bool_op(node, depth)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, depth, boolean)
        if isinstance(node, ast.Compare):
            return self.compare(node, depth)
        if isinstance(node, ast.Name | ast.Attribute):
            return self.lookup(node)
        if isinstance(node, ast.Constant):
            return self.constant(node, boolean)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "matches":
            return matches(self, node, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in HELPERS:
            return self.helper(node, depth, boolean)
        if type(node) in COLLECTION:
            raise self.error(f"a {COLLECTION[type(node)]} literal is only allowed in a comparison", node)
        raise self.error(f"unsupported expression: {self.construct(node)}", node)

    def construct(self, node: ast.AST) -> str:
        if isinstance(node, ast.BinOp):
            return f"arithmetic operator {BINOP.get(type(node.op), type(node.op).__name__)}"
        return REJECTED.get(type(node), type(node).__name__)

    def check_boolean(self, result: _Literal | _Eval, node: ast.AST) -> None:
        if isinstance(result, _Literal) and not isinstance(result.value, bool):
            raise self.error(f"expected a condition, found {show(result.value)}", node)

    def bool_op(self, node: ast.BoolOp, depth: int) -> _Literal | _Eval:
        is_and = isinstance(node.op, ast.And)
        parts: list[tuple[_Literal | _Eval, str]] = []
        for value in node.values:
            part = self.compile(value, depth + 1, boolean=True)
            self.check_boolean(part, value)
            parts.append((part, self.source(value)))

        def evaluate(args: Mapping[str, Any]) -> bool:
            for part, what in parts:
                value = part.value if isinstance(part, _Literal) else part(args)
                if truth(value, what) != is_and:
                    return not is_and
            return is_and

        return evaluate

    def unary(self, node: ast.UnaryOp, depth: int, boolean: bool) -> _Literal | _Eval:
        if isinstance(node.op, ast.Invert):
            raise self.error("unsupported expression: bitwise operator ~", node)
        operand = self.compile(node.operand, depth + 1, boolean=isinstance(node.op, ast.Not))
        if isinstance(node.op, ast.Not):
            self.check_boolean(operand, node.operand)
            what = self.source(node.operand)
            if isinstance(operand, _Literal):
                return _Literal(not operand.value)
            inner = operand
            return lambda args: not truth(inner(args), what)
        symbol = "-" if isinstance(node.op, ast.USub) else "+"
        negate = symbol == "-"
        if isinstance(operand, _Literal):
            if kind_of(operand.value) != "number":
                raise self.error(f"unary {symbol} needs a number, not {show(operand.value)}", node)
            result = _Literal(-operand.value if negate else operand.value)
            if boolean:
                self.check_boolean(result, node)
            return result
        inner_number = operand
        what = self.source(node.operand)

        def evaluate(args: Mapping[str, Any]) -> Any:
            value = inner_number(args)
            if kind_of(value) != "number":
                raise EvalError(f"unary {symbol} needs a number, but {what} is {show(value)}")
            return -value if negate else value

        return evaluate

    def compare(self, node: ast.Compare, depth: int) -> _Literal | _Eval:
        operands = [node.left, *node.comparators]
        compiled = [self.operand(operand, depth + 1) for operand in operands]
        steps: list[Callable[[Any, Any], bool]] = []
        for index, op in enumerate(node.ops):
            if type(op) not in COMPARE:
                symbol = "is not" if isinstance(op, ast.IsNot) else "is"
                raise self.error(f"unsupported expression: operator '{symbol}' (use == or !=)", node)
            left, right = operands[index], operands[index + 1]
            for side, is_right in ((left, False), (right, True)):
                kind = COLLECTION.get(type(side))
                if kind is None:
                    continue
                membership_rhs = isinstance(op, MEMBERSHIP) and is_right
                if isinstance(op, ORDERING):
                    raise self.error(f"cannot order a {kind} literal", side)
                if kind == "set" and not membership_rhs:
                    raise self.error("a set literal is only allowed after in / not in", side)
            if isinstance(op, MEMBERSHIP):
                rhs = compiled[index + 1]
                if isinstance(rhs, _Literal) and kind_of(rhs.value) not in ("array", "string"):
                    raise self.error(
                        f"'in' needs a list or a string on the right, not {show(rhs.value)}", right
                    )
            steps.append(COMPARE[type(op)])
        if all(isinstance(part, _Literal) for part in compiled):
            # Constant comparisons are folded so a fault like `"a" < 1` is reported now, with its column.
            try:
                return _Literal(_run_chain(steps, compiled, {}))
            except EvalError as exc:
                raise self.error(str(exc), node) from None

        def evaluate(args: Mapping[str, Any]) -> bool:
            return _run_chain(steps, compiled, args)

        return evaluate

    def operand(self, node: ast.AST, depth: int) -> _Literal | _Eval:
        kind = COLLECTION.get(type(node))
        if kind is None:
            return self.compile(node, depth, boolean=False)
        assert isinstance(node, ast.List | ast.Tuple | ast.Set)
        items: list[Any] = []
        for element in node.elts:
            if type(element) in COLLECTION:
                raise self.error(
                    f"a {kind} literal may only hold strings, numbers, booleans and None", element
                )
            item = self.compile(element, depth + 1, boolean=False)
            if not isinstance(item, _Literal):
                raise self.error(
                    f"a {kind} literal may only hold constants, not {self.source(element)}", element
                )
            items.append(item.value)
        return _Literal(tuple(items))

    def helper(self, node: ast.Call, depth: int, boolean: bool) -> _Literal | _Eval:
        assert isinstance(node.func, ast.Name)
        name = node.func.id
        if boolean:
            raise self.error(f"expected a condition, found {name}(…), a string", node)
        if node.keywords or len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
            raise self.error(f"{name}() takes one string", node)
        function = HELPERS[name]
        argument = self.compile(node.args[0], depth + 1, boolean=False)
        what = self.source(node.args[0])
        if isinstance(argument, _Literal):
            if not isinstance(argument.value, str):
                raise self.error(f"{name}() takes a string, not {show(argument.value)}", node)
            return _Literal(function(argument.value))
        inner = argument

        def evaluate(args: Mapping[str, Any]) -> str:
            value = inner(args)
            if not isinstance(value, str):
                raise EvalError(f"{name}() takes a string, but {what} is {show(value)}")
            return function(value)

        return evaluate

    def constant(self, node: ast.Constant, boolean: bool) -> _Literal:
        value = node.value
        if value is not None and not isinstance(value, bool | int | float | str):
            name = {bytes: "bytes literal", complex: "complex number"}.get(type(value), repr(value))
            raise self.error(f"unsupported expression: {name}", node)
        result = _Literal(value)
        if boolean:
            self.check_boolean(result, node)
        return result

    def lookup(self, node: ast.Name | ast.Attribute) -> _Eval:
        parts: list[str] = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute):
            if current.attr.startswith("_"):
                message = f"unsupported expression: name {current.attr!r} starts with an underscore"
                raise self.error_at_attr(message, current)
            parts.append(current.attr)
            current = current.value
        if not isinstance(current, ast.Name):
            raise self.error(
                f"unsupported expression: attribute access on {self.construct_or_literal(current)}", current
            )
        if current.id.startswith("_"):
            message = f"unsupported expression: name {current.id!r} starts with an underscore"
            raise self.error(message, current)
        parts.append(current.id)
        parts.reverse()
        self.names.add(parts[0])
        dotted = ".".join(parts)

        def evaluate(args: Mapping[str, Any]) -> Any:
            value: Any = args
            for index, part in enumerate(parts):
                if not isinstance(value, Mapping):
                    raise EvalError(f"{'.'.join(parts[:index])} is {show(value)}, not an object ({dotted})")
                value = value.get(part, _MISSING)
                if value is _MISSING:
                    raise EvalError(f"{'.'.join(parts[: index + 1])} is missing")
            return value

        return evaluate

    def construct_or_literal(self, node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            return "a literal"
        if type(node) in COLLECTION:
            return f"a {COLLECTION[type(node)]} literal"
        if isinstance(node, ast.Compare | ast.BoolOp | ast.UnaryOp):
            return "an expression"
        return f"a {self.construct(node)}"

    def source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.body, node) or type(node).__name__


class Condition:
    """A compiled condition. Immutable, and safe to share between threads and policies.

    Only `compile_condition` makes one, so holding a `Condition` means its text passed the whitelist.
    `names` are the top-level argument names it reads (`user` for `user.country`), for tools and messages.
    """

    __slots__ = ("_evaluate", "names", "source")

    source: str
    names: frozenset[str]
    _evaluate: _Eval

    def __init__(self, source: str, names: frozenset[str], evaluate: _Eval) -> None:
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "_evaluate", evaluate)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Condition is immutable (cannot set {name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Condition is immutable (cannot delete {name})")

    def __call__(self, args: Mapping[str, Any]) -> bool:
        if not isinstance(args, Mapping):
            raise EvalError(f"arguments must be an object, not {type(args).__name__}")
        try:
            result = self._evaluate(args)
        except RecursionError:
            raise EvalError("arguments are nested too deeply to compare") from None
        return truth(result, self.source.strip())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and other.source == self.source

    def __hash__(self) -> int:
        return hash(("Condition", self.source))

    def __repr__(self) -> str:
        return f"Condition({self.source!r})"

    def __str__(self) -> str:
        return self.source


def compile_condition(text: str) -> Condition:
    """Check `text` against the whitelist and compile it; `ExprError` names the construct and the column."""
    if not isinstance(text, str):
        raise ExprError(f"a condition must be a string, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExprError(f"condition is too long ({len(text)} characters, at most {MAX_LENGTH})")
    compiler = _Compiler(text)
    if not compiler.body:
        raise ExprError("empty condition", 1)
    try:
        with warnings.catch_warnings():
            # Invalid escapes like "\d" only warn; the condition is judged by the whitelist, not by warnings.
            warnings.simplefilter("ignore")
            tree = ast.parse(compiler.body, mode="eval")
    except SyntaxError as exc:
        line, column = compiler.position(exc.lineno, None)
        if exc.offset:
            column = exc.offset + (compiler.col_shift if (exc.lineno or 1) == 1 else 0)
        else:  # no offset: the text ended where more was expected (`amount >`), so point just past it
            tail = re.split(r"\r\n|\r|\n", compiler.body.rstrip())
            line, column = compiler.position(len(tail), len(tail[-1].encode()))
        raise ExprError(f"syntax error: {exc.msg}", column, line) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ExprError(f"cannot parse condition: {type(exc).__name__}", 1) from None
    try:
        result = compiler.compile(tree.body, 0, boolean=True)
    except RecursionError:
        raise ExprError(f"expression nested too deeply (more than {MAX_DEPTH} levels)", 1) from None
    if isinstance(result, _Literal):
        constant = result.value
        evaluate: _Eval = lambda args: constant  # noqa: E731
    else:
        evaluate = result
    return Condition(text, frozenset(compiler.names), evaluate)
