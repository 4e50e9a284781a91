"""A coding agent's calls as people judge them (`core.argument_views`): Claude Code's `Bash` as its command
with where it runs, `Edit` and `MultiEdit` as unified diffs, `Write` as its path and the start of its
content; recognised by the tool's name and the arguments' shape together. The page's port
(frontend/src/shared/argumentViews.ts) makes the same blocks of the same calls, its diff included, and every
channel (the email's text and HTML, the review page, Slack, an MCP client's form, the page) shows them: the
snapshots are in tests/snapshots/code/.

After changing what a channel shows on purpose: `SIGNOFF_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest
tests/test_argument_views.py`.
"""

from __future__ import annotations

import difflib
import json
import random
from typing import Any

import msgspec
import pytest

from signoff.channels.slack import message_blocks
from signoff.core.argument_rows import GUTTER, WIDTH, Code, Item, rows
from signoff.core.argument_views import WRITE_CHARACTERS, WRITE_LINES, diff, view
from signoff.core.call import ToolCall, digest
from signoff.mcp.asking import message
from signoff.server.review_page import card, form
from tests.jsclient import needs_node
from tests.test_argument_rows import in_node
from tests.test_channel_snapshots import APPROVAL, NOTICE, NOW, email_parts, matches

CWD = "/home/dev/shop"
COMMAND = "cd build &&\n  rm -rf ./\u202eexe.sh\necho 'done'"
"""Three lines, the second hiding what it removes behind a right-to-left override."""
OLD = "def total(cart):\n    tax = 0.2\n    return sum(cart) * (1 + tax)\n"
NEW = "def total(cart):\n    tax = 0.0\n    log(cart)\n    return sum(cart) * (1 + tax)\n"
CONTENT = "".join(f"line {n}: {'x' * (n % 7) * 9}\n" for n in range(1, 121))
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "bash": ("Bash", {"command": COMMAND, "description": "Clean the build", "timeout": 120000}),
    "edit": ("Edit", {"file_path": "/home/dev/shop/src/cart.py", "old_string": OLD, "new_string": NEW}),
    "write": ("Write", {"file_path": "/home/dev/shop/notes.txt", "content": CONTENT}),
}


def approval(kind: str) -> Any:
    tool, args = CALLS[kind]
    call = ToolCall("toolu_1", tool, args, {"cwd": CWD})
    return msgspec.structs.replace(
        APPROVAL, chat_id="claude-code:s1", call=call, digest=digest(args), description=f"Claude Code: {tool}"
    )


def blocks(items: list[Item]) -> list[Code]:
    return [item for item in items if isinstance(item, Code)]


# -- the views -----------------------------------------------------------------------------------------------


def test_a_shell_command_is_its_lines_where_it_runs_and_the_rest_as_rows() -> None:
    tool, args = CALLS["bash"]
    shown = view(tool, args, {"cwd": CWD})
    assert shown[0] == Code(
        f"command in {CWD}", "shell", ("cd build &&", "  rm -rf ./⟨U+202E⟩exe.sh", "echo 'done'")
    )
    assert shown[1:] == [("description", "Clean the build"), ("timeout", "120000")]
    assert view(tool, args)[0].name == "command"  # type: ignore[union-attr]
    assert blocks(view(tool, args, {"cwd": "/tmp/\u202egol"}))[0].name == "command in /tmp/⟨U+202E⟩gol"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("Bash", {"cmd": "ls"}),  # another tool named Bash
        ("Bash", {"command": ["rm", "-rf", "/"]}),
        ("Bash", {"command": "ls", "cwd": "/safe"}),  # an argument Claude Code's Bash has not
        ("Edit", {"file_path": "a", "old_string": "x"}),
        ("Edit", {"file_path": "a", "old_string": "x", "new_string": 1}),
        ("MultiEdit", {"file_path": "a", "edits": [{"old_string": "x"}]}),
        ("MultiEdit", {"file_path": "a", "edits": []}),
        ("Write", {"file_path": "a", "content": "x", "mode": "0777"}),
        ("write", {"file_path": "a", "content": "x"}),
    ],
)
def test_another_shape_is_shown_as_its_rows(tool: str, args: dict[str, Any]) -> None:
    assert view(tool, args, {"cwd": CWD}) == rows(args)


