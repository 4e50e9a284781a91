"""Claude Code's hook events, as read, and the answers it takes back.

What the CLI sends (verified against Claude Code 2.1.x): `session_id`, `transcript_path`, `cwd`,
`permission_mode`, `hook_event_name`, `tool_name`, `tool_input`, and `tool_use_id` on `PreToolUse` and
`PostToolUse` (never on `PermissionRequest`); `PostToolUse` adds `tool_response`. Fields it adds later are
ignored. The answers:

- `PreToolUse`: `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow" |
  "deny", "permissionDecisionReason": …, "updatedInput"?: …}}`;
- `PermissionRequest`: `{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision":
  {"behavior": "allow", "updatedInput"?: …} | {"behavior": "deny", "message": …}}}`;
- `PostToolUse`: `{}`, nothing to say.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from signoff.protocol.limits import MAX_ID

PRE: Final = "PreToolUse"
PERMISSION: Final = "PermissionRequest"
POST: Final = "PostToolUse"
EVENTS: Final = (PRE, PERMISSION, POST)

MAX_PATH: Final = 4096
"""Characters of a `cwd`: what Linux allows a path."""

_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID)]


class HookEvent(msgspec.Struct, kw_only=True):
    """One event, as far as signoff reads it."""

    hook_event_name: Literal["PreToolUse", "PermissionRequest", "PostToolUse"]
    session_id: _Id
    tool_name: _Id
    tool_input: dict[str, Any]
    tool_use_id: _Id | None = None
    cwd: Annotated[str, msgspec.Meta(max_length=MAX_PATH)] = ""
    permission_mode: Annotated[str, msgspec.Meta(max_length=MAX_ID)] = ""
    tool_response: Any = None

    @property
    def chat_id(self) -> str:
        """Each Claude Code session is a chat: its approvals are listed together in the inbox."""
        return f"claude-code:{self.session_id}"

    @property
    def context(self) -> dict[str, str]:
        """Where the call runs, shown beside it and open to the policy; never part of its digest."""
        found = {"cwd": self.cwd, "permission_mode": self.permission_mode}
        return {name: value for name, value in found.items() if value}


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What signoff answers a call: allowed (with the arguments a person edited it to, if any), or not,
    and why."""

    allow: bool
    reason: str
    updated_input: dict[str, Any] | None = None


def answer(event: str, verdict: Verdict) -> dict[str, Any]:
    """`verdict` in the shape Claude Code takes for `event` (`PreToolUse` or `PermissionRequest`)."""
    edited = {} if verdict.updated_input is None else {"updatedInput": verdict.updated_input}
    if event == PERMISSION:
        decision: dict[str, Any] = (
            {"behavior": "allow", **edited}
            if verdict.allow
            else {"behavior": "deny", "message": verdict.reason}
        )
        return {"hookSpecificOutput": {"hookEventName": PERMISSION, "decision": decision}}
    said = {
        "permissionDecision": "allow" if verdict.allow else "deny",
        "permissionDecisionReason": verdict.reason,
    }
    return {"hookSpecificOutput": {"hookEventName": PRE, **said, **edited}}
