"""The policy: rule order, secure defaults, modes, descriptions, and loading errors a person can act on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signoff.core.call import ToolCall
from signoff.core.errors import PolicyError
from signoff.core.expr import Condition, ExprError, compile_condition
from signoff.core.policy import (
    Policy,
    Rule,
    Ruling,
    describe_call,
    parse_duration,
    render_description,
    rule,
)

PAYMENT: dict[str, Any] = {"amount": 50, "currency": "USD", "recipient": "Hanako"}

EXAMPLE = """
mode = "interactive"

[[tools.process_payment]]
action = "ask"
when = "amount > 100"
deadline = "30s"
on_timeout = "deny"
description = "Pay {amount} {currency} to {recipient}"

[[tools.process_payment]]
action = "allow"

[[tools.get_weather]]
action = "allow"
"""


def call(tool: str = "process_payment", **args: Any) -> ToolCall:
    return ToolCall("call-1", tool, args)


# --- rules and rule() --------------------------------------------------------------------------------------


def test_rule_compiles_a_condition_string_and_parses_the_deadline() -> None:
    built = rule("ask", "amount > 100", deadline="250ms", on_timeout="allow", on_abandon="cancel")
    assert isinstance(built.when, Condition)
    assert built.when.source == "amount > 100"
    assert built.deadline == 0.25
    assert (built.on_timeout, built.on_abandon) == ("allow", "cancel")


def test_rule_defaults_are_the_safe_ones() -> None:
    built = rule("ask")
    assert built.when is None
    assert built.deadline is None
    assert built.on_timeout == "deny"
    assert built.on_abandon == "keep"
    assert built.description is None


def test_rule_keeps_a_condition_or_a_callable_as_given() -> None:
    condition = compile_condition("x == 1")

    def is_big(args: Mapping[str, Any]) -> bool:
        return bool(args["amount"] > 1000)

    assert rule("deny", condition).when is condition
    assert rule("deny", is_big).when is is_big


def test_rule_with_a_bad_condition_raises_expr_error() -> None:
    with pytest.raises(ExprError, match=r"^when: unsupported expression: function call at column 5$") as info:
        rule("ask", "x > f()")
    assert info.value.column == 5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"action": "maybe"}, "action: must be one of allow, ask, deny, not 'maybe'"),
        ({"action": "ask", "on_timeout": "retry"}, "on_timeout: must be one of deny, allow, not 'retry'"),
        ({"action": "ask", "on_abandon": "drop"}, "on_abandon: must be one of keep, cancel, not 'drop'"),
        ({"action": "ask", "deadline": 0}, "deadline: must be more than 0 seconds"),
        ({"action": "ask", "deadline": -1.0}, "deadline: must be more than 0 seconds"),
        ({"action": "ask", "deadline": "soon"}, "deadline: must be a number of seconds or a duration"),
        ({"action": "ask", "when": 5}, "when: must be a condition string or a callable, not int"),
        ({"action": "ask", "description": 5}, "description: must be a string, not int"),
    ],
)
def test_rule_rejects_bad_values(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(PolicyError, match=match):
        rule(**kwargs)


def test_rule_struct_validates_direct_construction() -> None:
    assert Rule(action="ask", deadline=30).deadline == 30.0
    assert isinstance(Rule(action="ask", deadline=30).deadline, float)
    with pytest.raises(PolicyError, match="action: must be one of"):
        Rule(action="later")  # type: ignore[arg-type]
    # A string condition must be compiled first (rule() does that); Rule never evaluates raw text.
    with pytest.raises(PolicyError, match="when: must be a Condition"):
        Rule(action="ask", when="amount > 1")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="deadline: must be a number of seconds or None"):
        Rule(action="ask", deadline="30s")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="deadline: must be a number of seconds or None"):
        Rule(action="ask", deadline=True)
    with pytest.raises(PolicyError, match="deadline: must be more than 0 seconds"):
        Rule(action="ask", deadline=0.0)


def test_rule_is_frozen() -> None:
    built = rule("allow")
    with pytest.raises(AttributeError):
        built.action = "deny"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("250ms", 0.25),
        (30, 30.0),
        (1.5, 1.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        (" 30s ", 30.0),
        ("2 m", 120.0),
    ],
)
def test_parse_duration(value: float | str, seconds: float) -> None:
    result = parse_duration(value)
    assert result == seconds
    assert isinstance(result, float)


@pytest.mark.parametrize(
    "value",
    [
        "30",
        "",
        "0s",
        "0ms",
        "-5s",
        "5 minutes",
        "5d",
        "inf",
        "1e3s",
        0,
        -1,
        float("inf"),
        float("nan"),
        True,
        10**400,
        "9" * 400 + "s",
    ],
)
def test_parse_duration_rejects(value: Any) -> None:
    with pytest.raises(PolicyError, match=r"^duration: must be"):
        parse_duration(value)


# --- evaluation --------------------------------------------------------------------------------------------


def payment_policy(mode: Any = "interactive") -> Policy:
    return Policy(
        {
            "process_payment": [
                rule("deny", "amount > 10000"),
                rule(
                    "ask",
                    "amount > 100",
                    deadline="30s",
                    description="Pay {amount} {currency} to {recipient}",
                ),
                rule("allow"),
            ],
            "get_weather": [rule("allow")],
            "delete_account": [rule("deny")],
        },
        mode=mode,
    )


@pytest.mark.parametrize(
    ("amount", "action", "label"),
    [
        (20000, "deny", "process_payment[0]"),
        (10000, "ask", "process_payment[1]"),
        (101, "ask", "process_payment[1]"),
        (100, "allow", "process_payment[2]"),
        (-5, "allow", "process_payment[2]"),
    ],
)
def test_rules_are_tried_in_order_and_the_first_match_wins(amount: int, action: str, label: str) -> None:
    ruling = payment_policy().evaluate(call(amount=amount, currency="USD", recipient="Hanako"))
    assert (ruling.action, ruling.rule) == (action, label)


def test_order_matters_not_specificity() -> None:
    # An unconditional allow listed first shadows the deny after it: order, not specificity, decides.
    policy = Policy({"t": [rule("allow"), rule("deny", "x > 1")]})
    assert policy.evaluate(call("t", x=5)).action == "allow"
    reversed_policy = Policy({"t": [rule("deny", "x > 1"), rule("allow")]})
    assert reversed_policy.evaluate(call("t", x=5)).action == "deny"


def test_matched_rule_reason_names_the_rule_and_condition() -> None:
    policy = payment_policy()
    assert policy.evaluate(call(amount=500)).reason == "rule process_payment[1] (amount > 100)"
    assert policy.evaluate(call(amount=5)).reason == "rule process_payment[2]"


def test_matched_rule_carries_its_deadline_and_timeout() -> None:
    policy = Policy({"t": [rule("ask", deadline="5m", on_timeout="allow", on_abandon="cancel")]})
    ruling = policy.evaluate(call("t"))
    assert (ruling.deadline, ruling.on_timeout, ruling.on_abandon) == (300.0, "allow", "cancel")


def test_unknown_tool_asks_by_default() -> None:
    ruling = payment_policy().evaluate(call("send_email", to="a@example.com"))
    assert ruling.action == "ask"
    assert ruling.rule == "default"
    assert ruling.reason == "send_email is not in the policy"
    assert ruling.deadline is None
    assert ruling.on_timeout == "deny"
    assert ruling.on_abandon == "keep"


def test_empty_policy_asks_for_everything() -> None:
    assert Policy().evaluate(call("anything")).action == "ask"
    assert Policy(None).evaluate(call("get_weather")).rule == "default"


def test_listed_tool_with_no_matching_rule_asks() -> None:
    policy = Policy({"t": [rule("allow", "x < 10"), rule("deny", "x > 100")]})
    ruling = policy.evaluate(call("t", x=50))
    assert (ruling.action, ruling.rule) == ("ask", "default")
    assert ruling.reason == "no rule of t matched"


def test_listed_tool_with_no_rules_asks() -> None:
    ruling = Policy({"t": []}).evaluate(call("t"))
    assert (ruling.action, ruling.rule, ruling.reason) == ("ask", "default", "no rule of t matched")


def test_failed_condition_asks_and_does_not_fall_through() -> None:
    # The deny rule cannot decide; falling through to the allow rule would run a call that might be refused.
    policy = Policy({"t": [rule("deny", "amount > 100", deadline=10), rule("allow")]})
    ruling = policy.evaluate(call("t", amount="lots"))
    assert ruling.action == "ask"
    assert ruling.rule == "t[0]"
    assert ruling.reason == "condition of t[0] failed: cannot compare string 'lots' > number 100"
    assert ruling.deadline == 10.0


def test_missing_argument_asks_with_the_name() -> None:
    ruling = payment_policy().evaluate(call(currency="USD"))
    assert ruling.action == "ask"
    assert ruling.rule == "process_payment[0]"
    assert ruling.reason == "condition of process_payment[0] failed: amount is missing"


def test_raising_python_predicate_asks() -> None:
    def broken(args: Mapping[str, Any]) -> bool:
        raise KeyError("amount")

    ruling = Policy({"t": [rule("deny", broken), rule("allow")]}).evaluate(call("t"))
    assert (ruling.action, ruling.rule) == ("ask", "t[0]")
    assert ruling.reason == "condition of t[0] failed: KeyError: 'amount'"


def test_python_predicate_must_return_a_bool() -> None:
    ruling = Policy({"t": [rule("deny", lambda args: 1), rule("allow")]}).evaluate(call("t"))  # type: ignore[arg-type,return-value]
    assert (ruling.action, ruling.rule) == ("ask", "t[0]")
    assert "returned int, not a bool" in ruling.reason


def test_python_predicate_sees_the_arguments() -> None:
    seen: list[Mapping[str, Any]] = []

    def big(args: Mapping[str, Any]) -> bool:
        seen.append(args)
        return bool(args["amount"] > 100)

    policy = Policy({"t": [rule("ask", big), rule("allow")]})
    assert policy.evaluate(call("t", amount=500)).action == "ask"
    assert policy.evaluate(call("t", amount=5)).action == "allow"
    assert seen == [{"amount": 500}, {"amount": 5}]
    assert policy.evaluate(call("t", amount=500)).reason == f"rule t[0] ({big.__qualname__})"


# --- modes -------------------------------------------------------------------------------------------------


def test_interactive_mode_is_the_default() -> None:
    assert Policy().mode == "interactive"


def test_approve_all_turns_ask_into_allow() -> None:
    policy = payment_policy("approve_all")
    ruling = policy.evaluate(call(amount=500))
    assert (ruling.action, ruling.rule) == ("allow", "mode:approve_all")
    assert ruling.reason.startswith("approve_all mode: process_payment")
    unknown = policy.evaluate(call("send_email"))
    assert (unknown.action, unknown.rule) == ("allow", "mode:approve_all")


def test_strict_turns_ask_into_deny() -> None:
    policy = payment_policy("strict")
    ruling = policy.evaluate(call(amount=500))
    assert (ruling.action, ruling.rule) == ("deny", "mode:strict")
    assert ruling.reason.startswith("strict mode: process_payment requires approval")
    unknown = policy.evaluate(call("send_email"))
    assert (unknown.action, unknown.rule) == ("deny", "mode:strict")
    assert unknown.reason.startswith("strict mode: send_email requires approval")


@pytest.mark.parametrize("mode", ["interactive", "approve_all", "strict"])
def test_modes_never_change_explicit_allow_or_deny(mode: Any) -> None:
    policy = payment_policy(mode)
    denied = policy.evaluate(call(amount=20000))
    allowed = policy.evaluate(call(amount=5))
    assert (denied.action, denied.rule) == ("deny", "process_payment[0]")
    assert (allowed.action, allowed.rule) == ("allow", "process_payment[2]")
    assert policy.evaluate(call("delete_account")).action == "deny"
    assert policy.evaluate(call("get_weather", city="Tokyo")).action == "allow"


def test_approve_all_denies_a_failed_condition() -> None:
    # The failed condition might have been a deny, and approve_all asks nobody: refuse, never silently allow.
    ruling = payment_policy("approve_all").evaluate(call(amount="lots"))
    assert (ruling.action, ruling.rule) == ("deny", "mode:approve_all")
    assert "condition of process_payment[0] failed" in ruling.reason


def test_strict_denies_a_failed_condition() -> None:
    ruling = payment_policy("strict").evaluate(call(amount="lots"))
    assert (ruling.action, ruling.rule) == ("deny", "mode:strict")


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(
        PolicyError, match="mode: must be one of interactive, approve_all, strict, not 'auto'"
    ):
        Policy(mode="auto")  # type: ignore[arg-type]


def test_constructor_rejects_non_rules() -> None:
    with pytest.raises(PolicyError, match=r"t\[1\]: must be a Rule, not dict"):
        Policy({"t": [rule("allow"), {"action": "allow"}]})  # type: ignore[list-item]
    with pytest.raises(PolicyError, match="t: rules must be a sequence of Rule, not Rule"):
        Policy({"t": rule("allow")})  # type: ignore[dict-item]
    with pytest.raises(PolicyError, match="tool names must be non-empty strings"):
        Policy({"": [rule("allow")]})


def test_policy_does_not_share_the_callers_lists() -> None:
    rules = [rule("allow")]
    policy = Policy({"t": rules})
    rules.insert(0, rule("deny"))
    assert policy.evaluate(call("t")).action == "allow"
    with pytest.raises(TypeError):
        policy.rules["u"] = ()  # type: ignore[index]


# --- descriptions ------------------------------------------------------------------------------------------


def test_default_description_is_a_call_in_argument_order() -> None:
    ruling = Policy().evaluate(call(**PAYMENT))
    assert ruling.description == "process_payment(amount=50, currency='USD', recipient='Hanako')"
    reordered = ToolCall("c", "t", {"b": 1, "a": [1, None, True]})
    assert describe_call(reordered) == "t(b=1, a=[1, None, True])"
    assert describe_call(ToolCall("c", "get_location")) == "get_location()"


def test_template_description_is_rendered() -> None:
    ruling = payment_policy().evaluate(call(amount=500, currency="USD", recipient="Hanako"))
    assert ruling.description == "Pay 500 USD to Hanako"


def test_matched_rule_without_template_uses_the_default_description() -> None:
    ruling = payment_policy().evaluate(call(amount=5, currency="USD"))
    assert ruling.description == "process_payment(amount=5, currency='USD')"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Ship to {user.address.city}", "Ship to Kyoto"),
        ("{user.name} pays {amount}", "Hanako pays 12.5"),
        ("{missing} and {user.nope} and {amount.value}", "{missing} and {user.nope} and {amount.value}"),
        ("{amount.__class__}", "{amount.__class__}"),
        ("{user.__class__.__init__.__globals__}", "{user.__class__.__init__.__globals__}"),
        ("{0} {} {amount!r} {amount:>10} {user[name]}", "{0} {} {amount!r} {amount:>10} {user[name]}"),
        ("flags {urgent} {note} {tags}", 'flags true null ["a","b"]'),
        ("{{amount}}", "{12.5}"),
        ("no placeholders", "no placeholders"),
    ],
)
def test_render_description(template: str, expected: str) -> None:
    args = {
        "amount": 12.5,
        "user": {"name": "Hanako", "address": {"city": "Kyoto"}},
        "urgent": True,
        "note": None,
        "tags": ["a", "b"],
    }
    assert render_description(template, args) == expected


def test_render_description_never_reaches_python_attributes() -> None:
    rendered = render_description("{amount.__class__} {amount.real} {recipient.upper}", PAYMENT)
    assert "class" not in rendered.replace("{amount.__class__}", "")
    assert "int" not in rendered
    assert "method" not in rendered
    assert rendered == "{amount.__class__} {amount.real} {recipient.upper}"


def test_render_description_shows_control_characters_escaped() -> None:
    # A newline in an argument must not forge a second line of the approval prompt.
    rendered = render_description("Pay {recipient}", {"recipient": "Eve\nApproved by admin"})
    assert "\n" not in rendered
    assert rendered == 'Pay "Eve\\nApproved by admin"'


# --- loading -----------------------------------------------------------------------------------------------


def test_from_toml_example() -> None:
    policy = Policy.from_toml(EXAMPLE, "policy.toml")
    assert policy.mode == "interactive"
    big = policy.evaluate(call(amount=500, currency="USD", recipient="Hanako"))
    assert big == Ruling(
        action="ask",
        rule="process_payment[0]",
        reason="rule process_payment[0] (amount > 100)",
        description="Pay 500 USD to Hanako",
        deadline=30.0,
        on_timeout="deny",
        on_abandon="keep",
    )
    assert policy.evaluate(call(**PAYMENT)).action == "allow"
    assert policy.evaluate(call("get_weather", city="Tokyo")).action == "allow"
    assert policy.evaluate(call("get_location")).rule == "default"


def test_from_toml_reads_every_rule_field() -> None:
    text = """
