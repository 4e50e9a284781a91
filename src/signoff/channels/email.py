"""An email channel: each approver the rule admits gets a message, with a link to review the approval.

Who is told is decided when sending, with roles as they are then: every active principal with a linked
address whose decision the approval's rule would count now (so the requester is left out under four eyes,
and so is anyone who has voted). An event that asks for a decision (`requested`, `reminder`,
`escalated`, `deadline_warning`) carries each one's own review link (see `channels.review`); an outcome
(`decided`, `expired`, `cancelled`) only says what happened.

The message is plain text and HTML, with no remote images. What the requester wrote (the description,
the arguments) is shown as the page shows it (`core.views.shown`: hidden characters spelled out, the
arguments as `core.argument_rows` puts them), cut at 78 characters in the text and escaped in the HTML,
whose styles are inline since mail clients load no stylesheet. Each message's `Message-ID` is made from
the notice and the approver, so a retry that sends one again is the same message to every mail system
that deduplicates.
"""

from __future__ import annotations

import hashlib
import html
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from urllib.parse import urlsplit

import aiosmtplib

from signoff.channels.config import EmailChannel
from signoff.channels.delivery import Delivered, Failed, Outcome
from signoff.channels.review import LIFETIME, PURPOSE, Review
from signoff.channels.review import link as review_link
from signoff.core.approval import Approval
from signoff.core.argument_rows import Code, Item
from signoff.core.notice import Notice
from signoff.core.principal import Registered
from signoff.core.views import may_decide, shown, shown_lines
from signoff.core.visible import reveal
from signoff.ledger.base import Ledger

TIMEOUT = 15.0
ASKING = frozenset(
    {"approval.requested", "approval.reminder", "approval.escalated", "approval.deadline_warning"}
)
SUBJECTS = {
    "approval.requested": "Approval needed",
    "approval.reminder": "Reminder: approval needed",
    "approval.escalated": "Escalated: approval needed",
    "approval.deadline_warning": "Deadline soon: approval needed",
    "approval.decided": "Approval decided",
    "approval.expired": "Approval expired",
    "approval.cancelled": "Approval cancelled",
}


class EmailSender:
    def __init__(self, channel: EmailChannel, ledger: Ledger, base_url: str) -> None:
        self.channel = channel
        self.ledger = ledger
        self.base_url = base_url
        self._keys = ledger.audit.keyring.derived(PURPOSE)

    async def send(self, notice: Notice, approval: Approval, now: float) -> Outcome:
        asking = notice.type in ASKING
        people = [
            r
            for r in await self.ledger.principals.reachable("email")
            if not asking or may_decide(r.principal, approval)
        ]
        if not people:
            return Failed("no principal the rule admits has a linked email address", final=True)
        messages = [self._message(notice, approval, person, now) for person in people]
        parts = urlsplit(self.channel.smtp)
        try:
            async with aiosmtplib.SMTP(
                hostname=parts.hostname,
                port=parts.port,
                use_tls=parts.scheme == "smtps",
                start_tls=None,  # STARTTLS whenever the server offers it
                username=self.channel.username,
                password=self.channel.password,
                timeout=TIMEOUT,
            ) as smtp:
                for message in messages:
                    await smtp.send_message(message)
        except (aiosmtplib.SMTPException, OSError) as exc:
            return Failed(f"SMTP {parts.hostname}: {exc}")
        return Delivered()

    def _message(self, notice: Notice, approval: Approval, person: Registered, now: float) -> EmailMessage:
        link = None
        if notice.type in ASKING:
            expires = min(approval.deadline or now + LIFETIME, now + LIFETIME)
            review = Review(approval.id, person.id, approval.approved_digest, expires, notice.id)
            link = review_link(self.base_url, self._keys, review)
        message = EmailMessage()
        message["Subject"] = f"{SUBJECTS[notice.type]}: {reveal(approval.description)}"
        message["From"] = self.channel.sender
        message["To"] = person.email
        message["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
        key = hashlib.sha256(f"{notice.id}/{person.id}".encode()).hexdigest()[:24]
        message["Message-ID"] = f"<{notice.id}.{key}@signoff>"
        body = "\n".join(shown_lines(approval)) + (f"\n\nReview and decide: {link}\n" if link else "\n")
        message.set_content(body)
        button = f"<p><a href='{html.escape(link)}'>Review and decide</a></p>" if link else ""
        message.add_alternative(f"<html><body>{details_html(approval)}{button}</body></html>", subtype="html")
        return message


CELL = "padding:4px 12px 4px 0;vertical-align:top;text-align:left"
WRAP = "white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word"
VALUE = f"{WRAP};margin:0;font-family:ui-monospace,Menlo,Consolas,monospace"


def details_html(approval: Approval) -> str:
    """The approval as an HTML table, label by label as `core.views.shown` puts it, each value escaped and
    wrapped where the reader's window ends: the arguments a table of their own, one row each, a nested
    value's lines kept."""
    cells = "".join(
        f"<tr><th style='{CELL}'>{html.escape(label)}</th><td style='{CELL};{WRAP}'>"
        f"{html.escape(said) if isinstance(said, str) else _arguments_html(said)}</td></tr>"
        for label, said in shown(approval)
    )
    return f"<table style='border-collapse:collapse'>{cells}</table>"


CODE = f"{VALUE};background:#f4f6f9;padding:6px 8px;border-radius:6px"
MARKS = {
    "+": "background:#e6f4ea;color:#14532d",
    "-": "background:#fde8e8;color:#7f1d1d",
    "@": "color:#5b6475",
}
"""How a diff's line shows, by its first character: added, removed, or a hunk's header."""


def _arguments_html(shown: list[Item]) -> str:
    if not shown:
        return "none"
    cells = "".join(
        f"<tr><td colspan='2' style='{CELL}'>{html.escape(item.name)}:"
        f"<pre style='{CODE}'>{_code_html(item)}</pre>"
        + (f"<div>{html.escape(item.more)}</div>" if item.more else "")
        + "</td></tr>"
        if isinstance(item, Code)
        else f"<tr><th style='{CELL};font-weight:normal'>{html.escape(item[0])}</th>"
        f"<td style='{CELL}'><pre style='{VALUE}'>{html.escape(item[1])}</pre></td></tr>"
        for item in shown
    )
    return f"<table style='border-collapse:collapse'>{cells}</table>"


def _code_html(code: Code) -> str:
    """A block's lines, a diff's coloured by their marks: the content's line breaks are real here."""
    if code.kind != "diff":
        return html.escape("\n".join(code.lines))
    return "\n".join(
        f"<span style='{MARKS[line[:1]]}'>{html.escape(line)}</span>"
        if line[:1] in MARKS
        else html.escape(line)
        for line in code.lines
    )
