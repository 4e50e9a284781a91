"""The scripted model's grammar: a contract that tests and users rely on (see DESIGN.md, "The demo").

It maps a user's text to the tool calls a model would make, deterministically and offline.
"""

from __future__ import annotations

import re
from typing import Any

_PAYMENT = re.compile(r"(\d+(?:\.\d+)?)\s+([A-Za-z]{3})\s+to\s+(\S+)")
_PAY = re.compile(rf"^pay\s+{_PAYMENT.pattern}(?:\s+and\s+{_PAYMENT.pattern})*$", re.IGNORECASE)
_WEATHER = re.compile(r"^weather\s+in\s+(.+)$", re.IGNORECASE)
_WHERE = re.compile(r"^where\s+am\s+i\??$", re.IGNORECASE)
_PLAY = re.compile(r"^play\s+(.+)$", re.IGNORECASE)


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def plan(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls the scripted model makes for `text`, all in one step; empty means it just replies."""
    text = text.strip()
    if _PAY.match(text):
        return [
            (
                "process_payment",
                {"amount": _number(amount), "currency": currency.upper(), "recipient": recipient},
            )
            for amount, currency, recipient in _PAYMENT.findall(text)
        ]
    if match := _WEATHER.match(text):
        return [("get_weather", {"city": match.group(1).strip()})]
    if _WHERE.match(text):
        return [("get_location", {})]
    if match := _PLAY.match(text):
        return [("change_bgm", {"track": match.group(1).strip()})]
    return []
