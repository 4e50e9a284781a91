"""The one call every Claude Code door makes to a signoff server: an event POSTed to
`/api/hooks/claude-code` with the requester's bearer token, and Claude Code's answer back.

`signoff hook claude-code` (the command hook), its `--mcp` permission-prompt tool and `signoff.claude` all
make it. It needs the standard library alone, since the command hook starts a process for every tool call
and that start is part of each call's latency: `signoff` imports nothing else on this path. It speaks the
one HTTP/1.1 exchange it needs over a socket (`Connection: close`, a body read to its end): `http.client`
loads the `email` package to parse headers, 40 ms of a 50 ms budget measured in bench/hooks.py. `ssl` is
loaded only for an `https` server.

Every failure is a `HookFailed` with one line saying why (the server down or slow, a refusal, an answer
that is not Claude Code's), which the command hook turns into exit 2: Claude Code then blocks the call.
"""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import urlsplit

from signoff.core.errors import SignoffError

PATH = "/api/hooks/claude-code"
URL_ENV = "SIGNOFF_URL"
TOKEN_ENV = "SIGNOFF_TOKEN"
DEFAULT_TIMEOUT = 600.0
"""Seconds Claude Code gives a tool hook when its settings name no `timeout`."""
MAX_MARGIN = 5.0


class HookFailed(SignoffError):
    """The server gave no answer Claude Code can use; the message is one line, for its stderr."""


def margin(timeout: float) -> float:
    """How long before a hook's `timeout` the server answers an undecided call deny: 5 s, or a fifth of a
    timeout under 25 s; time for the answer to reach Claude Code from a loaded server before Claude Code
    gives up on the hook and falls back to its own rules."""
    return min(MAX_MARGIN, timeout / 5)


def send(
    server: str, token: str, event: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """POST `event` to the server at `server` as the principal `token` proves, and return Claude Code's
    answer. The server answers a margin before `timeout`; this gives up half that margin before it, so a
    hook never outlives its own timeout."""
    if not token:
        raise HookFailed(f"signoff: no token: set {TOKEN_ENV} to your signoff token")
    url = urlsplit(server)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise HookFailed(f"signoff: the server must be an http(s) URL, not {server!r}")
    body = json.dumps(event).encode()
    head = (
        f"POST {url.path.rstrip('/')}{PATH}?timeout={timeout:g} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        status, said = _exchange(
            url.scheme, url.hostname, url.port, head.encode() + body, timeout - margin(timeout) / 2
        )
    except TimeoutError:
        raise HookFailed(f"signoff at {server} did not answer within {timeout:g} s") from None
    except (OSError, ValueError, IndexError) as exc:  # refused, reset, or no HTTP answer
        raise HookFailed(f"signoff at {server} could not be reached: {exc}") from None
    return _answer(server, status, said)


def _exchange(scheme: str, host: str, port: int | None, request: bytes, timeout: float) -> tuple[int, bytes]:
    """Send `request`, and read the whole answer: its status and its body (chunked or not)."""
    with socket.create_connection((host, port or (443 if scheme == "https" else 80)), timeout=timeout) as raw:
        sock = raw
        if scheme == "https":
            import ssl

            sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
        sock.sendall(request)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers = {name.strip().lower(): value.strip() for name, _, value in (f.partition(":") for f in fields)}
    return status, _dechunked(body) if headers.get("transfer-encoding") == "chunked" else body


def _dechunked(body: bytes) -> bytes:
    parts: list[bytes] = []
    while True:
        size, _, body = body.partition(b"\r\n")
        length = int(size.split(b";")[0], 16)
        if length == 0:
            return b"".join(parts)
        parts.append(body[:length])
        body = body[length + 2 :]


def _answer(server: str, status: int, said: bytes) -> dict[str, Any]:
    try:
        document = json.loads(said)
    except ValueError:
        document = None
    if status != 200:
        error = document.get("error", {}) if isinstance(document, dict) else {}
        message = error.get("message") if isinstance(error, dict) else None
        raise HookFailed(f"signoff at {server} refused the event ({status}): {message or said[:200]!r}")
    if not isinstance(document, dict):
        raise HookFailed(f"signoff at {server} answered something other than a JSON object")
    return document


def verdict(answer: dict[str, Any]) -> tuple[bool, str, dict[str, Any] | None]:
    """A `PreToolUse` answer as (allowed, reason, the edited input or None): what the permission-prompt tool
    and the Agent SDK's callback answer in their own shapes."""
    said = answer.get("hookSpecificOutput")
    if not isinstance(said, dict) or said.get("permissionDecision") not in ("allow", "deny"):
        raise HookFailed("signoff answered no PreToolUse decision")
    edited = said.get("updatedInput")
    reason = said.get("permissionDecisionReason")
    return (
        said["permissionDecision"] == "allow",
        str(reason or ""),
        edited if isinstance(edited, dict) else None,
    )


def asked(
    session: str, tool: str, tool_input: dict[str, Any], tool_use_id: str, cwd: str = ""
) -> dict[str, Any]:
    """The `PreToolUse` event for a call a permission-prompt tool or the Agent SDK is asked about."""
    event = {
        "hook_event_name": "PreToolUse", "session_id": session, "tool_name": tool, "tool_input": tool_input,
        "tool_use_id": tool_use_id,
    }  # fmt: skip
    return {**event, "cwd": cwd} if cwd else event


def permission(answer: dict[str, Any], tool_input: dict[str, Any]) -> dict[str, Any]:
    """A `PreToolUse` answer as a permission-prompt tool's: `{"behavior": "allow", "updatedInput": …}` (the
    call's own input unless a person edited it) or `{"behavior": "deny", "message": …}`."""
    allowed, reason, edited = verdict(answer)
    if allowed:
        return {"behavior": "allow", "updatedInput": tool_input if edited is None else edited}
    return {"behavior": "deny", "message": reason}
