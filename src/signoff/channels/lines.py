"""Each configured channel as the outbox worker's line: its sender and its retry schedule."""

from __future__ import annotations

from signoff.channels.config import Channels, EmailChannel, WebhookChannel
from signoff.channels.delivery import Line, Retries
from signoff.channels.email import EmailSender
from signoff.channels.slack import SlackSender
from signoff.channels.webhook import Http, WebhookSender
from signoff.ledger.base import Ledger


def lines_for(channels: Channels, ledger: Ledger, http: Http, public_url: str) -> dict[str, Line]:
    """`public_url` is where the server is reached, for links: the channels file's own, if it has one."""
    base = channels.public_url or public_url.rstrip("/")
    lines: dict[str, Line] = {}
    for name, channel in channels.by_name.items():
        if isinstance(channel, WebhookChannel):
            retries = Retries(channel.retry_schedule, channel.give_up_after)
            lines[name] = Line(WebhookSender(channel, http, f"{base}/approvals"), retries)
        elif isinstance(channel, EmailChannel):
            lines[name] = Line(EmailSender(channel, ledger, base))
        else:
            lines[name] = Line(SlackSender(channel, ledger))
    return lines
