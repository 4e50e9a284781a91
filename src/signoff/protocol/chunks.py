"""Typed chunks of the AI SDK UI message stream, encoded so that every released client accepts them.

The client validates each chunk with a zod union. A chunk the union rejects stops the stream with an error
in the browser, so the shapes here follow the client's source, not its documentation.
"""

# Facts read from the `uiMessageChunkSchema` of the `ai` npm package (dist/index.mjs):
#
# - ai 6.0.0-6.0.230 and 7.0.0-7.0.31 build every chunk with `z.strictObject`: an unknown key fails the
#   whole chunk. 6.0.231+ and 7.0.32+ use `z.looseObject`. Every version rejects an unknown `type` and a
#   `null` where it expects a string or boolean, so optional fields are left out rather than sent as null.
# - The 6.0.0 field sets (each chunk also has `type`; `?` = optional):
#     start{messageId?, messageMetadata?}  finish{finishReason?, messageMetadata?}
#     start-step{}  finish-step{}
#     text-start|text-end|reasoning-start|reasoning-end{id, providerMetadata?}
#     text-delta|reasoning-delta{id, delta, providerMetadata?}
#     tool-input-start{toolCallId, toolName, providerExecuted?, dynamic?, title?}
#     tool-input-delta{toolCallId, inputTextDelta}
#     tool-input-available{toolCallId, toolName, input, providerExecuted?, providerMetadata?, dynamic?,
#       title?}
#     tool-input-error{...tool-input-available, errorText}
#     tool-approval-request{approvalId, toolCallId}
#     tool-output-available{toolCallId, output, providerExecuted?, dynamic?, preliminary?}
#     tool-output-error{toolCallId, errorText, providerExecuted?, dynamic?}   tool-output-denied{toolCallId}
#     error{errorText}  abort{}  message-metadata{messageMetadata}  data-*{id?, data, transient?}
#     (also source-url, source-document, file, which signoff does not emit)
#   finishReason is one of stop, length, content-filter, tool-calls, error, other.
# - Added by 7.0.0 (so a strict 7.0.0 client accepts them), absent from 6.0.0:
#     tool-input-start{providerMetadata?, toolMetadata?}   tool-input-available|error{toolMetadata?}
#     tool-output-available|error{providerMetadata?, toolMetadata?}   abort{reason?}
#     tool-approval-request{isAutomatic?, signature?}
#     new chunk types: tool-approval-response{approvalId, approved, reason?, providerExecuted?,
#     providerMetadata?}, custom, reasoning-file.
#   Later 6.x releases picked up some of them (toolMetadata and abort.reason by 6.0.201, `signature` in
#   6.0.202), but a 6.x client cannot be told apart from 6.0.0 (see version.py), so they count as v7 here.
# - Added after 7.0.0 and therefore rejected by the strict 7.0.0-7.0.31 clients, so not modelled:
#   text-end{citations?}, tool-input-start{inputEncoding?}, tool-approval-request{approvalDescriptor?,
#   inputSchemaInput?, reason?}, finishReason "interrupted", chunk types steering-message and reset-step.

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

import msgspec

FinishReason = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]
ProviderMetadata = dict[str, dict[str, Any]]
ToolMetadata = dict[str, Any]


class _Chunk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", rename="camel"):
    """Optional fields default to None and `omit_defaults` leaves them out, so they never say `null`.

    The client's `z.unknown()` fields (`input`, `output`, `data`, `messageMetadata` of message-metadata) are
    the exception: zod 4 requires their key to be present, so they have no default, and a Python None there
    is sent as JSON null, which the schema accepts.
    """

    v7_fields: ClassVar[tuple[str, ...]] = ()


class Start(_Chunk, tag="start", frozen=True):
    message_id: str | None = None
    message_metadata: Any = None


class Finish(_Chunk, tag="finish", frozen=True):
    finish_reason: FinishReason | None = None
    message_metadata: Any = None


class StartStep(_Chunk, tag="start-step", frozen=True):
    pass


class FinishStep(_Chunk, tag="finish-step", frozen=True):
    pass


class TextStart(_Chunk, tag="text-start", frozen=True):
    id: str
    provider_metadata: ProviderMetadata | None = None


class TextDelta(_Chunk, tag="text-delta", frozen=True):
    id: str
    delta: str
    provider_metadata: ProviderMetadata | None = None


class TextEnd(_Chunk, tag="text-end", frozen=True):
    id: str
    provider_metadata: ProviderMetadata | None = None


class ReasoningStart(_Chunk, tag="reasoning-start", frozen=True):
    id: str
    provider_metadata: ProviderMetadata | None = None


class ReasoningDelta(_Chunk, tag="reasoning-delta", frozen=True):
    id: str
    delta: str
    provider_metadata: ProviderMetadata | None = None


