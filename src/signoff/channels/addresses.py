"""Which addresses a webhook may reach: a server that posts where a config says is a way into the network
it sits in (SSRF), so every address that is not global unicast is refused unless a channel says
`allow_private = true`.

The verdict is `ipaddress`'s own: an address passes when it `is_global` and is neither multicast (which
`is_global` lets through, though it is no one host) nor reserved (IPv6's unassigned space, with the
deprecated IPv4-compatible `::a.b.c.d`). That refuses loopback, private (RFC 1918, ULA), link-local
(169.254.0.0/16 with the cloud metadata service, fe80::/10), shared (100.64.0.0/10, CGNAT),
unspecified, broadcast, documentation, benchmarking and the rest of the special-purpose registry. An
IPv6 address that carries an IPv4 one is judged by what it carries, since that is where a packet ends
up: IPv4-mapped (`::ffff:a.b.c.d`), 6to4 (`2002::/16`), Teredo (`2001::/32`, its server and its client)
and NAT64 (`64:ff9b::/96`, the IPv4 address in the last 32 bits). The local-use NAT64 prefix
`64:ff9b:1::/48` is refused whole: it reaches whatever the local translator reaches. Unwrapping first
also keeps the verdict the same on every Python release: their `is_global` disagrees about the
wrappers themselves, never about what they carry.

It runs twice. When the channels file loads (`refused_host`), on the host aiohttp will connect to as
yarl spells it, resolved then, so a wrong URL stops the server from starting. And when each connection
is made (`guarded_socket`, the connector's socket factory), on the very address the socket is about to
connect to: whatever spelling yarl folded (`127。0。0。1`, `①②⑦.0.0.1`), whether aiohttp resolved a name
or took an IP literal straight through (which no resolver sees), and whatever a name resolves to by
then (DNS rebinding). Redirects are never followed, so no other address is ever reached.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from aiohttp import AddrInfoType

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def refused_address(address: str) -> str | None:
    """Why a delivery may not connect to this IP address, or None when it may.

    Only the canonical spellings `ipaddress` reads are judged; anything else is refused, since the
    socket layer would read a legacy one (`2130706433`, `127.1`, `0x7f.0.0.1`) as some address this
    check never saw."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "is not an IP address in canonical form"
    if isinstance(ip, ipaddress.IPv6Address) and ip in _LOCAL_NAT64:
        return "is a local-use NAT64 address"
    for form, carried in _carried(ip):
        if (kind := _not_global(carried)) is not None:
            return f"is {kind}" if carried is ip else f"carries {carried} ({form}), which is {kind}"
    return None


def refused_host(host: str) -> str | None:
    """Why a delivery may not go to `host`, as it resolves now; None when it may, or when it does not
    resolve here (each connection is checked again). `host` is yarl's, the one aiohttp connects to, not
    the one `urlsplit` reads: yarl folds `127。0。0。1` into `127.0.0.1`."""
    for address in _resolve(host):
        if (why := refused_address(address)) is not None:
            return why if address == host else f"resolves to {address}, which {why}"
    return None


def guarded_socket(addr_info: AddrInfoType) -> socket.socket:
    """The socket for one connection attempt, made only when the address it is about to connect to may
    be reached: aiohttp's `TCPConnector(socket_factory=...)`, a documented hook that every attempt passes
    through with the address it will connect to, after yarl's folding, after the resolver or none (an IP
    literal), and after the DNS cache. A resolver alone would miss IP literals, and a connector subclass
    would rest on aiohttp's private methods."""
    family, kind, proto, _, address = addr_info
    if (why := refused_address(str(address[0]))) is not None:  # an OSError, as aiohttp reports any
        raise PermissionError(errno.EPERM, f"{address[0]} {why}")  # address it cannot connect to
    return socket.socket(family, kind, proto)


def _carried(ip: _IP) -> list[tuple[str, _IP]]:
    """The addresses a packet to `ip` is delivered to, each with the form that carries it: `ip` itself,
    unless it wraps IPv4 addresses."""
    if isinstance(ip, ipaddress.IPv4Address):
        return [("", ip)]
    if ip.ipv4_mapped is not None:
        return [("IPv4-mapped", ip.ipv4_mapped)]
    if ip.sixtofour is not None:
        return [("6to4", ip.sixtofour)]
    if ip.teredo is not None:
        server, client = ip.teredo
        return [("Teredo server", server), ("Teredo client", client)]
    if ip in _NAT64:
        return [("NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))]
    return [("", ip)]


def _not_global(ip: _IP) -> str | None:
    """What `ip` is, in words, when it is not global unicast; None when it is."""
    if ip.is_global and not ip.is_multicast and not ip.is_reserved:
        return None
    for kind, special in (
        ("an unspecified", ip.is_unspecified),
        ("a loopback", ip.is_loopback),
        ("a link-local", ip.is_link_local),
        ("a multicast", ip.is_multicast),
        ("a reserved", ip.is_reserved),
        ("a private", ip.is_private),
    ):
        if special:
            return f"{kind} address"
    return "not a globally routable address"


def _resolve(host: str) -> list[str]:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [host]
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))
