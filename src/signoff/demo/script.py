"""The scripted model's grammar: a contract that tests and users rely on (see docs/design.md, "The demo").

It maps a user's text to the tool calls a model would make, deterministically and offline.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PAYMENT = re.compile(r"(\d+(?:\.\d+)?)\s+([A-Za-z]{3})\s+to\s+(\S+)")
_PAY = re.compile(rf"^pay\s+{_PAYMENT.pattern}(?:\s+and\s+{_PAYMENT.pattern})*$", re.IGNORECASE)
_WEATHER = re.compile(r"^weather\s+in\s+(.+)$", re.IGNORECASE)
_WHERE = re.compile(r"^where\s+am\s+i\??$", re.IGNORECASE)
_PLAY = re.compile(r"^play\s+(.+)$", re.IGNORECASE)
_EXPORT = re.compile(r"^export\s+report\s+(\S+)$", re.IGNORECASE)
_CHECK = re.compile(r"^check\s+task\s+(\S+)$", re.IGNORECASE)


EXAMPLES = "pay 50 USD to Hanako · weather in Tokyo · where am I · play lofi beats"
"""What the demo's page suggests writing: the grammar, by example."""
HELP = (
    "I can pay (pay 50 USD to Hanako), check the weather (weather in Tokyo), find you (where am I),"
    " play music (play <track>) or export a report in the background (export report q3, then"
    " check task <id>)."
)
REFUSED = {"denied", "expired", "cancelled", "error"}


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
    if match := _EXPORT.match(text):
        return [("export_report", {"name": match.group(1)})]
    if match := _CHECK.match(text):
        return [("check_task", {"task_id": match.group(1)})]
    return []


def sentence(tool: str, args: dict[str, Any], result: Any, *, failed: str | None = None) -> str:
    """What the model says about one tool result: done, or refused or failed with the reason it was
    given, so tests can check what the model was told."""
    if failed is not None:
        return f"{tool} failed: {failed}"
    if isinstance(result, dict) and "task_id" in result:
        return _task(tool, args, result)
    if isinstance(result, dict) and result.get("status") in REFUSED:
        return _stopped(f"I did not {_doing(tool, args)}: {result.get('message', result['status'])}")
    if isinstance(result, dict) and result.get("success") is False:
        return _stopped(f"I could not {_doing(tool, args)}: {result.get('error', 'it failed')}")
    match tool, result:
        case "process_payment", {"amount": amount, "currency": currency, "recipient": to, "balance": left}:
            return f"Paid {amount} {currency} to {to}; the balance is {left} {currency}."
        case "get_weather", {"city": city, "temperature_c": degrees, "conditions": conditions}:
            return f"It is {degrees} °C and {conditions} in {city}."
        case "get_location", {"latitude": lat, "longitude": lon}:
            return f"You are at {lat}, {lon}."
        case "change_bgm", _:
            return f"Now playing {args.get('track', 'the track')}."
    return f"{tool} returned {json.dumps(result, default=str)}."


def _task(tool: str, args: dict[str, Any], status: dict[str, Any]) -> str:
    """A long-running call's status (seed 004): in flight, or how it ended."""
    what = f"The report {args['name']}" if tool == "export_report" else f"Task {status['task_id']}"
    match status:
        case {"status": "completed", "result": result}:
            return f"{what} is done: {json.dumps(result, default=str)}."
        case {"status": "failed" | "cancelled" | "unknown" as ended, "error": error}:
            return _stopped(f"{what} {ended}: {error}")
        case {"status": state, "progress": progress}:
            return f"{what} is {state} ({progress}%), as task {status['task_id']}."
    return f"{what}: {json.dumps(status, default=str)}."


def _stopped(text: str) -> str:
    """`text` as a sentence: a reason that ends one already (a person's "the tool execution.") gets no
    second full stop."""
    return text if text.rstrip().endswith((".", "!", "?", "…")) else f"{text}."


def _doing(tool: str, args: dict[str, Any]) -> str:
    match tool:
        case "process_payment":
            return f"pay {args.get('amount')} {args.get('currency')} to {args.get('recipient')}"
        case "get_location":
            return "look up your location"
        case "change_bgm":
            return f"play {args.get('track')}"
        case "export_report":
            return f"export the report {args.get('name')}"
    return f"run {tool}"
