"""A webhook channel: each notice POSTed as Standard Webhooks 1.0 defines a delivery.

The body is JSON: `{"type", "timestamp", "data": {"approval": <the REST API's approval JSON>, "links":
{"inbox": URL}}}`, where `timestamp` is when the event happened and `data.approval` the approval as it
stands when the attempt is made. The headers carry the notice's id (`webhook-id`, the same on every
attempt: the receiver's idempotency key), the attempt's time (`webhook-timestamp`, which receivers check
against a few minutes' tolerance, so a retry hours later still verifies) and the signature over both and
the body, made with the `standardwebhooks` library that receivers verify with.

What an answer means: any 2xx is delivered; 410 means the endpoint is gone; anything else (a redirect
too, which is never followed, since it could point anywhere) is a failure to retry, after the
`Retry-After` a 429 or 5xx carries if it carries one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit

import aiohttp
import msgspec
from standardwebhooks.webhooks import Webhook

from signoff.channels.addresses import guarded_socket
from signoff.channels.config import WebhookChannel
from signoff.channels.delivery import Delivered, Failed, Outcome, retry_after
from signoff.core.approval import Approval
from signoff.core.notice import Notice
from signoff.core.views import approval_json

TIMEOUT = 15.0
"""Seconds an attempt may take, connecting and answering."""
_TIMEOUT = aiohttp.ClientTimeout(total=TIMEOUT)


def event_body(notice: Notice, approval: Approval, inbox: str) -> bytes:
    """The event as a webhook's receiver reads it."""
    return msgspec.json.encode(
        {
            "type": notice.type,
            "timestamp": _iso(notice.created_at),
            "data": {"approval": approval_json(approval), "links": {"inbox": inbox}},
        }
    )


class Http:
    """The HTTP sessions every webhook of a process shares, made in its event loop on first use: one whose
    connector makes sockets only to addresses a delivery may reach (`guarded_socket`, on the address
    each connection attempt is about to connect to), and one for channels that `allow_private`.

    aiohttp rather than httpx, which the rest of signoff uses: at 16 deliveries in flight, httpcore's
    connection pool spent most of a delivery's CPU choosing a connection (238 deliveries/s in
    `bench/outbox.py`), and aiohttp's connector takes a socket factory of our own, which sees the address
    each connection is made to, IP literal or resolved name, and so closes the DNS rebinding window."""

    def __init__(self) -> None:
        self._sessions: dict[bool, aiohttp.ClientSession] = {}

    def session(self, *, allow_private: bool) -> aiohttp.ClientSession:
        if (found := self._sessions.get(allow_private)) is None or found.closed:
            factory = None if allow_private else guarded_socket
            connector = aiohttp.TCPConnector(limit=256, socket_factory=factory)
            found = self._sessions[allow_private] = aiohttp.ClientSession(connector=connector)
        return found

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()


class WebhookSender:
    def __init__(self, channel: WebhookChannel, http: Http, inbox: str) -> None:
        self.channel = channel
        self.http = http
        self.inbox = inbox
        self._signer = Webhook(channel.secret)

    async def send(self, notice: Notice, approval: Approval, now: float) -> Outcome:
        channel = self.channel
        body = event_body(notice, approval, self.inbox)
        stamp = int(now)
        signature = self._signer.sign(notice.id, datetime.fromtimestamp(stamp, UTC), body.decode())
        headers = {
            "content-type": "application/json",
            "user-agent": "signoff",
            "webhook-id": notice.id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature,
        }
        try:
            client = self.http.session(allow_private=channel.allow_private)
            async with client.post(
                channel.url, data=body, headers=headers, allow_redirects=False, timeout=_TIMEOUT
            ) as response:
                status, wants = response.status, response.headers.get("retry-after")
        except TimeoutError:
            return Failed(f"no answer within {TIMEOUT:g} s")
        except aiohttp.ClientError as exc:  # a refused address too: the connector names it
            return Failed(f"cannot reach {urlsplit(channel.url).hostname}: {exc}")
        if 200 <= status < 300:
            return Delivered()
        if status == 410:
            return Failed("HTTP 410 Gone: the endpoint is disabled", gone=True)
        wanted = retry_after(wants, now) if status == 429 or status >= 500 else None
        return Failed(f"HTTP {status}", wanted)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
