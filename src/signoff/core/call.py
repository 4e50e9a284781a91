"""The call: one tool invocation, and the digest that binds a decision to exactly these arguments."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import msgspec

from signoff.core.errors import InvalidCall

JSON = dict[str, Any]


def _normalize(value: Any, path: str) -> Any:
    """Reduce a value to the JSON data model, so that equal JSON gives equal bytes.

    Integral floats become ints because JavaScript, where most tool arguments are produced, has one number
    type: `50` and `50.0` are the same amount and must not digest differently.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidCall(f"{path or 'args'}: {value} is not a JSON number")
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidCall(f"{path or 'args'}: key {key!r} is not a string")
            out[key] = _normalize(item, f"{path}.{key}" if path else key)
        return out
    if isinstance(value, list | tuple):
        return [_normalize(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise InvalidCall(f"{path or 'args'}: {type(value).__name__} is not JSON")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8."""
    return msgspec.json.encode(_normalize(value, ""), order="sorted")


def digest(args: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(args)).hexdigest()


class ToolCall(msgspec.Struct, frozen=True, gc=False):
    """One tool invocation as the model asked for it.

    `args` is normalized on construction, so a call that cannot be digested never exists.
    """

    call_id: str
    tool: str
    args: JSON = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.call_id:
            raise InvalidCall("call_id must not be empty")
        if not self.tool:
            raise InvalidCall("tool must not be empty")
        if not isinstance(self.args, Mapping):
            raise InvalidCall(f"args must be an object, not {type(self.args).__name__}")
        msgspec.structs.force_setattr(self, "args", _normalize(self.args, ""))

    @property
    def digest(self) -> str:
        return digest(self.args)

    def with_args(self, args: Mapping[str, Any]) -> ToolCall:
        return ToolCall(self.call_id, self.tool, dict(args))
