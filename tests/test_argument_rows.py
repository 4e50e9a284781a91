"""A call's arguments as people read them (`core.argument_rows`): one row per top-level argument, nested
values as indented JSON whose line breaks are the layout's, what the requester wrote revealed (a line break
in a value too), text cut at 78 characters; and the page's port (frontend/src/shared/argumentRows.ts) makes
the same rows from the same call."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from signoff.core.argument_rows import CONTINUED, WIDTH, cut, plain, rows
from tests.jsclient import ROOT, needs_node

FRONTEND = ROOT / "frontend"
SAMPLES: list[dict[str, Any]] = [
    {"amount": 700, "currency": "USD", "recipient": "\u202eokanaH"},
    {
        "order": {
            "lines": [{"sku": "A-1", "qty": 2, "price": 12.5}],
            "gift": False,
            "coupon": None,
            "tags": [],
        }
    },
    {"note": "line\nbreak", "nested": {"note": "line\nbreak\ttab"}, "empty": {}, "list": [[], [1, [2]]]},
    {"quote": 'say "hi" \\ bye', "nested": ['say "hi" \\ bye', "\u202e"]},
    {"numbers": [0.1, 1e21, 1e20, 1.5e-7, 1e-6, 123.456, -0.5, 5e-324, 2.5e300, -1e-7, 9007199254740993.0]},
    {"z": 1, "é": 2, "\U0001f600": 3, "\uff21": 4, "A": 5, "a\u200b": 6, "M\u0430llory": 7, "": 8},
    {"deep": {"b": {"a": {"\U0001f600": [{"\uff21": "x", "z": "y"}]}}}},
    {},
]
"""Strings, nested values, hidden characters in names, keys and values, numbers JavaScript writes its
own way, and keys that JavaScript's default sort orders otherwise (an emoji before a fullwidth letter)."""

ROWS_JS = """
import { readFileSync } from "node:fs";
import { rolldown } from "rolldown";
const bundle = await rolldown({ input: "src/shared/argumentRows.ts", logLevel: "silent" });
const { output: [chunk] } = await bundle.generate({ format: "esm" });
const module = await import(`data:text/javascript;base64,${Buffer.from(chunk.code).toString("base64")}`);
console.log(JSON.stringify(JSON.parse(readFileSync(0, "utf8")).map(module.argumentRows)));
"""


def page_rows(samples: list[dict[str, Any]]) -> list[list[list[str]]]:
    """The rows frontend/src/shared/argumentRows.ts makes of each of `samples`, parsed from JSON as the
    page gets them."""
    found: list[list[list[str]]] = in_node(ROWS_JS, samples)
    return found


def in_node(script: str, given: Any) -> Any:
    """What the page's module `script` prints of `given` (JSON on its stdin), parsed."""
    assert (FRONTEND / "node_modules" / "rolldown").is_dir(), "scripts/build-frontend installs rolldown"
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=FRONTEND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_node
def test_the_page_makes_the_rows_every_channel_shows() -> None:
    assert page_rows(SAMPLES) == [[list(row) for row in rows(sample)] for sample in SAMPLES]


def test_a_row_per_argument_by_name_nested_values_as_indented_json() -> None:
    args = {"to": "Bob", "amount": 700.0, "order": {"id": 7, "lines": [1, None], "to": {"city": "Tōkyō"}}}
    assert rows(args) == [
        ("amount", "700"),
        (
            "order",
            '{\n  "id": 7,\n  "lines": [\n    1,\n    null\n  ],\n  "to": {\n    "city": "Tōkyō"\n  }\n}',
        ),
        ("to", "Bob"),
    ]


def test_what_the_requester_wrote_is_revealed_and_the_layout_is_not() -> None:
    shown = dict(rows({"to": "\u202eokanaH", "memo": "one\ntwo", "order": {"note\u200b": "a\nb"}}))
    assert shown["to"] == "⟨U+202E⟩okanaH"
    assert shown["memo"] == "one⟨U+000A⟩two"  # a line break in a value is the requester's
    assert shown["order"] == '{\n  "note⟨U+200B⟩": "a⟨U+000A⟩b"\n}'  # the layout's are real


def test_text_is_cut_at_the_width_never_inside_a_spelled_out_character() -> None:
    value = "word " * 30 + "\u202e" * 20 + "x" * 200
    lines = plain(rows({"memo": value, "order": {"note": "y" * 300}}))
    assert all(len(line) <= WIDTH for line in lines), [len(line) for line in lines]
    assert lines[0].startswith("  memo: word ") and lines[0].endswith("word ")  # cut after a space
    assert all(line.startswith(f"  {CONTINUED}") for line in lines[1:8])
    assert all("⟨U+202E⟩" in line or "⟨" not in line for line in lines)  # no marker cut in two
    assert (
        "".join(line.removeprefix(f"  {CONTINUED}").removeprefix("  memo: ") for line in lines[:8])
        == (dict(rows({"memo": value}))["memo"])
    )
    nested = [line for line in lines if "y" in line]
    assert nested[0].startswith('    "note": "y') and nested[1].startswith(f"    {CONTINUED}y")


@pytest.mark.parametrize("width", [1, 5, 20])
def test_a_line_indented_past_the_width_still_moves_forward(width: int) -> None:
    line = " " * 30 + "⟨U+202E⟩" * 3 + "z" * 50
    pieces = cut(line, width)
    assert "".join(p.strip().removeprefix(CONTINUED.strip()).strip() for p in pieces) == line.strip()
