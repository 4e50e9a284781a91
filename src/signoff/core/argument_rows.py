"""A call's arguments as a person reads them: one renderer for every channel, so that the email, the review
page, Slack, an MCP client's form, the page and the inbox never show the same call two ways.

`rows` makes the content, and each channel only lays it out: `plain` for text (the email's text, the MCP
elicitation message, Slack's code blocks), `channels.review` for the email's HTML, `server.review_page`
for the review page, and frontend/src/shared/argumentRows.ts, a port of this module, for the page and the
inbox (keep the two alike; tests/test_argument_rows.py runs both on the same calls).

- One row per top-level argument, `(name, value)`, by name in code point order, as the call's canonical
  JSON has them: whatever order a client's JSON parser keeps, every channel lists them alike.
- A string is shown as it is; anything else as JSON, a nested value indented by two spaces with one line
  per member, its keys sorted too. Numbers are written as JavaScript writes them (`700.0` as `700`), so
  the page shows the digits the email shows.
- Everything the requester wrote (names, keys, strings) goes through `core.visible.reveal`: hidden and
  bidi characters spelled out, a line break inside a value included. The layout's own line breaks and
  indentation never are. So every real line break in a value is the renderer's, never the requester's,
  and no value can start a line that passes for another argument.
- Text channels cut lines longer than `WIDTH` characters; each piece after the first starts with
  `CONTINUED` at its line's indentation, and a spelled-out character is never cut. The page and HTML wrap
  the same rows where the reader's screen ends instead.
- A call of a known shape (a shell command, a file edit: `core.argument_views`) shows an argument as a
  `Code` block instead of a row: its lines are the content's own, each revealed on its own, so a line
  break there is real; the text channels start each with `GUTTER`, which no line of the layout does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, Literal

import msgspec

from signoff.core.call import normalize
from signoff.core.visible import reveal

WIDTH: Final = 78
"""The longest line a text channel writes, in characters, indentation included: what a plain-text mail
shows without wrapping it again."""
CONTINUED: Final = "↪ "
"""What starts the rest of a line cut at `WIDTH`, so a piece of a long value never reads as a line of
its own."""
SHORTEST: Final = 20
"""Characters a cut piece holds at least, however deep its line is indented."""
INDENT: Final = "  "

GUTTER: Final = "│ "
"""What starts each line of a `Code` block in text: a line of the content never passes for a row."""

Row = tuple[str, str]
"""An argument as shown: its name and its value, both revealed; the value's lines are the layout's."""


class Code(msgspec.Struct, frozen=True, gc=False):
    """An argument shown as a block of lines: a shell command, a diff, a file's content. `name` and each
    of `lines` are revealed, each line on its own (a diff's line keeps its mark, `+`, `-` or a space, in
    front); `more` is the layout's, saying what a bounded block leaves out."""

    name: str
    kind: Literal["shell", "diff", "text"]
    lines: tuple[str, ...]
    more: str = ""


Item = Row | Code
"""What a channel lays out, in order: a row, or a block."""

_PIECE = re.compile(r"⟨U\+[0-9A-F]{4,6}⟩|.", re.DOTALL)
"""What a cut never splits: one spelled-out character, or one character."""


def rows(args: Mapping[str, Any]) -> list[Row]:
    """The call's arguments as rows, by name."""
    json = normalize(args)
    return [(reveal(name), value(json[name])) for name in sorted(json)]


def value(item: Any) -> str:
    """One argument's value: a string as it is, anything else as (indented) JSON; revealed either way."""
    return reveal(item) if isinstance(item, str) else _json(item, "")


def plain(shown: Sequence[Item], width: int = WIDTH, indent: str = INDENT) -> list[str]:
    """The rows as lines of text, each `name: value` at `indent`, a nested value's further lines under its
    name, every line cut at `width`; a block's lines under its name, each after `GUTTER`."""
    lines: list[str] = []
    for item in shown:
        if isinstance(item, Code):
            lines += cut(f"{indent}{item.name}:", width)
            room = width - len(indent + GUTTER)
            lines += [indent + GUTTER + piece for line in item.lines for piece in cut(line, room)]
            lines += cut(indent + item.more, width) if item.more else []
            continue
        name, text = item
        first, *rest = text.split("\n")
        for line in [f"{name}: {first}", *rest]:
            lines += cut(indent + line, width)
    return lines


def cut(line: str, width: int = WIDTH) -> list[str]:
    """`line` in pieces of at most `width` characters (or `SHORTEST` past its indentation), the rest after
    the first each starting with `CONTINUED` at the line's indentation. A piece ends after a space where
    one is in its second half, so words stay whole where they can."""
    if len(line) <= width:
        return [line]
    lead = line[: len(line) - len(line.lstrip(" "))]
    pieces: list[str] = []
    left = _PIECE.findall(line[len(lead) :])
    room = max(width - len(lead), SHORTEST)
    while left:
        taken, size = 0, 0
        while taken < len(left) and size + len(left[taken]) <= room:
            size += len(left[taken])
            taken += 1
        taken = max(taken, 1)  # a spelled-out character wider than the room still goes somewhere
        if taken < len(left):
            space = max((i for i in range(taken) if left[i] == " "), default=-1)
            taken = space + 1 if space >= taken // 2 else taken
        pieces.append("".join(left[:taken]))
        left = left[taken:]
        room = max(width - len(lead) - len(CONTINUED), SHORTEST)
    return [lead + pieces[0], *(lead + CONTINUED + piece for piece in pieces[1:])]


def _json(item: Any, indent: str) -> str:
    inner = indent + INDENT
    if isinstance(item, dict):
        members = [f"{_string(key)}: {_json(item[key], inner)}" for key in sorted(item)]
        return _nested("{", members, "}", indent)
    if isinstance(item, list):
        return _nested("[", [_json(member, inner) for member in item], "]", indent)
    if isinstance(item, str):
        return _string(item)
    if item is None or isinstance(item, bool):
        return {None: "null", True: "true", False: "false"}[item]
    if isinstance(item, int):
        return str(item)
    return _number(item)


def _nested(opening: str, members: list[str], closing: str, indent: str) -> str:
    if not members:
        return opening + closing
    inner = indent + INDENT
    return f"{opening}\n{inner}" + f",\n{inner}".join(members) + f"\n{indent}{closing}"


def _string(text: str) -> str:
    """A string inside JSON: quoted, its quotes and backslashes escaped so the structure stays readable,
    and revealed instead of JSON's escapes (`⟨U+000A⟩`, not `\\n`), as a value at the top is."""
    return '"' + reveal(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def _number(number: float) -> str:
    """A float as JavaScript's `Number.prototype.toString` writes it: the same shortest digits as Python's
    `repr`, but plain from 1e-7 to 1e21 and `1e+21`, `1.5e-7` beyond."""
    _, digits, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    assert isinstance(exponent, int)  # a finite number: the call was normalized
    shown = "".join(map(str, digits))
    point = exponent + len(shown)  # where the decimal point goes, counted from the first digit
    if len(shown) <= point <= 21:
        text = shown + "0" * (point - len(shown))
    elif 0 < point <= 21:
        text = f"{shown[:point]}.{shown[point:]}"
    elif -6 < point <= 0:
        text = f"0.{'0' * -point}{shown}"
    else:
        mantissa = shown if len(shown) == 1 else f"{shown[0]}.{shown[1:]}"
        text = f"{mantissa}e{'+' if point > 0 else '-'}{abs(point - 1)}"
    return ("-" if number < 0 else "") + text
