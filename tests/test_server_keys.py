"""What keys browser sessions and approval signatures: the random keys of the audit key file, never the admin
token. A cookie or a signature is in every browser's hands, so a key derived from a human-chosen token let
anyone test guesses at that token offline. Real `signoff demo` processes, restarted over one ledger and one
key file: a new token keeps every browser signed in, and a rotated key file keeps the cookies its older keys
made until that key leaves the file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import httpx

from signoff.ledger.keyfile import load_keyring
from signoff.protocol import sign
from tests.servers import signoff_server

COOKIE = "signoff_session"
PAY = {
    "id": "c1",
    "trigger": "submit-message",
    "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 50 USD to Hanako"}]}],
}


def token_keys(token: str) -> list[bytes]:
    """Every key a server could have made from the token: how sessions and signatures were keyed before, and
    the plain ways to hash it."""
    raw = token.encode()
    made = [raw, hashlib.sha256(raw).digest()]
    for label in (b"signoff browser session\n", b"signoff approval signature\n"):
        made.append(hashlib.sha256(label + raw).digest())
    return made


def mac(key: bytes, browser_id: str) -> str:
    digest = hmac.new(key, browser_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def me(base: str, cookie: str) -> httpx.Response:
    return httpx.get(f"{base}/api/me", cookies={COOKIE: cookie}, timeout=10)


def asked(base: str, cookie: str) -> dict[str, Any]:
    """The approval request a 7.x client gets for a payment: it carries the server's signature."""
    reply = httpx.post(
        f"{base}/api/chat", json=PAY, cookies={COOKIE: cookie}, headers={"x-ai-sdk-version": "7"}, timeout=20
    )
    chunks = [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: {")]
    calls = {c["toolCallId"]: c for c in chunks if c["type"] == "tool-input-available"}
    request = next(c for c in chunks if c["type"] == "tool-approval-request")
    return {**request, "call": calls[request["toolCallId"]]}


def test_sessions_and_signatures_are_keyed_by_the_key_file_not_the_token(tmp_path: Path) -> None:
    key_file = tmp_path / "audit.key"
    env = {"SIGNOFF_AUDIT_KEY_FILE": str(key_file)}
    args = ["demo", "--ledger", f"sqlite:///{tmp_path / 'l.db'}"]

    with signoff_server(tmp_path, args, "hunter2", env=env) as (base, _):
        cookie = httpx.get(f"{base}/", timeout=10).cookies[COOKIE]
        browser_id, made = cookie.split(".")
        assert me(base, cookie).json()["id"] == f"browser:{browser_id}"
        request = asked(base, cookie)
    call = request["call"]
    signed = (request["approvalId"], call["toolCallId"], call["toolName"], call["input"])
    for key in token_keys("hunter2"):
        assert made != mac(key, browser_id), "the cookie's MAC is a test of guesses at the token"
        assert request["signature"] != sign(key, *signed), "so is the approval's signature"

    with signoff_server(tmp_path, args, "another-token", env=env) as (base, _):
        assert me(base, cookie).json()["id"] == f"browser:{browser_id}", "a new token signs nobody out"

    old = load_keyring(key_file).keyring.current.secret.hex()
    key_file.write_text(f"{'ab' * 32}\n{old}\n")  # rotated: a new key first, the old one kept below
    with signoff_server(tmp_path, args, "another-token", env=env) as (base, _):
        assert me(base, cookie).json()["id"] == f"browser:{browser_id}", "an older key's cookie still holds"
        fresh = httpx.get(f"{base}/", timeout=10).cookies[COOKIE]
    fresh_id = fresh.split(".")[0]

    key_file.write_text(f"{'ab' * 32}\n")  # the old key retired
    with signoff_server(tmp_path, args, "another-token", env=env) as (base, _):
        assert me(base, cookie).status_code == 401, "a cookie of a retired key proves nothing"
        assert me(base, fresh).json()["id"] == f"browser:{fresh_id}", "new cookies are made with the new key"
