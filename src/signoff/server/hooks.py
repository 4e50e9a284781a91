"""`POST /api/hooks/claude-code`: a Claude Code hook event (`PreToolUse`, `PermissionRequest` or
`PostToolUse`), ruled on for the principal its bearer token proves (see `signoff.hooks.ruling`).

The `http` hook type POSTs the event itself; `signoff hook claude-code` (the `command` type), the
permission-prompt tool and `signoff.claude` send it here too. `?timeout=SECONDS` is the hook's own timeout,
which the event can't carry: an asked call is answered deny a margin before it, so that Claude Code never
falls back to its own rules for want of an answer. A bearer token is required, the requester's own (a
personal token or an OIDC token): a browser's cookie is nobody's tool call.

A bad event is a 4xx with the reason (the command hook then blocks the call); a ruling, deny included, is a
200 in Claude Code's shape.
"""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from signoff.core.principal import Proven
from signoff.hooks.client import DEFAULT_TIMEOUT
from signoff.hooks.events import POST, HookEvent, answer
from signoff.hooks.ruling import ClaudeCode
from signoff.server.auth import deciding
from signoff.server.http import CHAT_BODY, NeedsCredential, Unprocessable, json_response, read_body

PATH = "/api/hooks/claude-code"
HOOK_BODY = CHAT_BODY
"""Bytes of an event: a `Write`'s whole file content rides in it."""
MAX_TIMEOUT = 86_400.0
"""Seconds a hook may say it waits: a day, far past any timeout a hook is given in practice."""


class HooksAPI:
    def __init__(self, claude_code: ClaudeCode) -> None:
        self.claude_code = claude_code

    def routes(self) -> list[BaseRoute]:
        return [Route(PATH, self.claude, methods=["POST"])]

    async def claude(self, request: Request) -> Response:
        proven = _bearer(request)
        timeout = _timeout(request)
        event = await read_body(request, HookEvent, limit=HOOK_BODY, what="hook event")
        if event.hook_event_name == POST:
            if event.tool_use_id is None:
                raise Unprocessable("a PostToolUse event needs its tool_use_id", "tool_use_id")
            await self.claude_code.ran(event, proven.principal.id)
            return json_response({})
        verdict = await self.claude_code.ask(event, proven.principal.id, hook_timeout=timeout)
        return json_response(answer(event.hook_event_name, verdict))


def _bearer(request: Request) -> Proven:
    """The requester, proven at the edge by a bearer token; `NeedsCredential` for a cookie's or nobody's."""
    proven = deciding(request)
    if "authorization" not in request.headers:
        raise NeedsCredential("a hook event needs a bearer token: Authorization: Bearer <token>")
    return proven


def _timeout(request: Request) -> float:
    given = request.query_params.get("timeout")
    if given is None:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 1 <= seconds <= MAX_TIMEOUT:  # NaN too
        raise Unprocessable(f"timeout must be a number of seconds from 1 to {MAX_TIMEOUT:.0f}", "timeout")
    return seconds
