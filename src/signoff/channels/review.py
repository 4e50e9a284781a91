"""The link in an approval email: a token that lets one approver review one approval, and decide it once.

A token says whose it is (the principal), for which approval, for which call (its digest when sent), until
when (the approval's deadline, and 24 hours at most), and which notice sent it; and it carries a MAC
under a key derived from the ledger's audit key, so that nobody who lacks that key can make one or change
a word of it. It is checked on every use, and the decision it makes is that principal's, judged with its
roles as they are then, like any other.

Why a sealed token and not a random one kept as a hash: everything a stored token would be bound to is in
the token itself under a MAC, so it needs no table of its own on four backends; and single use comes from
the decision, not from the token: once the approval is decided, or this principal's vote is counted, a
replay decides nothing and is audited as a refusal. What a leaked link allows is what its approver could
do once: one decision on that approval, before its deadline.
"""

from __future__ import annotations

import base64
import hmac
import re

import msgspec

from signoff.core.sealed import seal, unseal

LIFETIME = 86400.0
"""The longest a link lives, whatever the approval's deadline."""
PURPOSE = "email review"
PATH = "/approvals/email/"
"""Where a review link points, under the server's public URL, followed by its token."""
_LINK = re.compile(re.escape(PATH) + r"[^/?#\s'\"<>]+")


class Review(msgspec.Struct, frozen=True, array_like=True):
    """What a token grants: `principal` may review and decide `approval` while it asks for the call with
    `digest`, until `expires`."""

    approval: str
    principal: str
    digest: str
    expires: float
    notice: str


def mint(keys: tuple[bytes, ...], review: Review) -> str:
    """The token for `review`, under the current key (`keys[0]`)."""
    return seal(keys, review)


def read(keys: tuple[bytes, ...], token: str) -> Review | None:
    """What `token` grants, or None if any key's MAC fails it or it is not a token at all."""
    return unseal(keys, token, Review)


def link(base_url: str, keys: tuple[bytes, ...], review: Review) -> str:
    """The review link for `review`, on the server at `base_url`."""
    return f"{base_url.rstrip('/')}{PATH}{mint(keys, review)}"


def hidden(text: str) -> str:
    """`text` (a path, a URL, a log line) with the token of every review link in it hidden: the token is
    a credential, and it is in the path, which access logs and refusals quote."""
    return _LINK.sub(f"{PATH}<token>", text)


def nonce(keys: tuple[bytes, ...], token: str) -> str:
    """The review page's form nonce for `token`: a POST must carry what the page it came from held."""
    digest = hmac.digest(keys[0], f"form:{token}".encode(), "sha256")
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
