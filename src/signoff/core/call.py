"""The call: one tool invocation, and the digest that binds a decision to exactly these arguments."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import msgspec

from signoff.core.errors import InvalidCall

JSON = dict[str, Any]


class _Fault(Exception):
    """A value JSON cannot say; `path` is filled in on the way out, so the common case never formats one."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.path: list[str] = []

    def where(self) -> str:
        return (
            "".join(part if part.startswith("[") else f".{part}" for part in self.path).lstrip(".") or "args"
        )


def _normalize(value: Any) -> Any:
    """Reduce a value to the JSON data model, so that equal JSON gives equal bytes.

    Integral floats become ints because JavaScript, where most tool arguments are produced, has one number
    type: `50` and `50.0` are the same amount and must not digest differently. This runs on every digest
    and audit hash, so exact types are checked first and an error's path is only built when there is one.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float or isinstance(value, float):
        if not math.isfinite(value):
            raise _Fault(f"{value} is not a JSON number")
        return int(value) if value.is_integer() and abs(value) < 2**53 else float(value)
    if kind is dict or isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Fault(f"key {key!r} is not a string")
            try:
                out[key] = _normalize(item)
            except _Fault as fault:
                fault.path.insert(0, key)
                raise
        return out
    if kind is list or isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_normalize(item))
            except _Fault as fault:
                fault.path.insert(0, f"[{index}]")
                raise
        return items
    if isinstance(value, str | int):  # subclasses such as StrEnum and IntEnum are their JSON values
        return str(value) if isinstance(value, str) else int(value)
    raise _Fault(f"{kind.__name__} is not JSON")


def normalize(value: Any) -> Any:
    try:
        return _normalize(value)
    except _Fault as fault:
        raise InvalidCall(f"{fault.where()}: {fault.problem}") from None


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8."""
    return msgspec.json.encode(normalize(value), order="sorted")


def digest(args: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(args)).hexdigest()


class ToolCall(msgspec.Struct, frozen=True, gc=False):
    """One tool invocation as the model asked for it.

    `args` is normalized on construction, so a call that cannot be digested never exists. `context` is
    where the call was made, as its client says (Claude Code's `cwd`): shown beside the arguments, and kept
    out of the digest, since an edit changes the arguments and never where the call runs.
    """

    call_id: str
    tool: str
    args: JSON = msgspec.field(default_factory=dict)
    context: dict[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.call_id:
            raise InvalidCall("call_id must not be empty")
        if not self.tool:
            raise InvalidCall("tool must not be empty")
        if not isinstance(self.args, Mapping):
            raise InvalidCall(f"args must be an object, not {type(self.args).__name__}")
        context = self.context
        if not isinstance(context, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in context.items()
        ):
            raise InvalidCall("context must map names to strings")
        msgspec.structs.force_setattr(self, "args", normalize(self.args))

    @property
    def digest(self) -> str:
        return digest(self.args)

    def with_args(self, args: Mapping[str, Any]) -> ToolCall:
        return ToolCall(self.call_id, self.tool, dict(args), self.context)
