"""The optional approval signature, binding an approval id to one exact call.

ai >= 6.0.202 (and 7.x) accept `signature` on `tool-approval-request`, keep it on the tool part's `approval`,
and send it back with the person's response (ai 6.0.221+ and 7.0.16+; older clients rebuild `approval` as
`{id, approved, reason}` and lose it). The client never checks it; the server does, so a response whose
approval id, call id, tool or input was altered is refused before any ledger lookup. The scheme is the one
the ai package's own `signToolApproval` uses:

    b64url(HMAC-SHA256(secret, approvalId \\n toolCallId \\n toolName \\n b64url(SHA256(canonical input))))

unpadded, with signoff's canonical JSON for the input. It matches the ai package's canonical JSON except
for numbers JavaScript prints differently (integral values of 2**53 and above, exponent notation).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from signoff.core.call import canonical_json
from signoff.core.errors import InvalidCall


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _key(secret: bytes | str) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def sign(secret: bytes | str, approval_id: str, call_id: str, tool: str, args: Any) -> str:
    """Raises `InvalidCall` if `args` has no canonical JSON: such a call can never have been asked."""
    input_digest = _b64url(hashlib.sha256(canonical_json(args)).digest())
    payload = f"{approval_id}\n{call_id}\n{tool}\n{input_digest}".encode()
    return _b64url(hmac.new(_key(secret), payload, hashlib.sha256).digest())


def verify(secret: bytes | str, signature: str, approval_id: str, call_id: str, tool: str, args: Any) -> bool:
    """Constant-time; anything a client can send (odd characters, unserializable input) is just `False`."""
    try:
        expected = sign(secret, approval_id, call_id, tool, args)
    except (InvalidCall, UnicodeEncodeError):
        return False
    return signature.isascii() and hmac.compare_digest(expected, signature)
