"""The call digest: canonical, order-independent, and refusing what JSON cannot say."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.core.call import ToolCall, canonical_json, digest
from signoff.core.errors import InvalidCall

json_scalars = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=8)


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def test_canonical_form_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": "é", "c": [1, {"z": 0, "y": None}]}) == (
        '{"a":"é","b":1,"c":[1,{"y":null,"z":0}]}'.encode()
    )
    expected = hashlib.sha256(b'{"amount":50,"currency":"USD","recipient":"Hanako"}').hexdigest()
    assert digest({"recipient": "Hanako", "currency": "USD", "amount": 50}) == expected


@given(json_objects, st.randoms(use_true_random=False))
def test_digest_ignores_key_order(args: dict[str, Any], rng: random.Random) -> None:
    assert digest(shuffled(args, rng)) == digest(args)


@given(json_objects)
def test_digest_survives_a_json_round_trip(args: dict[str, Any]) -> None:
    """What a browser sends back after JSON.parse/JSON.stringify must digest the same."""
    assert digest(json.loads(json.dumps(args))) == digest(args)


@given(json_objects, json_objects)
def test_different_json_gives_different_digests(a: dict[str, Any], b: dict[str, Any]) -> None:
    if canonical_json(a) != canonical_json(b):
        assert digest(a) != digest(b)


def test_integral_floats_are_the_same_number_as_ints() -> None:
    assert digest({"amount": 50.0}) == digest({"amount": 50})
    assert digest({"amount": 50.5}) != digest({"amount": 50})
    assert digest({"flag": True}) != digest({"flag": 1})


@pytest.mark.parametrize(
    ("args", "fault"),
    [
        ({"x": math.nan}, "x: nan is not a JSON number"),
        ({"x": [1, math.inf]}, "x[1]: inf is not a JSON number"),
        ({"x": {1: "a"}}, "x: key 1 is not a string"),
        ({"when": object()}, "when: object is not JSON"),
    ],
)
def test_non_json_arguments_are_a_typed_error(args: dict[str, Any], fault: str) -> None:
    with pytest.raises(InvalidCall, match=re.escape(fault)):
        ToolCall("c1", "tool", args)


def test_a_call_needs_an_id_a_tool_and_object_args() -> None:
    with pytest.raises(InvalidCall, match="call_id"):
        ToolCall("", "tool", {})
    with pytest.raises(InvalidCall, match="tool"):
        ToolCall("c1", "", {})
    with pytest.raises(InvalidCall, match="object"):
        ToolCall("c1", "tool", [1, 2])  # type: ignore[arg-type]


def test_edited_args_re_digest() -> None:
    call = ToolCall("c1", "pay", {"amount": 50})
    edited = call.with_args({"amount": 20})
    assert (edited.call_id, edited.tool) == ("c1", "pay")
    assert edited.digest == digest({"amount": 20}) != call.digest
