"""Which hosts a webhook may reach: a server that posts where a config says is a way into the network it
sits in (SSRF), so loopback, private, link-local and other special addresses are refused unless a channel
says `allow_private = true`.

A name is checked by what it resolves to when the file loads, and then by the resolver the connection
itself uses (`PublicResolver`): the address a delivery connects to is one that was checked, so a name
that resolves elsewhere between the two (DNS rebinding) reaches nothing it should not.
"""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver


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
    resolve here (the connection's resolver checks again)."""
    for address in _resolve(host):
        if (why := refused_address(address)) is not None:
            return why if address == host.strip("[]") else f"resolves to {address}, which {why}"
    return None


class PublicResolver(AbstractResolver):
    """aiohttp's resolver, keeping only addresses a delivery may reach: a name that resolves to none of
    them fails to connect, as an unknown name would."""

    def __init__(self) -> None:
        self._resolver = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        public = [r for r in found if refused_address(r["host"]) is None]
        if not public:
            raise OSError(f"{host} resolves to no public address")
        return public

    async def close(self) -> None:
        await self._resolver.close()


def refused_literal(host: str) -> str | None:
    """Why a delivery may not go to `host` when it is an IP address (which no resolver sees), or None."""
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return None
    return refused_address(bare)


def _resolve(host: str) -> list[str]:
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        pass
    else:
        return [bare]
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))
