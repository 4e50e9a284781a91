"""JSON responses and errors, one shape everywhere: `{"error": {"message", "field"?}}` with a 4xx."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from signoff.core.errors import (
    AlreadyDecided,
    AlreadyRevoked,
    AlreadyVoted,
    EditRefused,
    InvalidCall,
    InvalidDecision,
    LedgerUnavailable,
    NotAnApprover,
    NotFound,
    SignoffError,
    StaleChat,
    TaskFinished,
    Unproven,
    Unstorable,
)
from signoff.integrations.trust import Malformed, NotAllowed, OutOfTurn, Unknown, Untrusted
from signoff.protocol import BadRequest, parse_json

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode

CHAT_BODY = 1024 * 1024
"""Bytes of a chat request (the client's whole message list) or a live frame: the largest body taken."""
DECISION_BODY = 64 * 1024
"""Bytes of a decision, edited arguments included."""


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_encode(data), status, headers, media_type="application/json")


def error(status: int, message: str, field: str | None = None, **extra: Any) -> Response:
    body: dict[str, Any] = {"message": message}
    if field is not None:
        body["field"] = field
    return json_response({"error": body, **extra}, status)


STATUS: Final[dict[type[SignoffError], int]] = {
    Unknown: 404,
    NotFound: 404,
    NotAllowed: 403,
    NotAnApprover: 403,
    OutOfTurn: 409,
    AlreadyDecided: 409,
    AlreadyVoted: 409,
    AlreadyRevoked: 409,
    EditRefused: 409,
    Unproven: 409,
    TaskFinished: 409,
    StaleChat: 409,
    Malformed: 400,
    Untrusted: 400,
    Unstorable: 400,
    InvalidDecision: 422,
    InvalidCall: 422,
    LedgerUnavailable: 503,
}
"""The HTTP status of each refusal a route answers, found by the error's kind (its nearest class here):
the one place statuses are chosen. An error of no kind here is a bug, and a 500."""


def status_of(exc: SignoffError) -> int | None:
    return next((STATUS[kind] for kind in type(exc).__mro__ if kind in STATUS), None)


def refusal(exc: SignoffError, **extra: Any) -> Response:
    """`exc` as its 4xx (or 503): its message, the request field that caused it, and `extra` (the record
    it is about, say)."""
    status = status_of(exc)
    if status is None:
        raise exc
    return error(status, str(exc), getattr(exc, "field", None), **extra)


class BadBody(SignoffError):
    """A request body (or query) that can't be used; `response` says why."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.response = error(status, message, field)


async def read_body(request: Request, schema: type[T], *, limit: int, what: str) -> T:
    """The body decoded as `schema`, or `BadBody`: 413 when over `limit` bytes, 422 when it doesn't fit
    (or nests deeper than `MAX_DEPTH`)."""
    body = await request.body()
    if len(body) > limit:
        raise BadBody(413, f"the {what} body is over {limit} bytes")
    try:
        document = parse_json(body)
        return msgspec.convert(document, type=schema)
    except BadRequest as exc:
        raise BadBody(422, f"the {what} {exc.message}") from None
    except msgspec.ValidationError as exc:
        raise BadBody(422, f"invalid {what}: {exc}", _field_of(exc)) from None


MAX_LIMIT = 10_000
"""The most records one list answer holds."""


@dataclass(frozen=True)
class ListQuery:
    """What a list route filters by: `?chat=`, `?state=` (one of the record's states) and `?limit=`."""

    chat: str | None
    state: str | None
    limit: int | None

    @classmethod
    def of(cls, request: Request, states: Iterable[str]) -> ListQuery:
        """Raises `BadBody` (422, naming the parameter) for a state or limit that cannot be used."""
        query, states = request.query_params, list(states)
        state = query.get("state")
        if state is not None and state not in states:
            raise BadBody(422, f"state must be one of {', '.join(states)}, not {state!r}", "state")
        limit = query.get("limit", "")
        if limit and not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= MAX_LIMIT):
            raise BadBody(422, f"limit must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}", "limit")
        return cls(query.get("chat"), state, int(limit) if limit else None)


def _field_of(exc: msgspec.ValidationError) -> str | None:
    """msgspec names the path as `$.field`; the API names it without the `$.`."""
    message = str(exc)
    _, found, path = message.partition("at `$.")
    return path.split("`", 1)[0] if found else None
