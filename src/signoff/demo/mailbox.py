"""`signoff demo --mailbox`: email, offline. A local SMTP server (`aiosmtpd`) takes what the demo's email
channel sends and keeps it in a maildir, and `/mailbox` shows it, newest first, links and all: a new user
asks for a large payment, watches the two finance approvers' emails arrive, and decides from their links.

The sink runs in the process that starts the demo and the messages live in a directory, so every worker
of a `--workers` demo shows the same mailbox. The page is rendered into the front end's built
`mailbox.html` (`server.built`), so it has the inbox's look, and its long links wrap on a phone.
"""

from __future__ import annotations

import contextlib
import email.policy
import html
import mailbox
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from signoff.channels.config import Channels, EmailChannel
from signoff.core.errors import PrincipalExists, SignoffError
from signoff.ledger.base import Ledger
from signoff.server.built import built, header

if TYPE_CHECKING:
    from aiosmtpd.controller import Controller

CHANNEL = "email:demo"
APPROVERS = (("fiona", "fiona@demo.local"), ("frank", "frank@demo.local"))
"""The demo's finance approvers, each with an address the mailbox receives for."""
_LINK = re.compile(r"https?://[^\s<>\"']+")
LINKS = (("/", "Chat"), ("/approvals", "Inbox"))


class _Sink:
    """aiosmtpd's handler: every message delivered, into the maildir."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd's name
        mailbox.Maildir(self.directory).add(envelope.content)
        return "250 OK"


@dataclass
class Mailbox:
    directory: str
    port: int
    controller: Controller

    @classmethod
    def start(cls) -> Mailbox:
        """A maildir and the SMTP server that fills it. aiosmtpd is imported here, for `--mailbox` only:
        serving signoff needs no SMTP server of its own."""
        try:
            from aiosmtpd.controller import Controller
        except ImportError:
            raise SignoffError(
                "--mailbox needs aiosmtpd, the demo's local mail server: pip install aiosmtpd"
            ) from None
        directory = str(Path(tempfile.mkdtemp(prefix="signoff-mailbox-")) / "Maildir")
        mailbox.Maildir(directory, create=True)  # made here, with its tmp, new and cur
        with socket.socket() as probe:  # aiosmtpd checks that it listens by connecting: a real port
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        controller = Controller(_Sink(directory), hostname="127.0.0.1", port=port)
        controller.start()
        return cls(directory, port, controller)

    def stop(self) -> None:
        self.controller.stop()
        shutil.rmtree(Path(self.directory).parent, ignore_errors=True)


def channels(port: int) -> Channels:
    sender = "signoff demo <signoff@demo.local>"
    return Channels({CHANNEL: EmailChannel("demo", f"smtp://127.0.0.1:{port}", sender)})


async def register_approvers(ledger: Ledger) -> None:
    """The demo's finance approvers, registered and linked to their addresses unless they are already."""
    for name, address in APPROVERS:
        with contextlib.suppress(PrincipalExists):  # a ledger the demo used before
            await ledger.principals.register(name, ["finance"], actor="signoff:demo")
        linked = await ledger.principals.identified("email", address)
        if linked is None or linked.principal.id != name:
            await ledger.principals.link(name, email=address, actor="signoff:demo")


def mailbox_route(directory: str) -> Route:
    async def show(request: Request) -> Response:
        found = mailbox.Maildir(directory, factory=None, create=False)
        messages = sorted(
            (
                email.message_from_bytes(found.get_bytes(key), policy=email.policy.default)
                for key in found.iterkeys()
            ),
            key=lambda m: str(m["Date"] or ""),
            reverse=True,
        )
        items = "".join(_item(m) for m in messages if isinstance(m, EmailMessage))
        listed = f"<ul class='mails'>{items}</ul>" if items else "<p class='empty'>No mail yet.</p>"
        main = (
            "<main class='inbox'><p class='hint'>What the demo's email channel sent, newest first; the page"
            f" looks again every 5 seconds.</p>{listed}</main>"
        )
        page = built("mailbox.html", "signoff · mailbox", header("signoff mailbox", *LINKS) + main)
        return HTMLResponse(page, headers={"cache-control": "no-store", "refresh": "5"})

    return Route("/mailbox", show, methods=["GET"])


def _item(message: EmailMessage) -> str:
    body = message.get_body(("plain",))
    text = html.escape(body.get_content() if isinstance(body, EmailMessage) else "")
    linked = _LINK.sub(lambda m: f"<a href='{m[0]}'>{m[0]}</a>", text)
    head = f"To {html.escape(str(message['To']))}: <strong>{html.escape(str(message['Subject']))}</strong>"
    return f"<li class='mail' data-testid='mail'><p>{head}</p><pre>{linked}</pre></li>"
