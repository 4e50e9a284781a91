"""Words people read: how a call is worded for the person deciding (a policy's description template filled
from the call's arguments, or the call written out), and how a chat's user is named."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from signoff.core.call import ToolCall

OWNER = "the user"
"""A chat's owner, as the model and other people read it."""
WITHDRAWN = "the user sent a new message instead"
"""Why a chat's open approvals are cancelled when its user writes again instead of answering."""
INTERRUPTED = "the user interrupted the reply"
"""Why the approvals of a reply the user interrupted are cancelled, where the framework can't resume a call
that waited inside its tool (ADK, the OpenAI Agents SDK)."""

_PLACEHOLDER: Final = re.compile(r"\{(\w+(?:\.\w+)*)\}")


def _lookup(args: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    value: Any = args
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _show(value: Any) -> str:
    """A value as a person should read it inside a sentence.

    Plain strings appear as they are. Anything else, and strings with control characters (a newline could
    forge a second line of the approval prompt), appear as JSON, so what the person reads is what was sent.
    """
    if isinstance(value, str) and value.isprintable():
        return value
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def render_description(template: str, args: Mapping[str, Any]) -> str:
    """Fill `{name}` and `{a.b}` placeholders from the arguments; anything else is left as written.

    Not `str.format`: a format string can reach attributes and items (`{amount.__class__}`), and the template
    comes from a policy file. Here a placeholder only walks dict keys, and a miss leaves the text literally,
    so a typo is visible in the prompt instead of failing the call.
    """

    def substitute(match: re.Match[str]) -> str:
        found, value = _lookup(args, match[1])
        return _show(value) if found else match[0]

    return _PLACEHOLDER.sub(substitute, template)


def describe_call(call: ToolCall) -> str:
    """The default description: `process_payment(amount=50, currency='USD', recipient='Hanako')`."""
    return f"{call.tool}({', '.join(f'{key}={value!r}' for key, value in call.args.items())})"