def test_an_edit_is_the_unified_diff_of_its_strings_with_the_path_above() -> None:
    tool, args = CALLS["edit"]
    assert view(tool, {**args, "replace_all": True}) == [
        ("file_path", "/home/dev/shop/src/cart.py"),
        Code(
            "old_string → new_string",
            "diff",
            (
                "@@ -1,3 +1,4 @@",
                " def total(cart):",
                "-    tax = 0.2",
                "+    tax = 0.0",
                "+    log(cart)",
                "     return sum(cart) * (1 + tax)",
            ),
        ),
        ("replace_all", "true"),
    ]
    body = difflib.unified_diff(OLD[:-1].split("\n"), NEW[:-1].split("\n"), lineterm="", n=3)
    assert list(diff(OLD, NEW)) == list(body)[2:]


def test_a_diff_reveals_each_lines_text_and_never_its_mark() -> None:
    assert diff("pay(bob)", "pay(\u202ebob)\nrun()\r") == (
        "@@ -1 +1,2 @@",
        "-pay(bob)",
        "+pay(⟨U+202E⟩bob)",
        "+run()⟨U+000D⟩",
    )
    assert diff("same\nlines", "same\nlines") == (" same", " lines")  # nothing changed: all of it, unmarked
    assert diff("a\n", "a") == ("@@ -1,2 +1 @@", " a", "-")  # a line feed only one of them ends with


def test_a_multi_edit_is_a_diff_per_edit() -> None:
    edits = [
        {"old_string": "a", "new_string": "b"},
        {"old_string": "c", "new_string": "d", "replace_all": True},
    ]
    shown = view("MultiEdit", {"file_path": "/x", "edits": edits})
    assert [code.name for code in blocks(shown)] == [
        "edit 1 of 2: old_string → new_string",
        "edit 2 of 2, replace_all: old_string → new_string",
    ]
    assert blocks(shown)[1].lines == ("@@ -1 +1 @@", "-c", "+d")


def test_a_new_file_shows_its_path_and_the_start_of_its_content() -> None:
    tool, args = CALLS["write"]
    path, content = view(tool, args)
    assert path == ("file_path", "/home/dev/shop/notes.txt")
    assert isinstance(content, Code) and content.name == "content, 120 lines"
    assert content.lines == tuple(CONTENT.split("\n")[:WRITE_LINES])
    assert content.more == "… 80 more lines not shown"
    long = view(tool, {**args, "content": "x" * 60 + "\n" + "y" * WRITE_CHARACTERS + "\nz"})[1]
    assert isinstance(long, Code) and long.lines == ("x" * 60,) and long.more == "… 2 more lines not shown"
    one = view(tool, {**args, "content": "\u202e" + "y" * 5000})[1]
    assert isinstance(one, Code) and one.lines == ("⟨U+202E⟩" + "y" * (WRITE_CHARACTERS - 1),)
    assert one.more == "… the rest of this line not shown"


# -- the page's port agrees ----------------------------------------------------------------------------------

VIEWS_JS = """
import { readFileSync } from "node:fs";
import { rolldown } from "rolldown";
const bundle = await rolldown({ input: "src/shared/argumentViews.ts", logLevel: "silent" });
const { output: [chunk] } = await bundle.generate({ format: "esm" });
const module = await import(`data:text/javascript;base64,${Buffer.from(chunk.code).toString("base64")}`);
const calls = JSON.parse(readFileSync(0, "utf8"));
console.log(JSON.stringify(calls.map(([tool, args, context]) => module.argumentView(tool, args, context))));
"""


def page_views(calls: list[tuple[str, dict[str, Any], dict[str, str]]]) -> list[Any]:
    """What frontend/src/shared/argumentViews.ts makes of each call, parsed from JSON as the page gets it."""
    return list(in_node(VIEWS_JS, calls))


def as_json(items: list[Item]) -> list[Any]:
    made: list[Any] = json.loads(msgspec.json.encode(items))  # a block as an object, a row as a list
    return made


