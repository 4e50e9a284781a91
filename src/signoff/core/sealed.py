"""A record sealed for a bearer to carry: its fields, readable, under a MAC that no one without the key can
make, so a bearer can't change a word of it (an email review link, a login cookie).

The record travels as msgpack in base64url, then `.`, then the MAC; keys are tried newest first, so a key
rotated out still opens what it sealed until that expires of itself.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from typing import TypeVar

import msgspec

T = TypeVar("T")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
"""Unpadded base64url, and nothing else: a decoder that skips other characters would let one token be
spelled many ways."""


def seal(keys: tuple[bytes, ...], record: msgspec.Struct) -> str:
    """`record` sealed under the current key (`keys[0]`)."""
    body = _b64(msgspec.msgpack.encode(record))
    return f"{body}.{_b64(_mac(keys[0], body))}"


def unseal(keys: tuple[bytes, ...], sealed: str, kind: type[T]) -> T | None:
    """The record `sealed` holds, if any key's MAC proves it and it reads as `kind`; None otherwise."""
    body, _, mac = sealed.partition(".")
    try:
        given = _unb64(mac)
        if not body or not any(hmac.compare_digest(given, _mac(key, body)) for key in keys):
            return None
        return msgspec.msgpack.decode(_unb64(body), type=kind)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        return None


def _mac(key: bytes, body: str) -> bytes:
    return hmac.digest(key, body.encode(), "sha256")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    if not _B64URL.fullmatch(text):
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
