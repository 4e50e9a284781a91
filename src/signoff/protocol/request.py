"""The body the AI SDK's `DefaultChatTransport` POSTs, reduced to the three things the server takes from it.

The server owns the conversation (docs/design.md, Trust). From the client's message list it reads only the
last message: a new user message, or the assistant message that carries approval responses and the results
of tools the browser ran. Earlier messages are checked for shape and nothing else. Every fault is a
`BadRequest` naming the field, because a client bug is found fastest from a 400 that says where it is.

What the client sends (ai 6.0.0 to 7.x, `AbstractChat`):
- a new message: `{id, messages, trigger: "submit-message"}`, plus the transport's `body` option; `messageId`
  only when a message is edited;
- after `addToolApprovalResponse({id, approved, reason})`: the same, with `messageId` set to the assistant
  message, whose tool part becomes `{type: "tool-<name>" | "dynamic-tool", toolName?, toolCallId,
  state: "approval-responded", input, approval: {id, approved, reason?, signature?}}` (JSON drops an unset
  `reason`);
- approve-and-run in one message (seed 001): a browser tool's part in `output-available` or `output-error`
  that carries its `approval` too. It is also how a client echoes a part the server already answered, so
  such a response counts only while the chat waits on that approval (see `ApprovalResponse.ran`);
- after `addToolOutput`: the tool part in state `output-available` with `output`, or `output-error` with
  `errorText`. Server-run tools look the same, so the server matches outputs to its pending browser calls
  and ignores the calls it resolved itself.
"""

from __future__ import annotations

from typing import Any, Final, Literal, cast

import msgspec

from signoff.core.approval import Wait as Wait  # the gate's wait modes, as a request may choose one
from signoff.core.errors import SignoffError
from signoff.protocol.limits import MAX_DEPTH, MAX_ID, MAX_MESSAGES, MAX_PARTS, MAX_TEXT, too_deep
from signoff.protocol.shapes import V7_APPROVAL_KEYS, V7_PART_TYPES, shaped

Trigger = Literal["submit-message", "regenerate-message"]

TRIGGERS: Final = ("submit-message", "regenerate-message")
WAITS: Final = ("blocking", "deferred")
ROLES: Final = ("system", "user", "assistant")
TOOL_STATES: Final = (
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
)
CHAT_REQUEST_SCHEMA: Final = {
    "type": "object",
    "description": "What `parse_chat_request` accepts: the DefaultChatTransport body (see the module).",
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID},
        "trigger": {"enum": list(TRIGGERS)},
        "messageId": {"type": "string"},
        "wait": {"enum": list(WAITS)},
        "messages": {
            "type": "array",
            "maxItems": MAX_MESSAGES,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "role": {"enum": list(ROLES)},
                    "parts": {"type": "array", "maxItems": MAX_PARTS, "items": {"type": "object"}},
                },
                "required": ["id", "role", "parts"],
            },
        },
    },
    "required": ["id", "messages"],
}
"""The body as JSON Schema, for the OpenAPI description; the parser below is what checks it."""

_MISSING: Final = object()


