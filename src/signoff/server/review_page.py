"""The email review page as a person sees it: the inbox's card for one approval (its description, the
arguments as every channel shows them, who asked, who it waits for, the deadline) and, below it, the plain
form that decides, in the built front end's `review.html`.

The server renders all of it, so it reads and decides the same with JavaScript off. With JavaScript on, the
page's one script (frontend/src/review/main.tsx, loaded from /static/ as the page's CSP allows) makes the
deadline count down, as the inbox's does, and keeps a second press from posting the form again. Nothing
here is inline script or inline style, which that CSP forbids.

Rendering only: what the page may show and what a POST may decide is `server.review`'s to say.
"""

from __future__ import annotations

import html
import math

from signoff.core.approval import Approval, State
from signoff.core.argument_rows import Code, Item
from signoff.core.views import ARGUMENTS, shown
from signoff.server.built import built, header

ENTRY = "review.html"


def page(title: str, body: str) -> str:
    """A whole review page: the inbox's header, `title`, and `body` (HTML, escaped by its maker)."""
    main = f"<main class='inbox review'><h2>{html.escape(title)}</h2>{body}</main>"
    return built(ENTRY, f"signoff · {title}", header("signoff review", ("/approvals", "Inbox")) + main)


def card(approval: Approval, now: float, below: str = "") -> str:
    """The inbox's card for `approval` as it stands at `now`, with `below` (the form, or what was decided)
    at its foot."""
    said = dict(shown(approval))
    pending = approval.state is State.PENDING
    if pending and approval.deadline is not None:
        corner = f"<span data-countdown='{approval.deadline!r}'>{_deadline(approval.deadline - now)}</span>"
    else:
        state = html.escape(str(approval.state))
        corner = f"<span class='badge badge-{state}' data-testid='state'>{state}</span>"
    waits = (
        f"<p class='row-quorum' data-testid='quorum'>waiting for {html.escape(approval.awaited)}</p>"
        if pending
        else ""
    )
    arguments = said[ARGUMENTS]
    return (
        f"<article class='row review-card' data-testid='approval-row' data-state='{approval.state}'>"
        "<div class='row-head'>"
        f"<h3 data-testid='description'>{_text(said['Description'])}</h3>{corner}</div>"
        f"<p class='row-meta'><code>{_text(said['Tool'])}</code> asked by"
        f" <code data-testid='requester'>{_text(said['Asked by'])}</code></p>{waits}"
        f"{args_list(arguments if isinstance(arguments, list) else [])}{below}</article>"
    )


def args_list(shown: list[Item]) -> str:
    """The arguments as the page's ArgsList renders them (frontend/src/shared/ArgsList.tsx)."""
    if not shown:
        return "<p class='args-empty'>no arguments</p>"
    cells = "".join(
        _code(item)
        if isinstance(item, Code)
        else f"<div><dt>{_text(item[0])}</dt><dd>{_text(item[1])}</dd></div>"
        for item in shown
    )
    return f"<dl class='args' data-testid='args'>{cells}</dl>"


def _code(code: Code) -> str:
    """A block as ArgsList's CodeBlock renders it: a line a span, a diff's classed by its mark."""
    lines = "".join(f"<span class='{line_class(code, line)}'>{_text(line)}</span>" for line in code.lines)
    more = f"<p class='code-more'>{_text(code.more)}</p>" if code.more else ""
    return (
        f"<div class='args-code'><dt>{_text(code.name)}</dt><dd><pre class='code code-{code.kind}'"
        f" data-testid='code'>{lines}</pre>{more}</dd></div>"
    )


def line_class(code: Code, line: str) -> str:
    """`line` (of `code`)'s class, as ArgsList.tsx's `lineClass` gives it."""
    marks = {"+": "line line-add", "-": "line line-del", "@": "line line-hunk"}
    return marks.get(line[:1], "line") if code.kind == "diff" else "line"


def form(nonce: str, max_reason: int) -> str:
    """The plain form that decides: Approve or Deny, with an optional reason, posted to the page itself."""
    return (
        f"<form method='post' class='row-actions' data-testid='review-form'>"
        f"<input type='hidden' name='nonce' value='{html.escape(nonce)}'>"
        "<label>Reason (optional)"
        f"<textarea name='reason' rows='3' maxlength='{max_reason}' data-testid='reason'></textarea></label>"
        "<button class='primary' name='decision' value='approve' data-testid='approve'>Approve</button>"
        "<button class='danger' name='decision' value='deny' data-testid='deny'>Deny</button></form>"
    )


def _deadline(left: float) -> str:
    """What the page's Deadline component says (frontend/src/shared/Deadline.tsx, time.ts's countdown), at
    the moment the page is made: `expires in 9:58`, `expires in 1:02:03`, or `deadline passed`."""
    if left <= 0:
        return "<span class='deadline' data-testid='deadline'>deadline passed</span>"
    seconds = math.floor(left)
    hours, minutes, secs = seconds // 3600, seconds % 3600 // 60, seconds % 60
    clock = f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"
    return f"<span class='deadline' data-testid='deadline'>expires in {clock}</span>"


def _text(said: str | list[Item]) -> str:
    return html.escape(said) if isinstance(said, str) else ""
