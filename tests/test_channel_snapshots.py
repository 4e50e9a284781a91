"""Each channel's output for one call, against the files in tests/snapshots/: a payment with nested
arguments, a 5,000-character value and a right-to-left override, as the email (text and HTML), the review
page's card, Slack's blocks, an MCP client's form and the page's argument rows show it.

After changing what a channel shows on purpose, write the files again and read the diff:
`SIGNOFF_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_channel_snapshots.py`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import msgspec
import pytest

from signoff.channels.config import EmailChannel
from signoff.channels.email import EmailSender
from signoff.channels.slack import MAX_FIELD, MAX_SECTIONS, message_blocks
from signoff.core.approval import Approval
from signoff.core.argument_rows import WIDTH, rows
from signoff.core.call import ToolCall, digest
from signoff.core.notice import Notice
from signoff.core.principal import Authority, Registered
from signoff.ledger.base import Ledger
from signoff.mcp.asking import message
from signoff.server.review_page import card, form
from tests.jsclient import needs_node
from tests.test_argument_rows import page_rows

SNAPSHOTS = Path(__file__).with_name("snapshots")
UPDATE = os.environ.get("SIGNOFF_UPDATE_SNAPSHOTS") == "1"
NOW = 1_800_000_000.0
MEMO = ("Consulting for November, invoice 4471: workshops, reviews and the migration plan. " * 70)[:5000]
ARGS: dict[str, Any] = {
    "amount": 700,
    "currency": "USD",
    "recipient": "\u202eokanaH",  # shows as "Hanako" unless revealed
    "memo": MEMO,
    "order": {
        "id": 4471,
        "lines": [{"sku": "A-1", "qty": 2, "price": 12.5}, {"sku": "B-7", "qty": 1, "price": 675}],
        "ship_to": {"city": "Tōkyō", "note": "leave at the door\nring twice"},
        "gift": False,
        "coupon": None,
    },
}
APPROVAL = Approval(
    id="apr_snapshot",
    chat_id="chat-snapshot",
    call=ToolCall("call-1", "process_payment", ARGS),
    digest=digest(ARGS),
    description="Pay 700 USD to \u202eokanaH",
    rule="process_payment[0]",
    created_at=NOW - 60,
    deadline=NOW + 3540,
    requester="dave",
    authority=Authority(approvers=("role:finance",), quorum=2, requester_may_approve=False),
    notify=("email:finance", "slack:payments"),
)
NOTICE = Notice(
    id="msg_snapshot",
    approval_id=APPROVAL.id,
    channel="email:finance",
    type="approval.requested",
    created_at=NOW,
)
BOB = Registered(
    id="bob",
    name="Bob",
    roles=("finance",),
    token_hash="-",
    created_at=0.0,
    created_by="setup",
    email="bob@x.test",
)


def matches(name: str, made: str) -> None:
    """`made` is what tests/snapshots/`name` holds (or becomes it, with SIGNOFF_UPDATE_SNAPSHOTS=1)."""
    path = SNAPSHOTS / name
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(made)
    assert path.exists(), f"{path} is missing: write it with SIGNOFF_UPDATE_SNAPSHOTS=1"
    assert made == path.read_text(), f"{name} changed: if on purpose, SIGNOFF_UPDATE_SNAPSHOTS=1 writes it"


def email_parts(approval: Approval = APPROVAL) -> tuple[str, str]:
    """The email bob gets, its text and its HTML, its review link sealed under a fixed key."""
    keys = SimpleNamespace(derived=lambda purpose: (b"k" * 32,))
    ledger = cast(Ledger, SimpleNamespace(audit=SimpleNamespace(keyring=keys)))
    channel = EmailChannel("finance", "smtp://127.0.0.1:1", "signoff <signoff@x.test>")
    sent = EmailSender(channel, ledger, "https://signoff.x.test")._message(NOTICE, approval, BOB, NOW)
    text, page = sent.get_body(("plain",)), sent.get_body(("html",))
    assert text is not None and page is not None
    return str(text.get_content()), str(page.get_content())


def test_email_text() -> None:
    text, _ = email_parts()
    matches("email.txt", text)
    assert all(len(line) <= WIDTH for line in text.splitlines() if not line.startswith("Review and decide"))
    assert text.count("⟨U+000A⟩") == 1  # the newline inside the note, and no line of the layout


def test_email_html() -> None:
    _, page = email_parts()
    matches("email.html", page)
    assert "⟨U+202E⟩okanaH" in page and "\u202e" not in page and page.count("⟨U+000A⟩") == 1


def test_review_page_card() -> None:
    made = card(APPROVAL, NOW, form("NONCE", 2000))
    matches("review.html", made.replace("><", ">\n<"))  # a line a tag, so a change reads as one
    assert "name='nonce' value='NONCE'" in made and made.count("⟨U+000A⟩") == 1
    assert "expires in 59:00" in made


def test_slack_blocks() -> None:
    blocks = message_blocks(NOTICE, APPROVAL)
    matches("slack.json", json.dumps(blocks, indent=2, ensure_ascii=False) + "\n")
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert len(sections) > 2 and all(len(s) <= MAX_FIELD for s in sections)  # the memo takes two blocks
    code = "".join(s for s in sections if s.startswith("```"))
    assert code.count("⟨U+000A⟩") == 1 and "⟨U+202E⟩okanaH" in code


def test_mcp_elicitation_message() -> None:
    said = message(APPROVAL, may_decide=True)
    matches("mcp.txt", said + "\n")
    assert all(len(line) <= WIDTH for line in said.splitlines()) and said.count("⟨U+000A⟩") == 1


@needs_node
def test_page_rows() -> None:
    """The page and the inbox (ArgsList) show the rows the other channels lay out."""
    (made,) = page_rows([ARGS])
    matches("page.json", json.dumps(made, indent=2, ensure_ascii=False) + "\n")
    assert made == [list(row) for row in rows(ARGS)]


@pytest.mark.parametrize("name", ["email.txt", "email.html", "review.html", "slack.json", "mcp.txt"])
def test_no_snapshot_marks_a_line_of_the_layout(name: str) -> None:
    """The issue's complaint: `{⟨U+000A⟩  "amount": 700,⟨U+000A⟩ …}`. The one newline marked anywhere is
    the one inside the requester's note."""
    held = (SNAPSHOTS / name).read_text()
    assert re.findall(r"\S*⟨U\+000A⟩\S*", held) == ["door⟨U+000A⟩ring"]


def test_slack_says_what_it_leaves_out() -> None:
    """Arguments longer than Slack's blocks hold fill `MAX_SECTIONS` code blocks, the last saying how many
    lines are not shown, and every block stays under Slack's limit."""
    huge = msgspec.structs.replace(
        APPROVAL, call=ToolCall("call-1", "process_payment", {"memo": "word " * 20_000})
    )
    code = [b["text"]["text"] for b in message_blocks(NOTICE, huge) if b["type"] == "section"][1:]
    assert len(code) == MAX_SECTIONS and all(len(text) <= MAX_FIELD for text in code)
    assert re.search(r"… and \d+ more lines, not shown here```$", code[-1])