class BadRequest(SignoffError, ValueError):
    """A body the server refuses with 400. `field` is a JSON path like `messages[2].parts[0].approval.id`."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def within(self, prefix: str) -> BadRequest:
        """This fault, found in a value checked on its own, as a fault of the value at `prefix`."""
        return BadRequest(
            f"{prefix}{'.' if self.field and self.field[0] != '[' else ''}{self.field}", self.message
        )


class UserMessage(msgspec.Struct, frozen=True, kw_only=True):
    """The new user turn. `text` joins the text parts with newlines; `parts` keeps files and data parts."""

    id: str
    text: str
    parts: tuple[dict[str, Any], ...]


class ApprovalResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A person's answer as the client reports it: a claim the server checks against its pending approval."""

    approval_id: str
    call_id: str
    tool: str
    input: dict[str, Any]
    approved: bool
    reason: str | None = None
    signature: str | None = None
    ran: bool = False
    """The part carries the browser's output too (approve-and-run in one message, seed 001): a response
    only while the chat waits on this approval; otherwise the client is echoing an answered part."""


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A tool result held by the client: set `error_text` means the tool failed."""

    call_id: str
    tool: str
    output: Any = None
    error_text: str | None = None


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """`client_hint` is 7 when the messages hold shapes only ai 7.x produces, else None (see version.py)."""

    chat_id: str
    trigger: Trigger
    message_id: str | None = None
    wait: Wait | None = None
    user_message: UserMessage | None = None
    last_assistant_id: str | None = None
    approvals: tuple[ApprovalResponse, ...] = ()
    outputs: tuple[ToolOutput, ...] = ()
    client_hint: int | None = None


def parse_chat_request(body: bytes) -> ChatRequest:
    """Raises only `BadRequest`, whatever the bytes."""
    if (usual := shaped(body)) is None:  # walked field by field, so that a fault is named exactly
        return _chat_request(_decode(body))
    fields = _fields(usual.fields)
    return _request(fields, _decode(usual.last), usual.last, usual.count - 1, hint=None)


def parse_json(body: bytes | str) -> Any:
    """A JSON document no deeper than `MAX_DEPTH`; raises only `BadRequest`, whatever the bytes."""
    document = _decode(body)
    if too_deep(body.encode() if isinstance(body, str) else body):
        raise BadRequest("body", f"is nested deeper than {MAX_DEPTH} levels")
    return document


def _decode(body: bytes | str) -> Any:
    try:
        return msgspec.json.decode(body)
    except RecursionError:
        raise BadRequest("body", f"is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # msgspec.DecodeError and UnicodeDecodeError are ValueErrors
        raise BadRequest("body", f"is not JSON ({exc})") from None


def parse_chat_id(document: Any) -> str:
    """The chat id of a JSON object that names a chat by its `id`; raises `BadRequest`."""
    return _id(_object(document, "body"), "id", "id")


def _fault(value: Any, expected: str) -> str:
    return "is required" if value is _MISSING else f"must be {expected}, not {_kind(value)}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _object(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(field, _fault(value, "an object"))
    return value


def _list(container: dict[str, Any], key: str, field: str, limit: int) -> list[Any]:
    value = container.get(key, _MISSING)
    if not isinstance(value, list):
        raise BadRequest(field, _fault(value, "an array"))
    if len(value) > limit:
        raise BadRequest(field, f"has {len(value)} entries; at most {limit} are accepted")
    return value


def _id(container: dict[str, Any], key: str, field: str) -> str:
    value = container.get(key, _MISSING)
    if not isinstance(value, str):
        raise BadRequest(field, _fault(value, "a string"))
    if not value:
        raise BadRequest(field, "must not be empty")
    if len(value) > MAX_ID:
        raise BadRequest(field, f"is longer than {MAX_ID} characters")
    if not value.isprintable():
        raise BadRequest(field, "must not contain control characters")
    return value


def _optional_text(container: dict[str, Any], key: str, field: str) -> str | None:
    """Clients written in other languages send null for "not set", so null reads as absent."""
    value = container.get(key)
    if value is None or isinstance(value, str):
        return value
    raise BadRequest(field, f"must be a string, not {_kind(value)}")


def _choice(container: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str | None:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        raise BadRequest(key, f"must be one of {', '.join(allowed)}")
    return value


_Fields = tuple[str, Trigger, str | None, Wait | None]


def _fields(body: dict[str, Any]) -> _Fields:
    """The body's own fields: chat id, trigger, message id and wait."""
    chat_id = _id(body, "id", "id")
    # A bare message list can only mean a submit, so a hand-written client may leave the trigger out.
    trigger = cast(Trigger, _choice(body, "trigger", TRIGGERS) or "submit-message")
    message_id = _id(body, "messageId", "messageId") if body.get("messageId") is not None else None
    return chat_id, trigger, message_id, cast(Wait | None, _choice(body, "wait", WAITS))


def _chat_request(document: Any) -> ChatRequest:
    body = _object(document, "body")
    fields = _fields(body)
    messages = _list(body, "messages", "messages", MAX_MESSAGES)
    if not messages:
        raise BadRequest("messages", "must not be empty")
    hint = None
    for index, message in enumerate(messages):
        try:
            if _check_message(message):
                hint = 7
        except BadRequest as exc:  # field names are built only for a fault: most bodies have none
            raise exc.within(f"messages[{index}]") from None
    last = messages[-1]
    return _request(fields, last, msgspec.json.encode(last), len(messages) - 1, hint)


def _request(fields: _Fields, last: dict[str, Any], sent: bytes, index: int, hint: int | None) -> ChatRequest:
    """The request from the body's own fields and its last message (`sent`: as JSON), the history before
    it checked for shape."""
    field = f"messages[{index}]"
    if too_deep(sent):
        raise BadRequest(field, f"is nested deeper than {MAX_DEPTH} levels")
    user_message = _user_message(last, field) if last["role"] == "user" else None
    assistant = last["role"] == "assistant"
    approvals, outputs = _tool_parts(last["parts"], f"{field}.parts") if assistant else ((), ())
    chat_id, trigger, message_id, wait = fields
    return ChatRequest(
        chat_id=chat_id,
        trigger=trigger,
        message_id=message_id,
        wait=wait,
        user_message=user_message,
        last_assistant_id=last["id"] if assistant else None,
        approvals=approvals,
        outputs=outputs,
        client_hint=hint,
    )


