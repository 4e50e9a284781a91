"""A chat request of the usual shape, read in one typed pass.

The client sends its whole history with every request, and the server reads only the last message: the
others are checked for shape and nothing else (see `request`). Walking them in Python made a request cost
more as the chat grew, so a body is first decoded against the shape itself, in msgspec's C: every message
an object with a short printable id, a role and at most `MAX_PARTS` parts, each an object with a type. Only
a body that passes is read this way; any other, and any that holds what only ai 7.x produces, is left to
`request`'s walk, which names the fault, or the client's version, exactly. So this pass never accepts what
the walk would refuse.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from signoff.protocol.limits import MAX_ID, MAX_MESSAGES, MAX_PARTS

V7_PART_TYPES: Final = frozenset({"custom", "reasoning-file", "steering-message"})
"""Part types only ai 7.x sends (see version.py)."""


class _Approval(msgspec.Struct, gc=False):
    """A part's approval, read only for the fields that only ai 7.x sends. No JSON value decodes as
    `UnsetType`, so an approval that has either one fails this pass and goes to the walk, which reads the
    request as a 7.x client's. Finding them by their words in the body's bytes cost five scans of the
    whole body, more than the typed pass itself on a long chat."""

    isAutomatic: msgspec.UnsetType = msgspec.UNSET
    requestReason: msgspec.UnsetType = msgspec.UNSET


V7_APPROVAL_KEYS: Final = _Approval.__struct_fields__
"""The approval fields only ai 7.x sends (see version.py): the ones `_Approval` refuses."""


class _Part(msgspec.Struct, gc=False):
    """Untracked by the garbage collector, like every shape here: they hold strings and one another
    alone, so they make no cycles, and a long history is hundreds of them per request."""

    type: Annotated[str, msgspec.Meta(min_length=1)]
    approval: _Approval | None = None


class _Message(msgspec.Struct, gc=False):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID)]
    role: Literal["system", "user", "assistant"]
    parts: Annotated[list[_Part], msgspec.Meta(max_length=MAX_PARTS)]


class _Shapes(msgspec.Struct, gc=False):
    messages: Annotated[list[_Message], msgspec.Meta(min_length=1, max_length=MAX_MESSAGES)]


class _Fields(msgspec.Struct):
    """The body's own fields as sent, for `request` to check, and its messages unread."""

    messages: list[msgspec.Raw]
    id: Any = msgspec.UNSET
    trigger: Any = msgspec.UNSET
    messageId: Any = msgspec.UNSET
    wait: Any = msgspec.UNSET


_shapes = msgspec.json.Decoder(_Shapes).decode
_fields = msgspec.json.Decoder(_Fields).decode


class Shaped(msgspec.Struct, frozen=True):
    fields: dict[str, Any]
    """The body's own fields (`id`, `trigger`, `messageId`, `wait`) that it has."""
    count: int
    """How many messages it holds."""
    last: bytes
    """The last message's JSON."""


def shaped(body: bytes) -> Shaped | None:
    """The body read in the usual shape, or None where `request`'s walk must read it."""
    try:
        messages = _shapes(body).messages
        fields = _fields(body)
    except (ValueError, RecursionError):  # not JSON, not this shape (msgspec's errors are ValueErrors)
        return None
    if not all(message.id.isprintable() for message in messages):
        return None
    if not V7_PART_TYPES.isdisjoint({part.type for message in messages for part in message.parts}):
        return None  # the walk says which part, and reads the request as a 7.x client's
    sent = {
        name: value
        for name in ("id", "trigger", "messageId", "wait")
        if (value := getattr(fields, name)) is not msgspec.UNSET
    }
    return Shaped(sent, len(messages), bytes(fields.messages[-1]))
