"""JSON responses and errors, one shape everywhere: `{"error": {"message", "field"?}}` with a 4xx."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

_encode = msgspec.json.Encoder().encode


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_encode(data), status, headers, media_type="application/json")


def error(status: int, message: str, field: str | None = None, **extra: Any) -> Response:
    body: dict[str, Any] = {"message": message}
    if field is not None:
        body["field"] = field
    return json_response({"error": body, **extra}, status)
