"""Chunks encode to exactly the shapes the real `ai` clients accept: no nulls, no unknown keys, camelCase.

The allow-lists below are copied from `uiMessageChunkSchema` in the `ai` npm package (6.0.0, and 7.0.0, the
first of the strict 7.x releases). They are facts about an external client, so they are written out here
instead of derived from the code under test.
"""

from __future__ import annotations

import base64
import re
from typing import Any, get_args

import msgspec
import pytest

from signoff.protocol import (
    DONE,
    HEADERS,
    Abort,
    Chunk,
    ClientVersion,
    Data,
    Error,
    Finish,
    FinishReason,
    FinishStep,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    Start,
    StartStep,
    TextDelta,
    TextEnd,
    TextStart,
    ToolApprovalRequest,
    ToolInputAvailable,
    ToolInputDelta,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputDenied,
    ToolOutputError,
    client_version,
    encode,
    frame,
    sign,
    verify,
)

# type -> (required keys, optional keys), `type` itself left out.
Schema = dict[str, tuple[set[str], set[str]]]
Vector = tuple[str, str, str, str, dict[str, Any]]
V6: Schema = {
    "start": (set(), {"messageId", "messageMetadata"}),
    "finish": (set(), {"finishReason", "messageMetadata"}),
    "start-step": (set(), set()),
    "finish-step": (set(), set()),
    "text-start": ({"id"}, {"providerMetadata"}),
    "text-delta": ({"id", "delta"}, {"providerMetadata"}),
    "text-end": ({"id"}, {"providerMetadata"}),
    "reasoning-start": ({"id"}, {"providerMetadata"}),
    "reasoning-delta": ({"id", "delta"}, {"providerMetadata"}),
    "reasoning-end": ({"id"}, {"providerMetadata"}),
    "tool-input-start": ({"toolCallId", "toolName"}, {"providerExecuted", "dynamic", "title"}),
    "tool-input-delta": ({"toolCallId", "inputTextDelta"}, set()),
    "tool-input-available": (
        {"toolCallId", "toolName", "input"},
        {"providerExecuted", "providerMetadata", "dynamic", "title"},
    ),
    "tool-input-error": (
        {"toolCallId", "toolName", "input", "errorText"},
        {"providerExecuted", "providerMetadata", "dynamic", "title"},
    ),
    "tool-approval-request": ({"approvalId", "toolCallId"}, set()),
    "tool-output-available": ({"toolCallId", "output"}, {"providerExecuted", "dynamic", "preliminary"}),
    "tool-output-error": ({"toolCallId", "errorText"}, {"providerExecuted", "dynamic"}),
    "tool-output-denied": ({"toolCallId"}, set()),
    "error": ({"errorText"}, set()),
    "abort": (set(), set()),
    "message-metadata": ({"messageMetadata"}, set()),
    "data-weather": ({"data"}, {"id", "transient"}),
}
# What 7.0.0 adds to the chunk types above.
V7_EXTRA: dict[str, set[str]] = {
    "tool-input-start": {"providerMetadata", "toolMetadata"},
    "tool-input-available": {"toolMetadata"},
    "tool-input-error": {"toolMetadata"},
    "tool-approval-request": {"isAutomatic", "signature"},
    "tool-output-available": {"providerMetadata", "toolMetadata"},
    "tool-output-error": {"providerMetadata", "toolMetadata"},
    "abort": {"reason"},
}
FINISH_REASONS = {"stop", "length", "content-filter", "tool-calls", "error", "other"}