def _check_message(value: Any) -> bool:
    """Checks the shape every message shares; True when it holds a part only ai 7.x produces. A fault's
    field is relative to the message."""
    message = _object(value, "")
    _id(message, "id", "id")
    role = message.get("role", _MISSING)
    if not isinstance(role, str) or role not in ROLES:
        raise BadRequest("role", _fault(role, "one of " + ", ".join(ROLES)))
    v7 = False
    for index, part in enumerate(_list(message, "parts", "parts", MAX_PARTS)):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or not kind:
            _object(part, f"parts[{index}]")
            raise BadRequest(f"parts[{index}].type", "must be a non-empty string")
        if not v7:
            approval = part.get("approval")
            v7 = kind in V7_PART_TYPES or (
                isinstance(approval, dict) and any(key in approval for key in V7_APPROVAL_KEYS)
            )
    return v7


def _user_message(message: dict[str, Any], field: str) -> UserMessage:
    texts: list[str] = []
    size = 0
    for index, part in enumerate(message["parts"]):
        if part["type"] != "text":
            continue
        text = part.get("text", _MISSING)
        if not isinstance(text, str):
            raise BadRequest(f"{field}.parts[{index}].text", _fault(text, "a string"))
        size += len(text)
        if size > MAX_TEXT:
            raise BadRequest(
                f"{field}.parts[{index}].text", f"the message is longer than {MAX_TEXT} characters"
            )
        texts.append(text)
    return UserMessage(id=message["id"], text="\n".join(texts), parts=tuple(message["parts"]))


def _tool_name(part: dict[str, Any], field: str) -> str | None:
    kind: str = part["type"]
    if kind == "dynamic-tool":
        return _id(part, "toolName", f"{field}.toolName")
    if not kind.startswith("tool-"):
        return None
    if not 5 < len(kind) <= 5 + MAX_ID:
        raise BadRequest(f"{field}.type", f"must be 'tool-<name>' with a name of 1 to {MAX_ID} characters")
    return kind[5:]


def _tool_parts(
    parts: list[dict[str, Any]], field: str
) -> tuple[tuple[ApprovalResponse, ...], tuple[ToolOutput, ...]]:
    approvals: dict[str, ApprovalResponse] = {}
    outputs: list[ToolOutput] = []
    calls: set[str] = set()
    for index, part in enumerate(parts):
        where = f"{field}[{index}]"
        tool = _tool_name(part, where)
        if tool is None:
            continue
        call_id = _id(part, "toolCallId", f"{where}.toolCallId")
        if call_id in calls:
            raise BadRequest(f"{where}.toolCallId", f"tool call {call_id!r} appears twice")
        calls.add(call_id)
        state = part.get("state", _MISSING)
        if not isinstance(state, str) or state not in TOOL_STATES:
            raise BadRequest(f"{where}.state", _fault(state, "one of " + ", ".join(TOOL_STATES)))
        if state == "approval-responded":
            response = _approval(part, where, call_id, tool)
            if response.approval_id in approvals:
                raise BadRequest(f"{where}.approval.id", f"approval {response.approval_id!r} appears twice")
            approvals[response.approval_id] = response
        elif state == "output-available":
            outputs.append(ToolOutput(call_id=call_id, tool=tool, output=part.get("output")))
        elif state == "output-error":
            error = part.get("errorText", _MISSING)
            if not isinstance(error, str):
                raise BadRequest(f"{where}.errorText", _fault(error, "a string"))
            outputs.append(ToolOutput(call_id=call_id, tool=tool, error_text=error))
        approval = part.get("approval")
        answered = isinstance(approval, dict) and isinstance(approval.get("approved"), bool)
        if state in ("output-available", "output-error") and answered:  # else only asked: `{id}`
            response = msgspec.structs.replace(_approval(part, where, call_id, tool), ran=True)
            if response.approval_id in approvals:
                raise BadRequest(f"{where}.approval.id", f"approval {response.approval_id!r} appears twice")
            approvals[response.approval_id] = response
    return tuple(approvals.values()), tuple(outputs)


def _approval(part: dict[str, Any], field: str, call_id: str, tool: str) -> ApprovalResponse:
    approval = _object(part.get("approval", _MISSING), f"{field}.approval")
    approval_id = _id(approval, "id", f"{field}.approval.id")
    approved = approval.get("approved", _MISSING)
    if not isinstance(approved, bool):
        raise BadRequest(f"{field}.approval.approved", _fault(approved, "true or false"))
    # signoff only ever asks about calls whose input is an object, so any other input cannot match one.
    args = _object(part.get("input", _MISSING), f"{field}.input")
    return ApprovalResponse(
        approval_id=approval_id,
        call_id=call_id,
        tool=tool,
        input=args,
        approved=approved,
        reason=_optional_text(approval, "reason", f"{field}.approval.reason"),
        signature=_optional_text(approval, "signature", f"{field}.approval.signature"),
    )
