"""The webhook address guard (SSRF): every address that is not global unicast is refused, and so is each
IPv6 form that carries such an IPv4 address; a delivery to loopback, however its URL spells it, never
connects unless the channel allows private addresses; the channels file refuses the same URLs at start-up.

The guard is tested with addresses, never with traffic: the only live traffic goes to a receiver on
127.0.0.1, and the same delivery reaching it when the channel allows private addresses shows that a
refusal is the guard's, not a receiver that could not be reached anyway.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import AddrInfoType
from yarl import URL

from signoff import MemoryLedger
from signoff.channels.addresses import guarded_socket, refused_address
from signoff.channels.config import ChannelsError, WebhookChannel
from signoff.channels.delivery import Delivered, Failed, Outcome
from signoff.channels.webhook import Http, WebhookSender
from signoff.core.approval import Approval
from signoff.core.notice import Notice
from tests.test_webhooks import SECRET, Receiver, ask, channels, receiving

REFUSED = [
    ("10.0.0.1", "is a private address"),
    ("172.16.0.1", "is a private address"),
    ("192.168.1.1", "is a private address"),
    ("127.0.0.1", "is a loopback address"),
    ("169.254.169.254", "is a link-local address"),
    ("100.64.0.1", "is not a globally routable address"),
    ("100.127.255.254", "is not a globally routable address"),
    ("0.0.0.0", "is an unspecified address"),
    ("224.0.0.1", "is a multicast address"),
    ("255.255.255.255", "is a reserved address"),
    ("198.18.0.1", "is a private address"),
    ("192.0.2.1", "is a private address"),
    ("::1", "is a loopback address"),
    ("::", "is an unspecified address"),
    ("fe80::1", "is a link-local address"),
    ("fc00::1", "is a private address"),
    ("ff0e::1", "is a multicast address"),
    ("::7f00:1", "is a reserved address"),
    ("::ffff:127.0.0.1", "carries 127.0.0.1 (IPv4-mapped), which is a loopback address"),
    ("::ffff:169.254.169.254", "carries 169.254.169.254 (IPv4-mapped), which is a link-local address"),
    ("2002:a9fe:a9fe::", "carries 169.254.169.254 (6to4), which is a link-local address"),
    ("2002:7f00:1::", "carries 127.0.0.1 (6to4), which is a loopback address"),
    ("2002:6440:1::", "carries 100.64.0.1 (6to4), which is not a globally routable address"),
    (
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "carries 192.0.2.45 (Teredo client), which is a private address",
    ),
    ("2001:0:a00:1:8000:63bf:f7f7:f7f7", "carries 10.0.0.1 (Teredo server), which is a private address"),
    ("64:ff9b::a9fe:a9fe", "carries 169.254.169.254 (NAT64), which is a link-local address"),
    ("64:ff9b::7f00:1", "carries 127.0.0.1 (NAT64), which is a loopback address"),
    ("64:ff9b:1::a9fe:a9fe", "is a local-use NAT64 address"),
    ("64:ff9b:1::808:808", "is a local-use NAT64 address"),
]
ALLOWED = [
    "8.8.8.8",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",
    "2002:808:808::",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo: server 65.54.227.120, client 8.8.8.8
    "64:ff9b::808:808",  # what DNS64 gives an IPv6-only host for 8.8.8.8
]
LEGACY = ["2130706433", "127.1", "0x7f.0.0.1", "0177.0.0.1"]
"""Spellings the socket layer reads as 127.0.0.1 and `ipaddress` does not read at all."""


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_an_address_that_is_not_global_unicast_is_refused_in_words(address: str, why: str) -> None:
    assert refused_address(address) == why


@pytest.mark.parametrize("address", ALLOWED)
def test_a_global_unicast_address_is_allowed_in_each_form_that_carries_one(address: str) -> None:
    assert refused_address(address) is None


@pytest.mark.parametrize("address", LEGACY)
def test_a_spelling_ipaddress_does_not_read_is_refused(address: str) -> None:
    assert refused_address(address) == "is not an IP address in canonical form"


@pytest.mark.parametrize(
    "addr_info",
    [
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("169.254.169.254", 80)),
        (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("64:ff9b::7f00:1", 80, 0, 0)),
        *((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (legacy, 80)) for legacy in LEGACY),
    ],
)
def test_the_socket_factory_makes_no_socket_to_a_refused_address(
    addr_info: AddrInfoType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What aiohttp would connect to is refused before a socket exists, as a `PermissionError`: an
    `OSError`, which aiohttp reports as an address it could not connect to."""
    made: list[object] = []
    monkeypatch.setattr(socket, "socket", lambda *args: made.append(args))
    with pytest.raises(PermissionError) as refused:
        guarded_socket(addr_info)
    assert refused.value.errno == errno.EPERM
    assert refused.value.strerror == f"{addr_info[4][0]} {refused_address(addr_info[4][0])}"
    assert made == []


def test_the_socket_factory_makes_the_socket_for_a_global_address() -> None:
    """Made, not connected: nothing is sent."""
    with guarded_socket(
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("8.8.8.8", 443))
    ) as made:
        assert (made.family, made.type) == (socket.AF_INET, socket.SOCK_STREAM)