class ReasoningEnd(_Chunk, tag="reasoning-end", frozen=True):
    id: str
    provider_metadata: ProviderMetadata | None = None


class ToolInputStart(_Chunk, tag="tool-input-start", frozen=True):
    v7_fields = ("provider_metadata", "tool_metadata")

    tool_call_id: str
    tool_name: str
    provider_executed: bool | None = None
    dynamic: bool | None = None
    title: str | None = None
    provider_metadata: ProviderMetadata | None = None
    tool_metadata: ToolMetadata | None = None


class ToolInputDelta(_Chunk, tag="tool-input-delta", frozen=True):
    tool_call_id: str
    input_text_delta: str


class ToolInputAvailable(_Chunk, tag="tool-input-available", frozen=True):
    v7_fields = ("tool_metadata",)

    tool_call_id: str
    tool_name: str
    input: Any
    provider_executed: bool | None = None
    provider_metadata: ProviderMetadata | None = None
    dynamic: bool | None = None
    title: str | None = None
    tool_metadata: ToolMetadata | None = None


class ToolApprovalRequest(_Chunk, tag="tool-approval-request", frozen=True):
    """Asks the person; the tool part named by `tool_call_id` must already be in the streamed message.

    `signature` (see signature.py) is echoed back by the client on its approval response, so the server can
    check that an approval id was issued for exactly this call without a lookup.
    """

    v7_fields = ("is_automatic", "signature")

    approval_id: str
    tool_call_id: str
    is_automatic: bool | None = None
    signature: str | None = None


class ToolOutputAvailable(_Chunk, tag="tool-output-available", frozen=True):
    v7_fields = ("provider_metadata", "tool_metadata")

    tool_call_id: str
    output: Any
    provider_executed: bool | None = None
    dynamic: bool | None = None
    preliminary: bool | None = None
    provider_metadata: ProviderMetadata | None = None
    tool_metadata: ToolMetadata | None = None


class ToolOutputError(_Chunk, tag="tool-output-error", frozen=True):
    v7_fields = ("provider_metadata", "tool_metadata")

    tool_call_id: str
    error_text: str
    provider_executed: bool | None = None
    dynamic: bool | None = None
    provider_metadata: ProviderMetadata | None = None
    tool_metadata: ToolMetadata | None = None


class ToolOutputDenied(_Chunk, tag="tool-output-denied", frozen=True):
    tool_call_id: str


class Error(_Chunk, tag="error", frozen=True):
    error_text: str


class Abort(_Chunk, tag="abort", frozen=True):
    v7_fields = ("reason",)

    reason: str | None = None


class Data(msgspec.Struct, frozen=True, kw_only=True):
    """An app-defined `data-<name>` part; its type is open-ended, so it cannot be a fixed tag."""

    name: str
    data: Any
    id: str | None = None
    transient: bool | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a data chunk needs a name: its type is 'data-<name>'")


class _DataWire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    type: str
    id: str | None = None
    data: Any
    transient: bool | None = None


Chunk = (
    Start
    | Finish
    | StartStep
    | FinishStep
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolInputAvailable
    | ToolApprovalRequest
    | ToolOutputAvailable
    | ToolOutputError
    | ToolOutputDenied
    | Error
    | Abort
    | Data
)

_encoder = msgspec.json.Encoder()
_tagged: Callable[[bytes], Chunk] = msgspec.json.Decoder(
    Start | Finish | StartStep | FinishStep | TextStart | TextDelta | TextEnd | ReasoningStart
    | ReasoningDelta | ReasoningEnd | ToolInputStart | ToolInputDelta | ToolInputAvailable
    | ToolApprovalRequest | ToolOutputAvailable | ToolOutputError | ToolOutputDenied | Error | Abort
).decode  # fmt: skip
_data = msgspec.json.Decoder(_DataWire).decode
_DATA_PREFIX = b'{"type":"data-'


def encode(chunk: Chunk, version: int = 6) -> bytes:
    """The JSON of one chunk, cut to what an ai `version`.x client accepts (6 means the 6.0.0 set)."""
    if isinstance(chunk, Data):
        wire = _DataWire(type="data-" + chunk.name, id=chunk.id, data=chunk.data, transient=chunk.transient)
        return _encoder.encode(wire)
    if version < 7 and any(getattr(chunk, name) is not None for name in chunk.v7_fields):
        chunk = msgspec.structs.replace(chunk, **dict.fromkeys(chunk.v7_fields))
    return _encoder.encode(chunk)


def decode(data: bytes) -> Chunk:
    """A chunk from its JSON as `encode` wrote it (a reply log keeps chunks so, each reader framing them
    for its own transport and client version); raises `msgspec.DecodeError` on anything else."""
    if data.startswith(_DATA_PREFIX):
        wire = _data(data)
        name = wire.type.removeprefix("data-")
        return Data(name=name, id=wire.id, data=wire.data, transient=wire.transient)
    return _tagged(data)
