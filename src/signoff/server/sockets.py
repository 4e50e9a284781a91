"""The caps on the live sockets one process holds open (see `server.live`), and the collection that gives
back what closed ones kept."""

from __future__ import annotations

import gc
from collections import Counter

PER_ADDRESS = 4
"""An address may hold this many times a principal's cap (see `server.live`)."""
COLLECT_AFTER = 64
"""Closed sockets worth a full collection at least (see `Sockets.collect`)."""


class Sockets:
    """The live sockets open in this process, counted per principal and per source address. A count that
    drops to zero is forgotten, so the counts hold only who has sockets open now."""

    def __init__(self, per_principal: int) -> None:
        self.per_principal = per_principal
        self.per_address = PER_ADDRESS * per_principal
        self.principals: Counter[str] = Counter()
        self.addresses: Counter[str] = Counter()
        self.closed = 0
        """Sockets closed since the last collection."""

    def admit(self, principal: str, address: str) -> str | None:
        """Count one more socket; if it is over a cap, count nothing and say why."""
        if self.principals[principal] >= self.per_principal:
            return f"too many live sockets for this principal ({self.per_principal})"
        if self.addresses[address] >= self.per_address:
            return f"too many live sockets from this address ({self.per_address})"
        self.principals[principal] += 1
        self.addresses[address] += 1
        return None

    def release(self, principal: str, address: str) -> None:
        for counts, key in ((self.principals, principal), (self.addresses, address)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]
        self.closed += 1

    def collect(self) -> None:
        """Give back the memory of the sockets closed since the last collection, once there are enough.

        A closed socket's objects are garbage that only the cycle collector frees: websockets' protocol
        holds its parser, a generator whose frame holds the protocol, and asyncio's transport a bound
        method of itself. A socket that was open for a while has reached the oldest generation, which
        CPython collects only once a quarter as many objects as it holds have joined it since: an idle
        server never did, and 5,000 closed sockets kept 90 MB for good. A full collection costs what is
        alive (half a second with 5,000 sockets open), so it waits, like CPython's own rule, until the
        closed sockets are a quarter of the open ones, and at least `COLLECT_AFTER`."""
        if self.closed >= max(COLLECT_AFTER, sum(self.principals.values()) // 4):
            self.closed = 0
            gc.collect()