PM = {"openai": {"itemId": "x"}}
TM = {"risk": "high"}
FULL: list[Chunk] = [
    Start(message_id="msg_1", message_metadata={"model": "scripted"}),
    Finish(finish_reason="tool-calls", message_metadata={"tokens": 3}),
    StartStep(),
    FinishStep(),
    TextStart(id="t", provider_metadata=PM),
    TextDelta(id="t", delta="Hi", provider_metadata=PM),
    TextEnd(id="t", provider_metadata=PM),
    ReasoningStart(id="r", provider_metadata=PM),
    ReasoningDelta(id="r", delta="hmm", provider_metadata=PM),
    ReasoningEnd(id="r", provider_metadata=PM),
    ToolInputStart(
        tool_call_id="c",
        tool_name="pay",
        provider_executed=False,
        dynamic=False,
        title="Pay",
        provider_metadata=PM,
        tool_metadata=TM,
    ),
    ToolInputDelta(tool_call_id="c", input_text_delta='{"a'),
    ToolInputAvailable(
        tool_call_id="c",
        tool_name="pay",
        input={"amount": 50},
        provider_executed=False,
        provider_metadata=PM,
        dynamic=False,
        title="Pay",
        tool_metadata=TM,
    ),
    ToolApprovalRequest(approval_id="apr_1", tool_call_id="c", is_automatic=False, signature="sig"),
    ToolOutputAvailable(
        tool_call_id="c",
        output={"ok": True},
        provider_executed=False,
        dynamic=False,
        preliminary=False,
        provider_metadata=PM,
        tool_metadata=TM,
    ),
    ToolOutputError(
        tool_call_id="c",
        error_text="boom",
        provider_executed=False,
        dynamic=False,
        provider_metadata=PM,
        tool_metadata=TM,
    ),
    ToolOutputDenied(tool_call_id="c"),
    Error(error_text="boom"),
    Abort(reason="stopped"),
    Data(name="weather", data={"city": "Tokyo"}, id="w1", transient=True),
]
MINIMAL: list[Chunk] = [
    Start(),
    Finish(),
    TextStart(id="t"),
    ToolInputStart(tool_call_id="c", tool_name="pay"),
    ToolInputAvailable(tool_call_id="c", tool_name="pay", input={}),
    ToolApprovalRequest(approval_id="apr_1", tool_call_id="c"),
    ToolOutputAvailable(tool_call_id="c", output=[1, None]),
    ToolOutputError(tool_call_id="c", error_text="boom"),
    Abort(),
    Data(name="weather", data=0),
]
CAMEL = re.compile(r"^[a-z][a-zA-Z]*$")


def wire(chunk: Chunk, version: int = 6) -> dict[str, Any]:
    decoded = msgspec.json.decode(encode(chunk, version))
    assert isinstance(decoded, dict)
    return decoded


def check_keys(
    decoded: dict[str, Any], allowed: dict[str, tuple[set[str], set[str]]], extra: set[str]
) -> None:
    kind = decoded["type"]
    assert kind in allowed, f"{kind} is not a chunk type this client knows"
    required, optional = allowed[kind]
    keys = set(decoded) - {"type"}
    assert required <= keys, f"{kind} lacks {required - keys}"
    assert keys <= required | optional | extra, (
        f"{kind} has unknown keys {keys - required - optional - extra}"
    )


@pytest.mark.parametrize("chunk", FULL + MINIMAL, ids=lambda c: type(c).__name__)
def test_v6_encoding_fits_the_600_schema_without_nulls(chunk: Chunk) -> None:
    decoded = wire(chunk)
    check_keys(decoded, V6, set())
    required, _ = V6[decoded["type"]]
    assert all(value is not None for key, value in decoded.items() if key not in required)
    assert all(CAMEL.match(key) for key in decoded)


@pytest.mark.parametrize("chunk", FULL + MINIMAL, ids=lambda c: type(c).__name__)
def test_v7_encoding_fits_the_700_schema(chunk: Chunk) -> None:
    decoded = wire(chunk, ClientVersion.V7)
    check_keys(decoded, V6, V7_EXTRA.get(decoded["type"], set()))
    assert None not in decoded.values()


@pytest.mark.parametrize("chunk", FULL, ids=lambda c: type(c).__name__)
def test_v7_fields_appear_only_for_v7(chunk: Chunk) -> None:
    extra = V7_EXTRA.get(wire(chunk)["type"], set())
    assert not extra & set(wire(chunk, 6))
    assert extra <= set(wire(chunk, 7))


def test_the_approval_request_carries_the_signature_to_v7_only() -> None:
    chunk = ToolApprovalRequest(approval_id="apr_1", tool_call_id="call_1", signature="sig")
    assert encode(chunk) == b'{"type":"tool-approval-request","approvalId":"apr_1","toolCallId":"call_1"}'
    assert encode(chunk, 7) == (
        b'{"type":"tool-approval-request","approvalId":"apr_1","toolCallId":"call_1","signature":"sig"}'
    )


def test_every_chunk_type_signoff_sends_is_one_the_600_client_knows() -> None:
    """signoff models only the chunks it sends; each is one of ai 6.0.0's, so every 6.x and 7.x client reads
    it."""
    sent = {wire(chunk)["type"] for chunk in FULL}
    assert sent <= set(V6) and sent >= {"start", "tool-approval-request", "tool-output-denied", "error"}


def test_unknown_values_are_always_present_because_zod_requires_their_keys() -> None:
    assert wire(ToolOutputAvailable(tool_call_id="c", output=None)) == {
        "type": "tool-output-available",
        "toolCallId": "c",
        "output": None,
    }
    assert "data" in wire(Data(name="x", data=None))


def test_finish_reasons_are_the_clients() -> None:
    assert set(get_args(FinishReason)) == FINISH_REASONS


def test_data_chunks_take_their_type_from_the_name() -> None:
    assert encode(Data(name="weather", data={"c": 20})) == b'{"type":"data-weather","data":{"c":20}}'
    assert encode(Data(name="progress", data=1, id="p", transient=True), 7) == (
        b'{"type":"data-progress","id":"p","data":1,"transient":true}'
    )
    with pytest.raises(ValueError, match="name"):
        Data(name="", data=1)


