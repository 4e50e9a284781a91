"""The condition language: what it accepts, what it refuses at load time, and JSON semantics at run time."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signoff.core.errors import PolicyError
from signoff.core.expr import MAX_DEPTH, MAX_LENGTH, Condition, EvalError, ExprError, compile_condition

# --- accepted conditions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ("amount > 100", {"amount": 150}, True),
        ("amount > 100", {"amount": 100}, False),
        ("amount > 100", {"amount": 100.5}, True),
        ('currency == "USD" and amount >= 1000', {"currency": "USD", "amount": 1000}, True),
        ('currency == "USD" and amount >= 1000', {"currency": "EUR", "amount": 5000}, False),
        ('recipient in ["Bob", "Eve"]', {"recipient": "Eve"}, True),
        ('recipient in ["Bob", "Eve"]', {"recipient": "Hanako"}, False),
        ('recipient not in ("Bob", "Eve")', {"recipient": "Hanako"}, True),
        ('recipient in {"Bob", "Eve"}', {"recipient": "Bob"}, True),
        ("not urgent", {"urgent": False}, True),
        ("not urgent", {"urgent": True}, False),
        ("urgent", {"urgent": True}, True),
        ("-5 < delta <= 5", {"delta": 5}, True),
        ("-5 < delta <= 5", {"delta": -5}, False),
        ("-5 < delta <= 5", {"delta": 0}, True),
        ('user.country != "JP"', {"user": {"country": "US"}}, True),
        ('user.country != "JP"', {"user": {"country": "JP"}}, False),
        ("a.b.c == 1", {"a": {"b": {"c": 1}}}, True),
        ("a or b", {"a": False, "b": True}, True),
        ("a and b or c", {"a": True, "b": False, "c": True}, True),
        ("not (a and b)", {"a": True, "b": False}, True),
        ("-x > 1", {"x": -3}, True),
        ("+x == 3", {"x": 3}, True),
        ("x == None", {"x": None}, True),
        ("x != None", {"x": 0}, True),
        ("x == 1.0", {"x": 1}, True),
        ("x == [1, 2]", {"x": [1, 2]}, True),
        ("x == [1, 2]", {"x": [2, 1]}, False),
        ("x == (1, 'a')", {"x": [1, "a"]}, True),
        ('"x" in tags', {"tags": ["x", "y"]}, True),
        ('"ell" in name', {"name": "Hello"}, True),
        ('"k" in obj', {"obj": {"k": 1}}, True),
        ('"v" in obj', {"obj": {"k": "v"}}, False),
        ("x == y", {"x": {"a": [1]}, "y": {"a": [1]}}, True),
        ('name < "b"', {"name": "abc"}, True),
        ("True", {}, True),
        ("False or x > 1", {"x": 2}, True),
        ("1 < 2", {}, True),
        ("amount > 100  # big payments", {"amount": 101}, True),
        ("(amount >\n 100)", {"amount": 101}, True),
    ],
)
def test_accepted(text: str, args: dict[str, Any], expected: bool) -> None:
    assert compile_condition(text)(args) is expected


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("amount > 100", {"amount"}),
        ('user.country != "JP" and user.age > 18', {"user"}),
        ("a < b <= c", {"a", "b", "c"}),
        ("True", set()),
        ("not x or y in [1]", {"x", "y"}),
    ],
)
def test_names_are_the_top_level_arguments_read(text: str, names: set[str]) -> None:
    assert compile_condition(text).names == frozenset(names)


def test_names_are_argument_names_not_builtins() -> None:
    # `len` and `open` are looked up in the arguments; nothing from Python's namespace is reachable.
    assert compile_condition("len == 3")({"len": 3}) is True
    with pytest.raises(EvalError, match="open is missing"):
        compile_condition("open == 1")({})


def test_condition_is_immutable_and_compares_by_source() -> None:
    condition = compile_condition("amount > 100")
    assert condition.source == "amount > 100"
    assert condition == compile_condition("amount > 100")
    assert condition != compile_condition("amount > 101")
    assert hash(condition) == hash(compile_condition("amount > 100"))
    assert repr(condition) == "Condition('amount > 100')"
    with pytest.raises(AttributeError):
        condition.source = "True"
    with pytest.raises(AttributeError):
        del condition.names
    assert condition({"amount": 101}) is True


# --- refused at compile time -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment", "column"),
    [
        ("f(x)", "function call", 1),
        ("amount > len(x)", "function call", 10),
        ("__import__('os').system('ls')", "function call", 1),
        ("a[0] == 1", "subscript", 1),
        ("a[1:2] == 1", "subscript", 1),
        ("(lambda: True)", "lambda", 2),
        ('"abc".upper == 1', "attribute access on a literal", 1),
        ("f().x == 1", "attribute access on a function call", 1),
        ("(a or b).c", "attribute access on an expression", 2),
        ("[1].x == 1", "attribute access on a list literal", 1),
        ("a + 1 > 2", "arithmetic operator +", 1),
        ("a > 2 ** 8", "arithmetic operator **", 5),
        ("a * b", "arithmetic operator *", 1),
        ("x | y", "arithmetic operator |", 1),
        ("[x for x in y]", "comprehension", 1),
        ("1 in {x for x in y}", "comprehension", 6),
        ("any(x for x in y)", "function call", 1),
        ("x in (y for y in z)", "generator expression", 6),
        ("__import__", "name '__import__' starts with an underscore", 1),
        ("_secret == 1", "name '_secret' starts with an underscore", 1),
        ("amount.__class__ == 1", "name '__class__' starts with an underscore", 8),
        ("user._id == 1", "name '_id' starts with an underscore", 6),
        ("a.b.__dict__.c == 1", "name '__dict__' starts with an underscore", 5),
        ('x == f"{y}"', "f-string", 6),
        ("(x := 1)", "assignment expression", 2),
        ("x == {'a': 1}", "dict literal", 6),
        ("a if b else c", "conditional expression", 1),
        ("x is None", "operator 'is'", 1),
        ("x is not None", "operator 'is not'", 1),
        ("~x == 1", "bitwise operator ~", 1),
        ("x == b'abc'", "bytes literal", 6),
        ("x == 1j", "complex number", 6),
        ("x == ...", "Ellipsis", 6),
        ("await x", "await", 1),
        ("x in [y]", "may only hold constants", 7),
        ("x in [[1]]", "may only hold strings, numbers", 7),
        ("x < [1, 2]", "cannot order a list literal", 5),
        ("x == {1, 2}", "set literal is only allowed after in", 6),
        ("[1, 2]", "list literal is only allowed in a comparison", 1),
        ("100", "expected a condition, found number 100", 1),
        ('"yes"', "expected a condition, found string 'yes'", 1),
        ("a and 1", "expected a condition, found number 1", 7),
        ("not 5", "expected a condition, found number 5", 5),
        ("None", "expected a condition, found null", 1),
        ('"a" < 1', "cannot compare string 'a' < number 1", 1),
        ("True < 2", "cannot compare bool True < number 2", 1),
        ("x in 5", "'in' needs a list or a string", 6),
        ('-"x" == 1', "unary - needs a number", 1),
    ],
)
def test_refused_with_construct_and_column(text: str, fragment: str, column: int) -> None:
    with pytest.raises(ExprError) as info:
        compile_condition(text)
    message = str(info.value)
    assert fragment in message
    assert message.endswith(f"at column {column}")
    assert info.value.column == column


def test_expr_error_is_a_policy_error() -> None:
    # A policy loader catches PolicyError; a bad condition must not slip past it as some other type.
    with pytest.raises(PolicyError):
        compile_condition("f()")


def test_column_counts_characters_from_the_callers_text() -> None:
    # Leading whitespace is stripped before parsing and added back; non-ASCII counts as one column each.
    with pytest.raises(ExprError, match=r"function call at column 4$"):
        compile_condition("   f()")
    with pytest.raises(ExprError, match=r"function call at column 9$"):
        compile_condition('"é€" == f()')


def test_multi_line_condition_reports_the_line() -> None:
    with pytest.raises(ExprError, match=r"function call at line 3, column 2$") as info:
        compile_condition("(\n a >\n f())")
    assert info.value.line == 3


@pytest.mark.parametrize(
    ("text", "column"),
    [("a ~ b", 3), ("a > > 1", 5), ("(a > 1", 1), ("a > 1)", 6), ("  a ~ b", 5)],
)
def test_syntax_errors_name_the_column(text: str, column: int) -> None:
    with pytest.raises(ExprError, match=rf"^syntax error: .* at column {column}$"):
        compile_condition(text)


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_condition_is_refused(text: str) -> None:
    with pytest.raises(ExprError, match="empty condition"):
        compile_condition(text)


def test_statements_are_not_expressions() -> None:
    for text in ["import os", "x = 1", "del x", "a > 1; b > 2"]:
        with pytest.raises(ExprError, match="syntax error"):
            compile_condition(text)


def test_null_byte_and_non_string_are_refused() -> None:
    with pytest.raises(ExprError):
        compile_condition("a\x00 == 1")
    with pytest.raises(ExprError, match="must be a string"):
        compile_condition(42)  # type: ignore[arg-type]


def test_size_and_depth_are_capped() -> None:
    with pytest.raises(ExprError, match="too long"):
        compile_condition("a > 1 and " * (MAX_LENGTH // 10) + "a > 1")
    with pytest.raises(ExprError, match="nested too deeply"):
        compile_condition("not " * (MAX_DEPTH + 5) + "x")
    # Just under the cap still works, and evaluates without recursion trouble.
    assert compile_condition("not " * (MAX_DEPTH - 2) + "x")({"x": True}) is True


# --- run time ----------------------------------------------------------------------------------------------


def test_missing_argument_raises_eval_error() -> None:
    with pytest.raises(EvalError, match=r"^amount is missing$"):
        compile_condition("amount > 100")({})
    with pytest.raises(EvalError, match=r"^user\.country is missing$"):
        compile_condition('user.country == "JP"')({"user": {}})
    with pytest.raises(EvalError, match="user is number 5, not an object"):
        compile_condition('user.country == "JP"')({"user": 5})


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("amount > 100", {"amount": "abc"}),
        ("amount > 100", {"amount": None}),
        ("amount > 100", {"amount": [101]}),
        ("amount > 100", {"amount": {"v": 101}}),
        ('name < "b"', {"name": 1}),
        ("a <= b", {"a": [1], "b": [2]}),
        ("a >= b", {"a": None, "b": None}),
        ("-x > 1", {"x": "3"}),
        ("-x > 1", {"x": True}),
    ],
)
def test_type_mismatch_raises_eval_error_not_type_error(text: str, args: dict[str, Any]) -> None:
    with pytest.raises(EvalError):
        compile_condition(text)(args)


def test_type_mismatch_message_shows_both_sides() -> None:
    with pytest.raises(EvalError, match=r"cannot compare string 'abc' > number 100"):
        compile_condition("amount > 100")({"amount": "abc"})


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("x == 1", {"x": True}),
        ("x == 0", {"x": False}),
        ("x != 1", {"x": True}),
        ("x == True", {"x": 1}),
        ("x in [1, 2]", {"x": True}),
        ("1 in xs", {"xs": [True]}),
        ("x == [1]", {"x": [True]}),
        ("x == y", {"x": {"a": 1}, "y": {"a": True}}),
        ('role == "admin"', {"role": ["admin"]}),
        ('not (role == "admin")', {"role": ["admin"]}),
        ('recipient in ["Mallory", "Eve"]', {"recipient": 7}),
    ],
)
def test_values_of_different_kinds_are_never_compared(text: str, args: dict[str, Any]) -> None:
    """A mismatch read as "not equal" once let `not (role == "admin")` allow: it is an error, which the
    policy answers by asking a person."""
    with pytest.raises(EvalError, match="cannot compare"):
        compile_condition(text)(args)


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ("x == True", {"x": True}, True),
        ("x == 1", {"x": 1.0}, True),
        ("x == None", {"x": 1}, False),
        ("x != None", {"x": "a"}, True),
    ],
)
def test_values_of_one_kind_compare_and_anything_with_null(
    text: str, args: dict[str, Any], expected: bool
) -> None:
    assert compile_condition(text)(args) is expected


@pytest.mark.parametrize(
    "recipient", ["mallory", "Mallory ", "\uff2dallory", "Mallory\u200b", " MALLORY\u2060", "eve"]
)
def test_normal_makes_look_alikes_equal(recipient: str) -> None:
    assert compile_condition('normal(recipient) in ["mallory", "eve"]')({"recipient": recipient}) is True
    assert compile_condition('recipient in ["Mallory", "Eve"]')({"recipient": recipient}) is False


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ("casefold(x) == 'straße'.casefold() or true", {"x": "STRASSE"}, None),
        ("casefold(x) == 'strasse'", {"x": "STRASSE"}, True),
        ("nfkc(x) == 'A1'", {"x": "\uff21\uff11"}, True),
        ("strip(x) == 'a b'", {"x": "  a b\n"}, True),
        ("visible(x) == 'ab'", {"x": "a\u200bb"}, True),
        ("normal(x) == 'a b'", {"x": "A\u00a0\u00a0B"}, True),
    ],
)
def test_string_helpers(text: str, args: dict[str, Any], expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(ExprError):
            compile_condition(text)
        return
    assert compile_condition(text)(args) is expected


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("normal(x)", "expected a condition"),
        ("normal(x, y) == 'a'", "takes one string"),
        ("normal(1) == 'a'", "takes a string"),
        ("upper(x) == 'A'", "function call"),
    ],
)
def test_helpers_are_checked_when_the_policy_loads(text: str, fault: str) -> None:
    with pytest.raises(ExprError, match=fault):
        compile_condition(text)


def test_a_helper_of_a_non_string_is_an_error() -> None:
    with pytest.raises(EvalError, match="normal\\(\\) takes a string, but x is number 3"):
        compile_condition("normal(x) == 'a'")({"x": 3})


@pytest.mark.parametrize(
    ("text", "args"), [("x < 2", {"x": True}), ("x >= 0", {"x": False}), ("1 < x", {"x": True})]
)
def test_ordering_with_a_bool_raises(text: str, args: dict[str, Any]) -> None:
    with pytest.raises(EvalError, match="cannot compare"):
        compile_condition(text)(args)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("urgent", {"urgent": 1}),
        ("urgent", {"urgent": "true"}),
        ("not urgent", {"urgent": "false"}),
        ("not urgent", {"urgent": None}),
        ("a and b", {"a": 1, "b": True}),
        ("a or b", {"a": False, "b": []}),
    ],
)
def test_truth_values_must_be_booleans(text: str, args: dict[str, Any]) -> None:
    with pytest.raises(EvalError, match="not a bool"):
        compile_condition(text)(args)


def test_and_or_short_circuit() -> None:
    # The right side is never looked at, so its absence is not an error.
    assert compile_condition("a or missing > 1")({"a": True}) is True
    assert compile_condition("a and missing > 1")({"a": False}) is False
    with pytest.raises(EvalError, match="missing is missing"):
        compile_condition("a and missing > 1")({"a": True})


class _CountingArgs(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.reads: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.reads.append(key)
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_chained_comparison_reads_the_middle_once_and_stops_early() -> None:
    args = _CountingArgs({"a": 1, "b": 2, "c": 3})
    assert compile_condition("a < b < c")(args) is True
    assert args.reads.count("b") == 1
    stopped = _CountingArgs({"a": 5, "b": 2})
    # `a < b` is false, so `c` is never read, and its absence is not an error.
    assert compile_condition("a < b < c")(stopped) is False
    assert "c" not in stopped.reads


@pytest.mark.parametrize(
    ("text", "args", "match"),
    [
        ("x in name", {"x": 1, "name": "abc"}, "only a string can be in a string"),
        ("x in obj", {"x": 1, "obj": {"1": 2}}, "only a string can be in a object"),
        ("x in n", {"x": 1, "n": 5}, "cannot test membership in number 5"),
        ("x in n", {"x": 1, "n": None}, "cannot test membership in null"),
    ],
)
def test_membership_type_faults(text: str, args: dict[str, Any], match: str) -> None:
    with pytest.raises(EvalError, match=match):
        compile_condition(text)(args)


def test_args_must_be_a_mapping_of_json_values() -> None:
    condition = compile_condition("x == 1")
    with pytest.raises(EvalError, match="must be an object"):
        condition([("x", 1)])  # type: ignore[arg-type]
    with pytest.raises(EvalError, match="not a JSON value"):
        condition({"x": datetime.date(2024, 1, 1)})


def test_deeply_nested_args_do_not_escape_as_recursion_error() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(EvalError, match="nested too deeply"):
        compile_condition("x == y")({"x": deep, "y": deep})


# --- properties --------------------------------------------------------------------------------------------

_TOKENS = [
    "a", "b", "x", "user", ".", "country", "_x", "__class__", "1", "0", "-", "+", "2.5", '"JP"', "'a'",
    "True", "False", "None", "(", ")", "[", "]", "{", "}", ",", ":", "not", "and", "or", "in", "is", "<",
    "<=", ">", ">=", "==", "!=", "*", "**", "~", "lambda", "for", "if", "else", "f", "f'{a}'", ":=", "@",
    "\n", "#", "\\",
]  # fmt: skip

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_ARGS = st.dictionaries(
    st.sampled_from(["a", "b", "x", "user"]),
    _JSON | st.fixed_dictionaries({"country": st.sampled_from(["JP", "US"]) | _JSON}),
)

_NAME = st.sampled_from(["a", "b", "x", "user.country"])
_LITERAL = st.sampled_from(["1", "-2", "2.5", '"JP"', "'a'", "True", "False", "None", "[1, 'a']", "(True,)"])
_OPERAND = _NAME | _LITERAL
_OP = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in"])
_COMPARISON = st.builds(lambda left, op, right: f"{left} {op} {right}", _OPERAND, _OP, _OPERAND)
_CONDITION = st.recursive(
    _COMPARISON | _NAME,
    lambda inner: (
        inner.map(lambda e: f"not ({e})")
        | st.builds(lambda left, right: f"({left}) and ({right})", inner, inner)
        | st.builds(lambda left, right: f"({left}) or ({right})", inner, inner)
    ),
    max_leaves=6,
)


def _compile_or_none(text: str) -> Condition | None:
    try:
        return compile_condition(text)
    except ExprError:
        return None


@settings(max_examples=400)
@given(st.text(max_size=60))
def test_compile_arbitrary_text_returns_condition_or_expr_error(text: str) -> None:
    result = _compile_or_none(text)
    assert result is None or isinstance(result, Condition)


@settings(max_examples=400)
@given(st.lists(st.sampled_from(_TOKENS), max_size=12).map(" ".join))
def test_compile_token_soup_returns_condition_or_expr_error(text: str) -> None:
    result = _compile_or_none(text)
    assert result is None or isinstance(result, Condition)


@settings(max_examples=400)
@given(st.one_of(_CONDITION, st.lists(st.sampled_from(_TOKENS), max_size=10).map(" ".join)), _ARGS)
def test_evaluation_returns_bool_or_raises_eval_error(text: str, args: dict[str, Any]) -> None:
    condition = _compile_or_none(text)
    if condition is None:
        return
    try:
        result = condition(args)
    except EvalError:
        return
    assert isinstance(result, bool)
