"""JSON responses and errors, one shape everywhere: `{"error": {"message", "field"?}}` with a 4xx; the
kinds of refusal every route raises, and the one table of their statuses."""

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
    CallMismatch,
    EditRefused,
    InvalidCall,
    InvalidDecision,
    LedgerUnavailable,
    NotAnApprover,
    NotFound,
    SignoffError,
    Spent,
    StaleChat,
    TaskFinished,
    Unproven,
    Unstorable,
)
from signoff.integrations.chat.trust import Malformed, NotAllowed, OutOfTurn, Unknown, Untrusted
from signoff.protocol import BadRequest, parse_json
from signoff.server.refusals import Kind

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


class Refusal(SignoffError):
    """A request the server will not serve as it was sent: its kind says why, and `STATUS` the status;
    `field` names the part of the request at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class BadInput(Refusal):
    """Input that can't be read at all: a path, a header, a form or a frame no client of ours sends."""


class TooSlow(Refusal):
    """A body that did not arrive in time."""


class TooLarge(Refusal):
    """A body over what the route takes."""


class NotJson(Refusal):
    """A state-changing request that is not `application/json` (a form route's is its own)."""


class Unprocessable(Refusal):
    """A body or a query that reads, but does not fit what the route takes."""


class LinkGone(Refusal):
    """A link that was genuine, and no longer is: it expired."""


class Forbidden(Refusal):
    """A request refused for who it is from (or whom it does not say it is from): the server answers it
    and audits `why` about `subject` (the surface refused), counted per source and second, as `kind`, when
    the request carried no credential (see `server.refusals`)."""

    action = "refuse"

    def __init__(self, why: str, kind: Kind = "forbidden", subject: str = "api") -> None:
        super().__init__(why)
        self.why = why
        self.kind: Kind = kind
        self.subject = subject


class NeedsCredential(Forbidden):
    """A request that needs a credential and carried none, or one that proves nothing: 401, with the
    `WWW-Authenticate` challenge."""

    action = "unauthorized"

    def __init__(self, why: str, kind: Kind = "no-credential", subject: str = "api") -> None:
        super().__init__(why, kind, subject)


STATUS: Final[dict[type[SignoffError], int]] = {
    Unknown: 404,
    NotFound: 404,
    NeedsCredential: 401,
    Forbidden: 403,
    NotAllowed: 403,
    NotAnApprover: 403,
    OutOfTurn: 409,
    AlreadyDecided: 409,
    AlreadyVoted: 409,
    Spent: 409,
    AlreadyRevoked: 409,
    EditRefused: 409,
    Unproven: 409,
    TaskFinished: 409,
    StaleChat: 409,
    CallMismatch: 409,
    LinkGone: 410,
    BadInput: 400,
    BadRequest: 400,
    Malformed: 400,
    Untrusted: 400,
    Unstorable: 400,
    TooSlow: 408,
    TooLarge: 413,
    NotJson: 415,
    Unprocessable: 422,
    InvalidDecision: 422,
    InvalidCall: 422,
    LedgerUnavailable: 503,
}
"""The HTTP status of each refusal, found by the error's kind (its nearest class here): the one place
statuses are chosen, for every route, page and the edge. An error of no kind here is a bug, and a 500."""
SERVED: Final = 200
NOTHING_RUNNING: Final = 204
"""What resuming a chat answers while no reply runs in it."""
UNAVAILABLE: Final = STATUS[LedgerUnavailable]
"""What a probe answers while this worker can't serve."""
RETRY_AFTER: Final = 5
"""Seconds a client is asked to wait before it sends a request the ledger could not take again: the server
looks at its ledger twice a second, and an outage shorter than this is over by then."""


def status_of(exc: SignoffError) -> int | None:
    return next((STATUS[kind] for kind in type(exc).__mro__ if kind in STATUS), None)


def refusal(exc: SignoffError, **extra: Any) -> Response:
    """`exc` as its 4xx (or 503): its message, the request field that caused it, and `extra` (the record
    it is about, say). A 401 carries the bearer challenge, and a ledger that could not answer
    `Retry-After`."""
    status = status_of(exc)
    if status is None:
        raise exc
    message = exc.message if isinstance(exc, BadRequest) else str(exc)  # its field is said apart
    answer = error(status, message, getattr(exc, "field", None), **extra)
    if isinstance(exc, NeedsCredential):
        answer.headers["www-authenticate"] = "Bearer"
    if isinstance(exc, LedgerUnavailable):
        answer.headers["retry-after"] = str(RETRY_AFTER)
    return answer


async def read_body(request: Request, schema: type[T], *, limit: int, what: str) -> T:
    """The body decoded as `schema`: `TooLarge` when over `limit` bytes, `Unprocessable` when it doesn't
    fit (or nests deeper than `MAX_DEPTH`)."""
    body = await request.body()
    if len(body) > limit:
        raise TooLarge(f"the {what} body is over {limit} bytes")
    try:
        document = parse_json(body)
        return msgspec.convert(document, type=schema)
    except BadRequest as exc:
        raise Unprocessable(f"the {what} {exc.message}") from None
    except msgspec.ValidationError as exc:
        raise Unprocessable(f"invalid {what}: {exc}", _field_of(exc)) from None


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
        """Raises `Unprocessable`, naming the parameter, for a state or limit that cannot be used."""
        query, states = request.query_params, list(states)
        state = query.get("state")
        if state is not None and state not in states:
            raise Unprocessable(f"state must be one of {', '.join(states)}, not {state!r}", "state")
        limit = query.get("limit", "")
        if limit and not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= MAX_LIMIT):
            raise Unprocessable(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}", "limit")
        return cls(query.get("chat"), state, int(limit) if limit else None)


def _field_of(exc: msgspec.ValidationError) -> str | None:
    """msgspec names the path as `$.field`; the API names it without the `$.`."""
    message = str(exc)
    _, found, path = message.partition("at `$.")
    return path.split("`", 1)[0] if found else None