def test_chunks_are_frozen() -> None:
    chunk = TextDelta(id="t", delta="a")
    with pytest.raises(AttributeError):
        chunk.delta = "b"  # type: ignore[misc]


def test_sse_framing() -> None:
    assert frame(encode(TextDelta(id="t", delta="a\nb"))) == (
        b'data: {"type":"text-delta","id":"t","delta":"a\\nb"}\n\n'
    )
    assert DONE == b"data: [DONE]\n\n"
    assert dict(HEADERS) == {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "x-vercel-ai-ui-message-stream": "v1",
        "x-accel-buffering": "no",
    }
    with pytest.raises(TypeError):
        HEADERS["x-extra"] = "1"  # type: ignore[index]


@pytest.mark.parametrize(
    ("headers", "hint", "expected"),
    [
        ({}, None, 6),
        ({"user-agent": "ai-sdk/6.0.0 runtime/node.js/v20.20.2"}, None, 6),
        ({"User-Agent": "Mozilla/5.0 ai-sdk/7.0.3 runtime/browser"}, None, 7),
        ({"user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0"}, None, 6),
        ({"X-AI-SDK-Version": "7.0.173"}, None, 7),
        ({"x-ai-sdk-version": "7"}, None, 7),
        ({"x-ai-sdk-version": "6"}, 7, 6),
        ({"x-ai-sdk-version": "garbage"}, None, 6),
        ({"x-ai-sdk-version": "9" * 5000}, None, 6),
        ({}, 7, 7),
        ({"user-agent": "ai-sdk/6.0.100"}, 7, 7),
    ],
)
def test_client_version(headers: dict[str, str], hint: int | None, expected: int) -> None:
    assert client_version(headers, hint) == expected


# Signatures computed by the `ai` package's own signToolApproval (ai 6.0.202, WebCrypto, Node 20).
VECTORS: list[Vector] = [
    (
        "s3cret",
        "apr_1",
        "call_1",
        "process_payment",
        {"recipient": "Hanako", "currency": "USD", "amount": 50},
    ),
    ("s3cret", "apr_2", "call_2", "get_location", {}),
    ("k", "apr_3", "call_3", "note", {"text": "héllo ✓", "nested": {"b": [1, 2.5, True, None], "a": "x"}}),
]
EXPECTED = [
    "5p9dG-0csYircnwUyrNSHVn6s62DVWEvsANqrHekIdU",
    "Z1D4m6cIHhOcdWg62nhLvE3XI8l_0jee72Rd_847a5w",
    "4MK7uKkbDZ1pj6PI0hef51cWfKL03mx8N8YtbGlrGgA",
]


@pytest.mark.parametrize(("vector", "expected"), list(zip(VECTORS, EXPECTED, strict=True)))
def test_signature_matches_the_ai_package(vector: Vector, expected: str) -> None:
    assert sign(*vector) == expected
    assert verify(vector[0], expected, *vector[1:])


def test_signature_is_unpadded_b64url_of_a_sha256_mac() -> None:
    signature = sign(b"secret", "apr_1", "call_1", "pay", {"amount": 50})
    assert "=" not in signature and len(signature) == 43
    assert len(base64.urlsafe_b64decode(signature + "=")) == 32


def test_signature_ignores_key_order_and_integral_floats() -> None:
    signature = sign("k", "apr_1", "call_1", "pay", {"amount": 50, "to": "Hanako"})
    assert verify("k", signature, "apr_1", "call_1", "pay", {"to": "Hanako", "amount": 50.0})


@pytest.mark.parametrize(
    "tampered",
    [
        ("other", "apr_1", "call_1", "pay", {"amount": 50}),
        ("k", "apr_2", "call_1", "pay", {"amount": 50}),
        ("k", "apr_1", "call_2", "pay", {"amount": 50}),
        ("k", "apr_1", "call_1", "refund", {"amount": 50}),
        ("k", "apr_1", "call_1", "pay", {"amount": 5000}),
        ("k", "apr_1", "call_1", "pay", {"amount": 50, "extra": True}),
        ("k", "apr_1", "call_1", "pay", {"amount": float("nan")}),
    ],
)
def test_signature_detects_tampering(tampered: Vector) -> None:
    signature = sign("k", "apr_1", "call_1", "pay", {"amount": 50})
    assert not verify(tampered[0], signature, *tampered[1:])


@pytest.mark.parametrize("forged", ["", "x", "é" * 43, "A" * 43, "apr_1"])
def test_signature_refuses_forgeries(forged: str) -> None:
    assert not verify("k", forged, "apr_1", "call_1", "pay", {"amount": 50})
