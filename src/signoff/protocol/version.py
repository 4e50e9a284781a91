"""Which major version of the `ai` client sent a request, so the stream uses only chunks it accepts.

What the stock `DefaultChatTransport` (HttpChatTransport.sendMessages) reveals:
- ai 6.0.0-6.0.125 append `ai-sdk/<version> runtime/<env>` to the `user-agent` header. Browsers may ignore a
  user-agent set by script (Chrome does), so this reaches the server from Node clients and some browsers only.
- ai 6.0.126+ and every 7.x send just `content-type` plus the app's own headers.
- The body is the same in 6 and 7: `{...transport body, id, messages, trigger, messageId}`, no version field.
- Only 7.x clients hold message parts of type `custom`, `reasoning-file` or `steering-message`, or approvals
  with `isAutomatic` / `requestReason`; `parse_chat_request` reports them as `ChatRequest.client_hint`.

So a stock v7 client usually looks like v6. That is safe: 7.x accepts every 6.0.0 chunk and field. A page
that wants v7 chunks says so with `new DefaultChatTransport({headers: {"x-ai-sdk-version": "7"}})`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import IntEnum

VERSION_HEADER = "x-ai-sdk-version"
_USER_AGENT = re.compile(r"\bai-sdk/(\d{1,4})\.")
_MAJOR = re.compile(r"(?:ai-sdk/)?(\d{1,4})\b")


class ClientVersion(IntEnum):
    V6 = 6
    V7 = 7


def _from_major(major: int) -> ClientVersion:
    return ClientVersion.V7 if major >= 7 else ClientVersion.V6


def client_version(headers: Mapping[str, str], body_hint: int | None = None) -> ClientVersion:
    """The explicit header wins, then the body's hint, then the user-agent suffix; unknown means 6."""
    lowered = {key.lower(): value for key, value in headers.items()}
    explicit = _MAJOR.match(lowered.get(VERSION_HEADER, "").strip())
    if explicit:
        return _from_major(int(explicit.group(1)))
    if body_hint is not None:
        return _from_major(body_hint)
    agent = _USER_AGENT.search(lowered.get("user-agent", ""))
    if agent:
        return _from_major(int(agent.group(1)))
    return ClientVersion.V6