mode = "strict"
[[tools.t]]
action = "ask"
deadline = 1.5
on_timeout = "allow"
on_abandon = "cancel"
description = "do {x}"
"""
    policy = Policy.from_toml(text)
    assert policy.mode == "strict"
    (loaded,) = policy.rules["t"]
    assert loaded == Rule(
        action="ask", deadline=1.5, on_timeout="allow", on_abandon="cancel", description="do {x}"
    )


def test_from_toml_empty_text_is_an_empty_policy() -> None:
    policy = Policy.from_toml("")
    assert policy.mode == "interactive"
    assert policy.evaluate(call("anything")).action == "ask"


def test_from_dict_takes_the_toml_shape_and_callables() -> None:
    data = msgspec.json.decode(
        b'{"mode": "approve_all", "tools": {"t": [{"action": "deny", "when": "x > 1", "deadline": 30}]}}'
    )
    policy = Policy.from_dict(data)
    assert policy.mode == "approve_all"
    assert policy.rules["t"][0].deadline == 30.0
    assert policy.evaluate(call("t", x=2)).action == "deny"

    def over(args: Mapping[str, Any]) -> bool:
        return bool(args["x"] > 1)

    with_callable = Policy.from_dict(
        {"tools": {"t": [{"action": "deny", "when": over}, {"action": "allow"}]}}
    )
    assert with_callable.evaluate(call("t", x=2)).action == "deny"
    assert with_callable.evaluate(call("t", x=0)).action == "allow"
    assert Policy.from_dict({"tools": {"t": ({"action": "allow"},)}}).evaluate(call("t")).action == "allow"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[tools.process_payment]]\naction = "ask"\nwhen = "f(amount)"',
            "policy.toml: tools.process_payment[0].when: unsupported expression: function call at column 1",
        ),
        (
            '[[tools.process_payment]]\naction = "ask"\n[[tools.process_payment]]\naction = "maybe"',
            "policy.toml: tools.process_payment[1].action: must be one of allow, ask, deny, not 'maybe'",
        ),
        (
            "[[tools.x]]\naction = 5",
            "policy.toml: tools.x[0].action: must be one of allow, ask, deny, not 5",
        ),
        (
            '[[tools.x]]\naction = "ask"\ndedline = "30s"',
            "policy.toml: tools.x[0].dedline: unknown key",
        ),
        ('mode = "auto"', "policy.toml: mode: must be one of interactive, approve_all, strict, not 'auto'"),
        ("mode = 1", "policy.toml: mode: must be one of interactive, approve_all, strict, not 1"),
        ('modes = "strict"', "policy.toml: modes: unknown key"),
        ('[[tools.x]]\nwhen = "a > 1"', "policy.toml: tools.x[0].action: is required"),
        (
            '[[tools.x]]\naction = "ask"\ndeadline = 0',
            "policy.toml: tools.x[0].deadline: must be more than 0",
        ),
        (
            '[[tools.x]]\naction = "ask"\ndeadline = -3',
            "policy.toml: tools.x[0].deadline: must be more than 0",
        ),
        (
            '[[tools.x]]\naction = "ask"\ndeadline = "30"',
            "policy.toml: tools.x[0].deadline: must be a number of seconds or a duration",
        ),
        (
            '[[tools.x]]\naction = "ask"\ndeadline = "thirty seconds"',
            "policy.toml: tools.x[0].deadline: must be a number of seconds or a duration",
        ),
        (
            '[[tools.x]]\naction = "ask"\ndeadline = true',
            "policy.toml: tools.x[0].deadline: must be a number of seconds or a duration",
        ),
        (
            '[[tools.x]]\naction = "ask"\nwhen = 5',
            "policy.toml: tools.x[0].when: must be a condition string, not int",
        ),
        (
            '[[tools.x]]\naction = "ask"\non_timeout = "retry"',
            "policy.toml: tools.x[0].on_timeout: must be one of deny, allow, not 'retry'",
        ),
        (
            '[[tools.x]]\naction = "ask"\non_abandon = "drop"',
            "policy.toml: tools.x[0].on_abandon: must be one of keep, cancel, not 'drop'",
        ),
        (
            '[[tools.x]]\naction = "ask"\ndescription = ["a"]',
            "policy.toml: tools.x[0].description: must be a string, not list",
        ),
        ('[tools.x]\naction = "ask"', "policy.toml: tools.x: must be a list of tables ([[tools.x]])"),
        ("[tools]\nx = 5", "policy.toml: tools.x: must be a list of tables ([[tools.x]]), not int"),
        ("[tools]\nx = [1, 2]", "policy.toml: tools.x[0]: must be a table, not int"),
        ('tools = "all"', "policy.toml: tools: must be a table of tools, not str"),
    ],
)
def test_from_toml_errors_name_the_source_and_key_path(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "policy.toml")
    assert str(info.value).startswith(message)


def test_from_toml_condition_error_is_reported_with_column() -> None:
    text = '[[tools.t]]\naction = "deny"\nwhen = "amount > 100 and user.__class__ == 1"'
    with pytest.raises(
        ExprError, match=r"^p\.toml: tools\.t\[0\]\.when: .*'__class__'.* at column 23$"
    ) as info:
        Policy.from_toml(text, "p.toml")
    assert info.value.column == 23


def test_from_toml_syntax_error_names_the_source_and_line() -> None:
    text = 'mode = "strict"\n\n[[tools.t]]\naction "ask"\n'
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "policy.toml")
    message = str(info.value)
    assert message.startswith("policy.toml: invalid TOML: ")
    assert "line 4" in message


def test_from_toml_uses_a_default_source_name() -> None:
    with pytest.raises(PolicyError, match=r"^<string>: mode: "):
        Policy.from_toml('mode = "x"')
    with pytest.raises(PolicyError, match=r"^<dict>: mode: "):
        Policy.from_dict({"mode": "x"})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "<dict>: a policy must be a table, not list"),
        (
            {"tools": {"t": [{"action": "ask", "when": 5}]}},
            "tools.t[0].when: must be a condition string or a callable",
        ),
        ({"tools": {"t": ["allow"]}}, "<dict>: tools.t[0]: must be a table, not str"),
        ({"tools": {"t": "allow"}}, "<dict>: tools.t: must be a list of tables"),
        ({"tools": {5: [{"action": "allow"}]}}, "<dict>: tools.5: a tool name must be a non-empty string"),
    ],
)
def test_from_dict_errors(data: Any, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data)
    assert message in str(info.value)


# --- properties --------------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200)
@given(
    st.dictionaries(st.sampled_from(["amount", "currency", "user", "urgent"]), _JSON),
    st.sampled_from(["interactive", "approve_all", "strict"]),
)
def test_evaluate_always_returns_a_ruling(args: dict[str, Any], mode: Any) -> None:
    policy = Policy(
        {
            "t": [
                rule("deny", 'user.country == "JP" and not urgent'),
                rule("ask", "amount > 100 or currency in ['EUR']", description="{amount} {user.name}"),
                rule("allow", "amount <= 100"),
            ]
        },
        mode=mode,
    )
    ruling = policy.evaluate(ToolCall("c", "t", args))
    assert ruling.action in ("allow", "ask", "deny")
    assert ruling.rule in ("t[0]", "t[1]", "t[2]", "default", "mode:approve_all", "mode:strict")
    if mode != "interactive":
        assert ruling.action != "ask"
    assert isinstance(ruling.description, str)


DENY_LIST = """
[[tools.process_payment]]
action = "deny"
when = 'normal(recipient) in ["mallory", "eve"]'

[[tools.process_payment]]
action = "allow"
"""


@pytest.mark.parametrize("recipient", ["mallory", "Mallory ", "\uff2dallory", "Mallory\u200b", "EVE"])
def test_a_normalized_deny_list_catches_look_alikes(recipient: str) -> None:
    call = ToolCall("c", "process_payment", {"recipient": recipient})
    assert Policy.from_toml(DENY_LIST).evaluate(call).action == "deny"


@pytest.mark.parametrize(
    ("when", "args"),
    [
        ('not (role == "admin")', {"role": ["admin"]}),
        ('recipient in ["Mallory", "Eve"]', {"recipient": ["Mallory"]}),
        ("normal(recipient) == 'mallory'", {"recipient": 7}),
    ],
)
def test_a_condition_that_errs_asks_even_before_an_allow(when: str, args: dict[str, object]) -> None:
    """An error in a condition means ask, never allow, and a deny rule's error too: the allow after it is
    never reached."""
    policy = Policy.from_dict({"tools": {"t": [{"action": "deny", "when": when}, {"action": "allow"}]}})
    ruling = policy.evaluate(ToolCall("c", "t", args))
    assert ruling.action == "ask" and "condition of t[0] failed" in ruling.reason