@pytest.fixture
async def event() -> AsyncIterator[tuple[Notice, Approval]]:
    """A notice for `webhook:ops` and its approval, as the deliverer hands them to a sender."""
    async with MemoryLedger() as ledger:
        approval_id = await ask(ledger, "c1", "webhook:ops")
        (notice,) = await ledger.outbox.query(approval_id=approval_id)
        yield notice, await ledger.approvals.get(approval_id)


async def deliver(url: str, event: tuple[Notice, Approval], *, allow_private: bool) -> Outcome:
    """One attempt, as the deliverer makes it, with a fresh `Http`: no connection carries over."""
    http = Http()
    try:
        sender = WebhookSender(WebhookChannel("ops", url, SECRET, allow_private), http, "http://x/inbox")
        return await sender.send(*event, time.time())
    finally:
        await http.close()


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("127。0。0。1", "[127.0.0.1 is a loopback address]"),
        ("①②⑦.0.0.1", "[127.0.0.1 is a loopback address]"),
        ("0x7f.0.0.1", "[127.0.0.1 is a loopback address]"),
        (
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1 carries 127.0.0.1 (IPv4-mapped), which is a loopback address]",
        ),
        ("localhost", "is a loopback address"),
        ("127.0.0.1", "[127.0.0.1 is a loopback address]"),
    ],
)
async def test_a_loopback_url_is_refused_at_delivery_however_it_is_spelled(
    host: str, why: str, event: tuple[Notice, Approval]
) -> None:
    """The connection is checked on the address it is made to, after yarl folded the spelling; the same
    delivery reaches the receiver when the channel allows private addresses."""
    receiver = Receiver()
    async with receiving(receiver) as url:
        target = f"http://{host}:{URL(url).port}/hook"
        refused = await deliver(target, event, allow_private=False)
        assert (receiver.seen, receiver.forged) == ([], 0), "nothing reached the receiver"
        allowed = await deliver(target, event, allow_private=True)
    assert isinstance(refused, Failed) and why in refused.error, refused
    assert not refused.gone
    assert allowed == Delivered()
    assert len(receiver.seen) == 1 and receiver.forged == 0


@pytest.mark.parametrize("host", ["2130706433", "127.1"])
async def test_a_legacy_numeric_url_is_refused_at_delivery(host: str, event: tuple[Notice, Approval]) -> None:
    """aiohttp refuses these spellings itself before resolving anything, whatever the channel allows;
    an aiohttp that let one through would hand it to the socket factory, which refuses it too (above)."""
    receiver = Receiver()
    async with receiving(receiver) as url:
        refused = await deliver(f"http://{host}:{URL(url).port}/hook", event, allow_private=False)
    assert isinstance(refused, Failed) and "canonical" in refused.error, refused
    assert (receiver.seen, receiver.forged) == ([], 0)


async def test_a_redirect_is_not_followed(event: tuple[Notice, Approval]) -> None:
    """A redirect could point anywhere, past the guard's check of the first address: it is a failure."""
    receiver = Receiver()
    async with receiving(receiver) as url:
        receiver.answers = [(307, {"location": url})]
        outcome = await deliver(url, event, allow_private=True)
    assert outcome == Failed("HTTP 307")
    assert len(receiver.seen) == 1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127。0。0。1/", "is a loopback address"),
        ("http://①②⑦.0.0.1/", "is a loopback address"),
        ("http://0x7f.0.0.1/", "resolves to 127.0.0.1, which is a loopback address"),
        ("http://2130706433/", "resolves to 127.0.0.1, which is a loopback address"),
        ("http://127.1/", "resolves to 127.0.0.1, which is a loopback address"),
        ("http://[64:ff9b::a9fe:a9fe]/", "carries 169.254.169.254 (NAT64), which is a link-local address"),
        ("http://[2002:a9fe:a9fe::]/", "carries 169.254.169.254 (6to4), which is a link-local address"),
        ("http://100.64.0.1/", "is not a globally routable address"),
    ],
)
def test_the_channels_file_refuses_the_same_urls_at_start_up(url: str, why: str) -> None:
    """Judged on the host aiohttp would connect to (yarl's), resolved when the file loads."""
    with pytest.raises(ChannelsError) as raised:
        channels(f'[webhook.ops]\nurl = "{url}"\nsecret_env = "HOOK_SECRET"\n')
    assert (
        str(raised.value)
        == f"channels.toml: webhook.ops.url: {url} {why}; set allow_private = true to allow it"
    )


def test_the_channels_file_refuses_a_url_aiohttp_cannot_read() -> None:
    """A host yarl cannot read stops the server in one line, its invisible character shown escaped."""
    url = "http://a\u200b.example/"
    with pytest.raises(ChannelsError) as raised:
        channels(f'[webhook.ops]\nurl = "{url}"\nsecret_env = "HOOK_SECRET"\n')
    assert str(raised.value).startswith(
        r"channels.toml: webhook.ops.url: 'http://a\u200b.example/' is malformed: "
    )
