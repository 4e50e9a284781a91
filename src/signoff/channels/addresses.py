"""Which hosts a webhook may not reach: a server that posts where a config says is a way into the network
it sits in (SSRF), so loopback, private, link-local and other special addresses are refused unless a
channel says `allow_private = true`.

A name is checked by what it resolves to, when the file loads and again before each delivery, since DNS
may change in between. (The request resolves it once more; the window between the two is a rebinding
attacker's, and closing it would take pinning the address into the connection, which httpx does not
offer for HTTPS without giving up the certificate check on the name.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket


def refused_address(address: str) -> str | None:
    """Why a delivery may not go to this IP address, or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, special in (
        ("a loopback", ip.is_loopback),
        ("a link-local", ip.is_link_local),
        ("a private", ip.is_private),
        ("a multicast", ip.is_multicast),
        ("an unspecified", ip.is_unspecified),
        ("a reserved", ip.is_reserved),
    ):
        if special:
            return f"is {kind} address"
    return None


def refused_host(host: str) -> str | None:
    """Why a delivery may not go to `host`, as it resolves now; None when it may, or when it does not
    resolve here (a delivery checks again)."""
    return _refused(host, _resolve(host))


async def refused_target(host: str) -> str | None:
    """`refused_host`, resolving without blocking the event loop."""
    return _refused(host, await asyncio.to_thread(_resolve, host))


def _refused(host: str, addresses: list[str]) -> str | None:
    for address in addresses:
        if (why := refused_address(address)) is not None:
            return why if address == host else f"resolves to {address}, which {why}"
    return None


def _resolve(host: str) -> list[str]:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return [host.strip("[]")]
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))
