"""One rule setting at a time, as a policy file or `rule()` gives it: checked, and turned into its value.

A fault raises `Invalid` with what is wrong; the caller knows the key path (`tools.pay[0].deadline`) and
turns it into a `PolicyError` that names both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from signoff.core.errors import InvalidPrincipal, PolicyError, SignoffError
from signoff.core.expr import Condition, compile_condition
from signoff.core.principal import check_approvers, check_role_entries

Predicate = Callable[[Mapping[str, Any]], bool]
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)\s*")
_UNIT: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Invalid(SignoffError):
    """A fault in one value; the caller knows the key path and turns it into a `PolicyError`."""


def one_of(value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise Invalid(f"must be one of {', '.join(choices)}, not {value!r}")
    return value


def duration(value: Any) -> float:
    if isinstance(value, bool):
        raise Invalid(f"must be a number of seconds or a duration like '30s', not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value) if isinstance(value, float) or abs(value) < 2**53 else math.inf
    elif isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match is None:
            wanted = "a number of seconds or a duration like '250ms', '30s', '5m', '1h'"
            raise Invalid(f"must be {wanted}, not {value!r}")
        seconds = float(match[1]) * _UNIT[match[2]]
    else:
        raise Invalid(f"must be a number of seconds or a duration like '30s', not {type(value).__name__}")
    if not math.isfinite(seconds):
        raise Invalid("must be a finite number of seconds")
    if seconds <= 0:
        raise Invalid(f"must be more than 0 seconds, not {value!r}")
    return seconds


def deadline(value: Any) -> float | None:
    return None if value is None else duration(value)


def seconds(value: Any) -> float | None:
    """A `Rule` holds seconds; durations written as text are parsed by `rule()` and the loaders."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return deadline(value)
    raise Invalid(f"must be a number of seconds or None, not {value!r} (rule() parses durations like '30s')")


def condition(value: Any, allow_text: bool, allow_callable: bool) -> Condition | Predicate | None:
    if value is None or isinstance(value, Condition):
        return value
    if isinstance(value, str) and allow_text:
        return compile_condition(value)  # ExprError passes through: the caller adds the key path
    if callable(value) and allow_callable:
        return cast(Predicate, value)
    wanted = "a condition string" if allow_text else "a Condition (see compile_condition)"
    if allow_callable:
        wanted += " or a callable"
    raise Invalid(f"must be {wanted}, not {type(value).__name__}")


def text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise Invalid(f"must be a string, not {type(value).__name__}")


def approver_list(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    return _entries(value, check_approvers, 'such as ["role:finance", "alice", "requester"]')


def role_list(value: Any) -> tuple[str, ...]:
    return _entries(value, check_role_entries, 'of roles such as ["role:ops"]')


CHANNEL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CHANNEL: Final = re.compile(rf"(webhook|email|slack):{CHANNEL_NAME.pattern}")


def channel_list(value: Any) -> tuple[str, ...]:
    """Channels as `kind:name` (`webhook:ops`); whether each is configured is the server's to check, since
    a policy loads without the channels file."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise Invalid(f'must be a list of channels such as ["webhook:ops"], not {value!r}')
    for entry in value:
        if not isinstance(entry, str) or not _CHANNEL.fullmatch(entry):
            raise Invalid(f"{entry!r} is not a channel: expected webhook:NAME, email:NAME or slack:NAME")
    if len(set(value)) != len(value):
        raise Invalid(f"names a channel twice: {list(value)!r}")
    return tuple(value)


def _entries(
    value: Any, check: Callable[[Sequence[object]], tuple[str, ...]], example: str
) -> tuple[str, ...]:
    """A list of principal entries, each checked by `check`: a string alone is refused, since a rule that
    named `"finance"` where it meant `["role:finance"]` would admit nobody it meant to."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise Invalid(f"must be a list {example}, not {value!r}")
    try:
        return check(value)
    except InvalidPrincipal as exc:
        raise Invalid(str(exc)) from None


def escalation_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple) and not value:
        return ()
    return approver_list(value) or ()


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise Invalid(f"must be a whole number from 1 to 100, not {value!r}")
    return value


def quorum(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise Invalid(f"must be a whole number of approvers from 1 to 100, not {value!r}")
    return value


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"must be true or false, not {value!r}")
    return value


def parse_duration(value: float | str) -> float:
    """Seconds from a number of seconds or a string with a unit: `"250ms"`, `"30s"`, `"5m"`, `"1h"`.

    A bare numeric string is refused: `"30"` could mean seconds or milliseconds, and a deadline is not a
    place to guess.
    """
    try:
        return duration(value)
    except Invalid as exc:
        raise PolicyError(f"duration: {exc}") from None
