"""`GET /api/openapi.json`: the REST API as OpenAPI 3.1, built from the models that validate its requests.

Request bodies come from the msgspec structs the routes decode (`DecisionBody`, `ChatDecision`,
`CancelBody`) and the chat request's schema, which sits beside its parser; parameters from the values the
routes accept (states, the list limit). Responses are described, not modelled: their JSON shapes are in
the README, and every error is `{"error": {"message", "field"?}}`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from signoff.core.approval import State
from signoff.core.task import TaskState
from signoff.protocol import CHAT_REQUEST_SCHEMA
from signoff.server.approvals import DecisionBody
from signoff.server.chat import ChatDecision
from signoff.server.http import MAX_LIMIT
from signoff.server.tasks import CancelBody

JSON = "application/json"
EVENTS = "text/event-stream"
_REF = "#/components/schemas/{name}"


def _ok(description: str, media: str = JSON) -> dict[str, Any]:
    return {"description": description, "content": {media: {}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": {"$ref": _REF.format(name="Error")}}}}


def _body(name: str) -> dict[str, Any]:
    return {"required": True, "content": {JSON: {"schema": {"$ref": _REF.format(name=name)}}}}


def _path(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT})
REFUSAL_RESPONSES = {
    "401": _error("no credential, or one that proves nothing"),
    "403": _error("the principal may not do this"),
    "404": _error("no such record, or one this principal may not see"),
}


Operation = tuple[str, str, str, dict[str, Any], list[dict[str, Any]], str | None]
"""Method, path, summary, responses beyond the refusals every route can give, parameters, request body."""


def _operations() -> list[Operation]:
    state = _query("state", {"type": "string", "enum": [str(s) for s in State]})
    task_state = _query("state", {"type": "string", "enum": [str(s) for s in TaskState]})
    chat, tool = _query("chat", {"type": "string"}), _query("tool", {"type": "string"})
    active = _query("active", {"enum": ["true", "false"]})
    decided, ended = {"409": _error("decided already")}, {"409": _error("it ended")}
    bad = {"422": _error("a bad body or filter")}
    events, stream = {"200": _ok("events", EVENTS)}, {"200": _ok("the UI message stream", EVENTS)}
    return [
        ("get", "/api/me", "Who the credential says it is", {"200": _ok("the principal")}, [], None),
        ("get", "/api/approvals", "Approvals this principal may see", {"200": _ok("{approvals}"), **bad},
         [state, chat, LIMIT], None),
        ("get", "/api/approvals/feed", "Pending approvals, then every change", events, [], None),
        ("get", "/api/approvals/{id}", "One approval, and where it was announced",
         {"200": _ok("the approval")}, _path("id"), None),
        ("post", "/api/approvals/{id}/decision", "Decide, as the credential's principal",
         {"200": _ok("the approval"), **decided, **bad}, _path("id"), "DecisionBody"),
        ("get", "/api/grants", "Remembered approvals", {"200": _ok("{grants}")}, [chat, tool, active], None),
        ("delete", "/api/grants/{id}", "Revoke a grant", {"200": _ok("the grant"), "409": _error("revoked")},
         _path("id"), None),
        ("get", "/api/tasks", "Tasks (admins)", {"200": _ok("{tasks}"), **bad}, [task_state, chat, LIMIT],
         None),
        ("get", "/api/tasks/feed", "Task changes (admins)", events, [], None),
        ("get", "/api/tasks/{id}", "One task (admins)", {"200": _ok("the task")}, _path("id"), None),
        ("post", "/api/tasks/{id}/cancel", "Ask a task to stop (admins)", {"200": _ok("the task"), **ended},
         _path("id"), "CancelBody"),
        ("post", "/api/chat", "Start or continue a reply (the AI SDK's DefaultChatTransport body)",
         {**stream, "400": _error("a bad body"), "409": _error("a reply runs, or nothing waits")}, [],
         "ChatRequest"),
        ("get", "/api/chat/{id}", "The chat as the server holds it", {"200": _ok("the chat")}, _path("id"),
         None),
        ("get", "/api/chat/{id}/stream", "Follow the running reply", {**stream, "204": {"description": "-"}},
         _path("id"), None),
        ("get", "/api/chat/{id}/events", "The chat's approvals and tasks, live", events, _path("id"), None),
        ("get", "/api/chat/{chat}/tasks", "The chat's tasks", {"200": _ok("{tasks}")}, _path("chat"), None),
        ("post", "/api/chat/{chat}/tasks/{id}/cancel", "Ask the chat's task to stop",
         {"200": _ok("the task"), **ended}, _path("chat", "id"), "Empty"),
        ("post", "/api/chat/{id}/approvals/{approval_id}", "The chat's owner decides",
         {"200": _ok("the approval"), **decided, **bad}, _path("id", "approval_id"), "ChatDecision"),
    ]  # fmt: skip


def openapi() -> dict[str, Any]:
    """The document; the same for every request, so the server builds it once. Event streams are tagged
    `stream`."""
    (_, schemas) = msgspec.json.schema_components([DecisionBody, ChatDecision, CancelBody], ref_template=_REF)
    schemas["ChatRequest"] = CHAT_REQUEST_SCHEMA
    schemas["Empty"] = {"type": "object"}
    schemas["Error"] = {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {"message": {"type": "string"}, "field": {"type": "string"}},
                "required": ["message"],
            }
        },
        "required": ["error"],
    }
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, responses, parameters, body in _operations():
        operation: dict[str, Any] = {"summary": summary, "responses": {**responses, **REFUSAL_RESPONSES}}
        if parameters:
            operation["parameters"] = parameters
        if body is not None:
            operation["requestBody"] = _body(body)
        if EVENTS in responses.get("200", {}).get("content", {}):
            operation["tags"] = ["stream"]
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "signoff", "version": "1", "description": "Approvals for AI agents' tool calls."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
