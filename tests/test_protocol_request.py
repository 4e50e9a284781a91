"""Parsing the `DefaultChatTransport` body: real client bodies in, three facts out, BadRequest on any fault.

The bodies below were captured from the `ai` package's own `AbstractChat` + `DefaultChatTransport` (6.0.0 and
7.0.173, in Node with a stub fetch) driving `sendMessage`, `addToolApprovalResponse` and `addToolOutput`.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signoff.core.errors import SignoffError
from signoff.protocol import ApprovalResponse, BadRequest, ChatRequest, ToolOutput, parse_chat_request
from signoff.protocol import request as request_module
from signoff.protocol.limits import MAX_DEPTH, MAX_ID, MAX_MESSAGES, MAX_TEXT, too_deep
from signoff.protocol.shapes import shaped

USER_TURN: dict[str, Any] = {
    "parts": [{"type": "text", "text": "pay 10 USD to Jiro and 20 USD to Saburo"}],
    "id": "gen_1",
    "role": "user",
}
FIRST: dict[str, Any] = {
    "wait": "deferred",
    "id": "chat_1",
    "messages": [USER_TURN],
    "trigger": "submit-message",
}
PAY_10 = {"amount": 10, "currency": "USD", "recipient": "Jiro"}
PAY_20 = {"amount": 20, "currency": "USD", "recipient": "Saburo"}
# After addToolApprovalResponse x3 (approve, deny with a reason, approve a dynamic tool), ai 6.0.0.
APPROVALS_V6: dict[str, Any] = {
    "wait": "deferred",
    "id": "chat_1",
    "messages": [
        USER_TURN,
        {
            "id": "msg_a",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Paying.", "state": "done"},
                {
                    "type": "tool-process_payment",
                    "toolCallId": "call_1",
                    "state": "approval-responded",
                    "input": PAY_10,
                    "approval": {"id": "apr_1", "approved": True},
                },
                {
                    "type": "tool-process_payment",
                    "toolCallId": "call_2",
                    "state": "approval-responded",
                    "input": PAY_20,
                    "approval": {"id": "apr_2", "approved": False, "reason": "too much"},
                },
                {
                    "type": "dynamic-tool",
                    "toolName": "lookup",
                    "toolCallId": "call_3",
                    "state": "approval-responded",
                    "input": {"q": "x"},
                    "approval": {"id": "apr_3", "approved": True},
                },
            ],
        },
    ],
    "trigger": "submit-message",
    "messageId": "msg_a",
}
# ai 7.0.173 sends the same, except that the approval keeps the signature the server put on the request.
APPROVALS_V7 = copy.deepcopy(APPROVALS_V6)
for _index, _part in enumerate(APPROVALS_V7["messages"][1]["parts"][2:], start=1):
    _part["approval"] = {"id": f"apr_{_index}", "signature": f"sig_apr_{_index}", **_part["approval"]}
# The next turn: the earlier tool parts were resolved by the server, then the browser ran get_location.
FRONTEND_OUTPUT: dict[str, Any] = {
    "wait": "deferred",
    "id": "chat_1",
    "messages": [
        USER_TURN,
        {
            "id": "msg_a",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-process_payment",
                    "toolCallId": "call_1",
                    "state": "output-available",
                    "input": PAY_10,
                    "output": {"success": True},
                    "approval": {"id": "apr_1", "approved": True},
                },
                {
                    "type": "tool-process_payment",
                    "toolCallId": "call_2",
                    "state": "output-denied",
                    "input": PAY_20,
                    "approval": {"id": "apr_2", "approved": False, "reason": "too much"},
                },
                {"type": "step-start"},
                {"type": "text", "text": "Done.", "state": "done"},
            ],
        },
        {"parts": [{"type": "text", "text": "where am I"}], "id": "gen_4", "role": "user"},
        {
            "id": "msg_b",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-get_location",
                    "toolCallId": "call_4",
                    "state": "output-available",
                    "input": {},
                    "output": {"city": "Tokyo"},
                },
            ],
        },
    ],
    "trigger": "submit-message",
    "messageId": "msg_b",
}
VALID = [FIRST, APPROVALS_V6, APPROVALS_V7, FRONTEND_OUTPUT]


def parse(body: Any) -> ChatRequest:
    return parse_chat_request(msgspec.json.encode(body))


def with_last(body: dict[str, Any], *parts: dict[str, Any], role: str = "assistant") -> dict[str, Any]:
    changed = copy.deepcopy(body)
    changed["messages"][-1] = {"id": "msg_x", "role": role, "parts": list(parts)}
    return changed


def tool_part(**fields: Any) -> dict[str, Any]:
    return {"type": "tool-pay", "toolCallId": "call_9", "state": "approval-responded", "input": {}} | fields


def test_a_first_user_message() -> None:
    request = parse(FIRST)
    assert request.chat_id == "chat_1"
    assert request.trigger == "submit-message"
    assert request.wait == "deferred"
    assert request.message_id is None
    assert request.user_message is not None
    assert request.user_message.id == "gen_1"
    assert request.user_message.text == "pay 10 USD to Jiro and 20 USD to Saburo"
    assert request.user_message.parts == tuple(USER_TURN["parts"])
    assert (request.last_assistant_id, request.approvals, request.outputs) == (None, (), ())
    assert request.client_hint is None


def test_approval_responses_approved_denied_and_dynamic() -> None:
    request = parse(APPROVALS_V6)
    assert request.user_message is None
    assert request.last_assistant_id == "msg_a"
    assert request.message_id == "msg_a"
    assert request.approvals == (
        ApprovalResponse(
            approval_id="apr_1", call_id="call_1", tool="process_payment", input=PAY_10, approved=True
        ),
        ApprovalResponse(
            approval_id="apr_2",
            call_id="call_2",
            tool="process_payment",
            input=PAY_20,
            approved=False,
            reason="too much",
        ),
        ApprovalResponse(
            approval_id="apr_3", call_id="call_3", tool="lookup", input={"q": "x"}, approved=True
        ),
    )
    assert request.outputs == ()


def test_v7_approval_responses_carry_the_signature_back() -> None:
    request = parse(APPROVALS_V7)
    assert [approval.signature for approval in request.approvals] == ["sig_apr_1", "sig_apr_2", "sig_apr_3"]
    assert [approval.approved for approval in request.approvals] == [True, False, True]
    assert request.client_hint is None


def test_a_frontend_tool_output_and_no_replayed_approvals() -> None:
    request = parse(FRONTEND_OUTPUT)
    assert request.last_assistant_id == "msg_b"
    assert request.approvals == ()
    assert request.outputs == (ToolOutput(call_id="call_4", tool="get_location", output={"city": "Tokyo"}),)


def test_an_output_part_with_its_approval_is_reported_as_ran_for_the_server_to_judge() -> None:
    """Approve-and-run in one message (seed 001) and a client echoing a part the server answered look the
    same: both are reported, marked `ran`, and only an approval the chat waits on counts (see trust).
    A denied part is never a response."""
    request = parse(with_last(FIRST, *FRONTEND_OUTPUT["messages"][1]["parts"]))
    assert [(a.approval_id, a.call_id, a.approved, a.ran) for a in request.approvals] == [
        ("apr_1", "call_1", True, True)
    ]
    assert request.outputs == (
        ToolOutput(call_id="call_1", tool="process_payment", output={"success": True}),
    )


def test_an_output_part_whose_approval_was_only_asked_is_an_output_alone() -> None:
    """A call the server handed over after a decision made elsewhere keeps the client's `approval: {id}`
    from the question: no answer, so no response, and never a 400."""
    part = tool_part(state="output-available", output={"city": "Tokyo"}, approval={"id": "apr_1"})
    request = parse(with_last(FIRST, part))
    assert request.approvals == ()
    assert request.outputs == (ToolOutput(call_id=part["toolCallId"], tool="pay", output={"city": "Tokyo"}),)


def test_a_frontend_tool_error_and_a_dynamic_output() -> None:
    request = parse(
        with_last(
            FIRST,
            tool_part(state="output-error", errorText="permission denied", toolCallId="c1"),
            {
                "type": "dynamic-tool",
                "toolName": "mcp.search",
                "toolCallId": "c2",
                "state": "output-available",
            },
            tool_part(state="input-streaming", toolCallId="c3"),
        )
    )
    assert request.outputs == (
        ToolOutput(call_id="c1", tool="pay", error_text="permission denied"),
        ToolOutput(call_id="c2", tool="mcp.search", output=None),
    )


def test_text_parts_join_and_other_parts_are_kept() -> None:
    parts = [
        {"type": "text", "text": "look"},
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="},
        {"type": "text", "text": "at this"},
    ]
    request = parse(with_last(FIRST, *parts, role="user"))
    assert request.user_message is not None
    assert request.user_message.text == "look\nat this"
    assert request.user_message.parts == tuple(parts)


def test_optional_fields_and_extras() -> None:
    body = FIRST | {"messageId": None, "wait": None, "trigger": None, "model": "x", "metadata": {"a": 1}}
    request = parse(body)
    assert (request.message_id, request.wait, request.trigger) == (None, None, "submit-message")
    request = parse({"id": "c", "messages": [USER_TURN]})
    assert request.trigger == "submit-message"
    assert parse(FIRST | {"trigger": "regenerate-message", "wait": "blocking"}).wait == "blocking"
    reasonless = tool_part(approval={"id": "a", "approved": True, "reason": None, "signature": None})
    assert parse(with_last(FIRST, reasonless)).approvals[0].reason is None


def test_a_system_last_message_gives_nothing_to_act_on() -> None:
    request = parse(with_last(FIRST, {"type": "text", "text": "be brief"}, role="system"))
    assert (request.user_message, request.last_assistant_id, request.approvals) == (None, None, ())


@pytest.mark.parametrize(
    "part",
    [
        {"type": "custom", "kind": "x"},
        {"type": "reasoning-file", "mediaType": "image/png", "url": "u"},
        {"type": "steering-message", "id": "s", "parts": []},
        tool_part(state="approval-requested", approval={"id": "a", "isAutomatic": True}),
        tool_part(state="approval-requested", approval={"id": "a", "requestReason": "risky"}),
    ],
)
def test_parts_only_v7_produces_hint_at_v7(part: dict[str, Any]) -> None:
    body = copy.deepcopy(FRONTEND_OUTPUT)
    body["messages"][1]["parts"].append(part)
    assert parse(body).client_hint == 7


def bad(body: Any) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_chat_request(body if isinstance(body, bytes) else msgspec.json.encode(body))
    return caught.value


def without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


def message(**fields: Any) -> dict[str, Any]:
    return {"id": "m", "role": "user", "parts": []} | fields


ERRORS: list[tuple[str, Any, str]] = [
    ("not json", b"{nope", "body"),
    ("not utf-8", b'{"id": "\xff"}', "body"),
    ("empty", b"", "body"),
    ("too deep", b"[" * 5000 + b"]" * 5000, "body"),
    ("an array", [FIRST], "body"),
    ("a string", "hello", "body"),
    ("no id", without(FIRST, "id"), "id"),
    ("empty id", FIRST | {"id": ""}, "id"),
    ("numeric id", FIRST | {"id": 7}, "id"),
    ("huge id", FIRST | {"id": "x" * (MAX_ID + 1)}, "id"),
    ("no messages", without(FIRST, "messages"), "messages"),
    ("messages an object", FIRST | {"messages": {"0": USER_TURN}}, "messages"),
    ("no message", FIRST | {"messages": []}, "messages"),
    ("too many", FIRST | {"messages": [USER_TURN] * (MAX_MESSAGES + 1)}, "messages"),
    ("bad trigger", FIRST | {"trigger": "resume-stream"}, "trigger"),
    ("trigger a list", FIRST | {"trigger": ["submit-message"]}, "trigger"),
    ("bad wait", FIRST | {"wait": "forever"}, "wait"),
    ("empty messageId", FIRST | {"messageId": ""}, "messageId"),
    ("message a string", FIRST | {"messages": [USER_TURN, "hi"]}, "messages[1]"),
    ("message without id", FIRST | {"messages": [without(USER_TURN, "id")]}, "messages[0].id"),
    ("message without role", FIRST | {"messages": [without(USER_TURN, "role")]}, "messages[0].role"),
    ("bad role", FIRST | {"messages": [USER_TURN, message(role="tool")]}, "messages[1].role"),
    ("unhashable role", FIRST | {"messages": [message(role=["user"])]}, "messages[0].role"),
    ("message without parts", FIRST | {"messages": [without(USER_TURN, "parts")]}, "messages[0].parts"),
    ("part a string", FIRST | {"messages": [message(parts=["hi"])]}, "messages[0].parts[0]"),
    (
        "part without type",
        FIRST | {"messages": [message(parts=[{"text": "x"}])]},
        "messages[0].parts[0].type",
    ),
    (
        "text not a string",
        with_last(FIRST, {"type": "text", "text": 1}, role="user"),
        "messages[0].parts[0].text",
    ),
    (
        "text too long",
        with_last(
            FIRST, {"type": "text", "text": "x" * MAX_TEXT}, {"type": "text", "text": "y"}, role="user"
        ),
        "messages[0].parts[1].text",
    ),
    (
        "tool without call id",
        with_last(FIRST, without(tool_part(), "toolCallId")),
        "messages[0].parts[0].toolCallId",
    ),
    ("tool with empty name", with_last(FIRST, tool_part(type="tool-")), "messages[0].parts[0].type"),
    (
        "dynamic tool without name",
        with_last(FIRST, tool_part(type="dynamic-tool")),
        "messages[0].parts[0].toolName",
    ),
    ("tool with bad state", with_last(FIRST, tool_part(state="done")), "messages[0].parts[0].state"),
    (
        "duplicate call",
        with_last(FIRST, tool_part(state="input-available"), tool_part(state="input-available")),
        "messages[0].parts[1].toolCallId",
    ),
    ("responded without approval", with_last(FIRST, tool_part()), "messages[0].parts[0].approval"),
    (
        "approval not an object",
        with_last(FIRST, tool_part(approval=True)),
        "messages[0].parts[0].approval",
    ),
    (
        "approval without id",
        with_last(FIRST, tool_part(approval={"approved": True})),
        "messages[0].parts[0].approval.id",
    ),
    (
        "approval without decision",
        with_last(FIRST, tool_part(approval={"id": "a"})),
        "messages[0].parts[0].approval.approved",
    ),
    (
        "approval decided by a string",
        with_last(FIRST, tool_part(approval={"id": "a", "approved": "yes"})),
        "messages[0].parts[0].approval.approved",
    ),
    (
        "approval reason a number",
        with_last(FIRST, tool_part(approval={"id": "a", "approved": False, "reason": 3})),
        "messages[0].parts[0].approval.reason",
    ),
    (
        "approval input a string",
        with_last(FIRST, tool_part(input="{}", approval={"id": "a", "approved": True})),
        "messages[0].parts[0].input",
    ),
    (
        "duplicate approval",
        with_last(
            FIRST,
            tool_part(approval={"id": "a", "approved": True}),
            tool_part(toolCallId="call_10", approval={"id": "a", "approved": False}),
        ),
        "messages[0].parts[1].approval.id",
    ),
    (
        "output error without text",
        with_last(FIRST, tool_part(state="output-error")),
        "messages[0].parts[0].errorText",
    ),
]


@pytest.mark.parametrize(("body", "field"), [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS])
def test_each_fault_names_its_field(body: Any, field: str) -> None:
    assert bad(body).field == field


def test_the_field_path_points_into_later_messages() -> None:
    body = copy.deepcopy(APPROVALS_V6)
    del body["messages"][1]["parts"][3]["approval"]["approved"]
    error = bad(body)
    assert error.field == "messages[1].parts[3].approval.approved"
    assert error.message == "is required"


def test_only_the_last_message_is_held_to_the_nesting_bound() -> None:
    """The history a client sends is checked for shape only (signoff holds its own): nesting deep in an
    earlier message is never used, so it costs nothing to leave; in the last message it is refused."""
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    earlier = message(id="old", parts=[{"type": "data-x", "data": deep}])
    request = parse_chat_request(msgspec.json.encode(FIRST | {"messages": [earlier, USER_TURN]}))
    assert request.user_message is not None and request.user_message.id == USER_TURN["id"]
    last = message(id="new", parts=[{"type": "text", "text": "hi"}, {"type": "data-x", "data": deep}])
    error = bad(FIRST | {"messages": [USER_TURN, last]})
    assert (error.field, error.message) == ("messages[1]", f"is nested deeper than {MAX_DEPTH} levels")


def test_bad_request_is_a_signoff_value_error_naming_the_field() -> None:
    error = bad(FIRST | {"wait": "forever"})
    assert isinstance(error, SignoffError) and isinstance(error, ValueError)
    assert (error.field, error.message) == ("wait", "must be one of blocking, deferred")
    assert str(error) == "wait: must be one of blocking, deferred"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=24,
)
KEYS = ["id", "role", "parts", "type", "text", "toolCallId", "toolName", "state", "approval", "approved"]
WORDS = [
    "tool-pay",
    "dynamic-tool",
    "approval-responded",
    "output-error",
    "output-available",
    "user",
    "assistant",
    "custom",
    "reasoning-file",
    "steering-message",
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


@st.composite
def near_valid(draw: st.DrawFn) -> Any:
    """A real client body with a few values replaced, removed or retyped: the faults a parser misses."""
    body: Any = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths(body)[1:]))
        replacement = draw(json_values | st.sampled_from(WORDS) | st.sampled_from(KEYS))
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = replacement
    return body


def parses_or_refuses(raw: bytes) -> ChatRequest | BadRequest:
    try:
        return parse_chat_request(raw)
    except BadRequest as error:
        return error


def check(outcome: ChatRequest | BadRequest) -> None:
    if isinstance(outcome, BadRequest):
        assert outcome.field and outcome.message and str(outcome) == f"{outcome.field}: {outcome.message}"
    else:
        assert isinstance(outcome, ChatRequest)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_bytes(raw: bytes) -> None:
    check(parses_or_refuses(raw))


@FUZZ
@given(json_values)
def test_fuzz_json_values(value: Any) -> None:
    check(parses_or_refuses(msgspec.json.encode(value)))


@FUZZ
@given(near_valid())
def test_fuzz_near_valid_bodies(body: Any) -> None:
    check(parses_or_refuses(msgspec.json.encode(body)))


def walked(raw: bytes) -> ChatRequest | BadRequest:
    """What the field-by-field walk alone makes of a body: the reading every body once had."""
    try:
        return request_module._chat_request(request_module._decode(raw))
    except BadRequest as error:
        return error


def same(one: ChatRequest | BadRequest, other: ChatRequest | BadRequest) -> bool:
    if isinstance(one, BadRequest) or isinstance(other, BadRequest):
        return type(one) is type(other) and str(one) == str(other)
    return one == other


@FUZZ
@given(near_valid())
def test_the_typed_pass_reads_every_body_as_the_walk_does(body: Any) -> None:
    """The one-pass reading of a usual body must accept, refuse and read exactly what the walk does."""
    raw = msgspec.json.encode(body)
    assert same(parses_or_refuses(raw), walked(raw))


@pytest.mark.parametrize("body", VALID, ids=range(len(VALID)))
def test_real_bodies_take_the_typed_pass_unless_they_hold_a_7x_part(body: Any) -> None:
    raw = msgspec.json.encode(body)
    request = parse_chat_request(raw)
    assert (shaped(raw) is None) == (request.client_hint == 7)


@pytest.mark.parametrize("word", ["custom", "isAutomatic", "steering-message", '"requestReason"'])
def test_a_message_that_only_says_a_7x_word_is_read_as_any_other(word: str) -> None:
    """The typed pass finds a 7.x shape by where it is, not by its word anywhere in the body: a user who
    writes one of those words is read as any other, in one pass, and as the walk reads them."""
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": word}]}
    raw = msgspec.json.encode({"id": "c1", "messages": [message], "trigger": "submit-message"})
    request = parse_chat_request(raw)
    assert shaped(raw) is not None and same(request, walked(raw))
    assert request.client_hint is None and request.user_message is not None
    assert request.user_message.text == word


@pytest.mark.parametrize(
    "shape",
    [
        {"type": "custom", "kind": "x"},
        {"type": "reasoning-file", "mediaType": "image/png", "url": "data:,"},
        {"type": "steering-message", "text": "hi"},
        tool_part(state="approval-responded", approval={"id": "a", "approved": True, "isAutomatic": False}),
        tool_part(state="approval-requested", approval={"id": "a", "requestReason": None}),
    ],
    ids=["custom", "reasoning-file", "steering-message", "isAutomatic", "requestReason"],
)
def test_a_7x_shape_anywhere_in_the_history_makes_it_a_7x_request(shape: dict[str, Any]) -> None:
    """Earlier messages are read for shape only, but a 7.x part or approval field in any of them says
    which client sent the request; the typed pass leaves such a body to the walk, which says so."""
    earlier = {"id": "a0", "role": "assistant", "parts": [{"type": "step-start"}, shape]}
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    raw = msgspec.json.encode({"id": "c1", "messages": [earlier, message], "trigger": "submit-message"})
    request = parse_chat_request(raw)
    assert shaped(raw) is None and same(request, walked(raw))
    assert request.client_hint == 7


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_TRICKY = st.text(alphabet='[]{}"\\ab\n', max_size=8)


def _nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A named function, not a lambda: hypothesis reads a lambda's source to check that it recurses, and
    misread this one as not using its argument."""
    return st.lists(children, max_size=3) | st.dictionaries(_TRICKY, children, max_size=3)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | _TRICKY, _nested, max_leaves=40)


@given(_JSON, st.integers(min_value=0, max_value=12))
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_the_depth_read_from_the_text_is_the_documents_whatever_its_strings_hold(
    value: Any, limit: int
) -> None:
    """`too_deep` reads nesting from the bytes (brackets inside strings and escapes don't count), and
    agrees with walking the decoded document."""
    assert too_deep(msgspec.json.encode(value), limit) == (_depth(value) > limit)