def edits(seed: int) -> tuple[str, str]:
    """Two texts of many repeated lines (over 200, so difflib's popular-line heuristic takes part), the second
    the first with lines changed, dropped and added at random."""
    chance = random.Random(seed)
    words = ["}", "", "return x", "x += 1", "if x:", "    pass", "\u202eevil", "a\tb"]
    old = [chance.choice(words) for _ in range(chance.choice([3, 30, 260]))]
    new = [line for line in old if chance.random() > 0.2]
    for _ in range(chance.randrange(1, 12)):
        new.insert(chance.randrange(len(new) + 1), chance.choice(words))
    return "\n".join(old), "\n".join(new)


@needs_node
def test_the_page_makes_the_views_every_channel_shows() -> None:
    calls: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        (tool, args, {"cwd": CWD}) for tool, args in CALLS.values()
    ]
    calls += [
        ("Edit", {"file_path": "f", "old_string": o, "new_string": n}, {}) for o, n in map(edits, range(40))
    ]
    calls += [
        ("Bash", {"command": "ls"}, {}),
        ("Bash", {"cmd": "ls"}, {"cwd": CWD}),
        ("Write", {"file_path": "a", "content": "😀" * 3000}, {}),
        ("Write", {"file_path": "a", "content": "x\n" * 5 + "y" * 2500}, {}),
        ("Write", {"file_path": "a", "content": ""}, {}),
        (
            "MultiEdit",
            {"file_path": "a", "edits": [{"old_string": "a\nb", "new_string": "b", "replace_all": False}]},
            {},
        ),
        ("Edit", {"file_path": "a", "old_string": "same", "new_string": "same"}, {}),
    ]
    assert page_views(calls) == [as_json(view(tool, args, context)) for tool, args, context in calls]


# -- every channel shows them --------------------------------------------------------------------------------

KINDS = list(CALLS)


@pytest.mark.parametrize("kind", KINDS)
def test_email(kind: str) -> None:
    text, page = email_parts(approval(kind))
    matches(f"code/{kind}.email.txt", text)
    matches(f"code/{kind}.email.html", page)
    assert all(len(line) <= WIDTH for line in text.splitlines() if not line.startswith("Review and decide"))
    assert f"  {GUTTER}" in text and "\u202e" not in text + page


@pytest.mark.parametrize("kind", KINDS)
def test_review_page(kind: str) -> None:
    made = card(approval(kind), NOW, form("NONCE", 2000))
    matches(f"code/{kind}.review.html", made.replace("><", ">\n<"))
    assert "data-testid='code'" in made and "\u202e" not in made


@pytest.mark.parametrize("kind", KINDS)
def test_slack(kind: str) -> None:
    made = message_blocks(NOTICE, approval(kind))
    matches(f"code/{kind}.slack.json", json.dumps(made, indent=2, ensure_ascii=False) + "\n")
    code = "".join(
        b["text"]["text"] for b in made if b["type"] == "section" and b["text"]["text"].startswith("```")
    )
    assert GUTTER in code and "\u202e" not in code


@pytest.mark.parametrize("kind", KINDS)
def test_mcp_elicitation(kind: str) -> None:
    said = message(approval(kind), may_decide=True)
    matches(f"code/{kind}.mcp.txt", said + "\n")
    assert all(len(line) <= WIDTH for line in said.splitlines())


@needs_node
def test_page() -> None:
    made = page_views([(tool, args, {"cwd": CWD}) for tool, args in CALLS.values()])
    for kind, shown in zip(KINDS, made, strict=True):
        matches(f"code/{kind}.page.json", json.dumps(shown, indent=2, ensure_ascii=False) + "\n")


def test_the_bidi_override_is_spelled_out_in_every_channel_and_no_line_of_the_layout_is() -> None:
    text, page = email_parts(approval("bash"))
    slack = json.dumps(message_blocks(NOTICE, approval("bash")), ensure_ascii=False)
    for made in (text, page, card(approval("bash"), NOW), slack, message(approval("bash"), may_decide=True)):
        assert "rm -rf ./⟨U+202E⟩exe.sh" in made and "⟨U+000A⟩" not in made
