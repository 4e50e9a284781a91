"""The server fixture of the official MCP conformance suite (`@modelcontextprotocol/conformance`), with the
official `mcp` SDK: its tools, resources, prompts and completions, named and behaving as the suite's
server scenarios expect (each scenario's description in the suite says what to "Implement").

Run as `python fixture_server.py` it serves over stdio, for `signoff mcp-gateway -- python fixture_server.py`;
with `--http PORT` it serves streamable HTTP at `http://127.0.0.1:PORT/mcp` (`--http 0` picks a free port) and
prints `fixture: <url>` once it listens, for the suite to run against it directly.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from typing import Annotated, Any

import uvicorn
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    JSONRPCMessage,
    ListRootsRequest,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import Field

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1x1 PNG, base64."""
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""A minimal WAV, base64."""
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""The JSON Schema 2020-12 keywords `json-schema-2020-12` expects `tools/list` to keep."""

# The requestState of input rounds is sealed with the SDK's default: random keys of this process.
server = MCPServer(name="mcp-conformance-fixture", version="1.0.0")


def _elicit(message: str, schema: dict[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(text=text))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def _accepted(ctx: Context, key: str) -> dict[str, Any] | None:
    answer = (ctx.input_responses or {}).get(key)
    return answer.content or {} if isinstance(answer, ElicitResult) and answer.action == "accept" else None


# -- tools: content ------------------------------------------------------------------------------------------


@server.tool()
def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Tests image content response"""
    return [ImageContent(data=IMAGE, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Tests audio content response"""
    return [AudioContent(data=AUDIO, mime_type="audio/wav")]


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Tests embedded resource content response"""
    text = "This is an embedded resource content."
    return [
        EmbeddedResource(
            resource=TextResourceContents(uri="test://embedded-resource", mime_type="text/plain", text=text)
        )
    ]


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Tests response with multiple content types (text, image, resource)"""
    data = json.dumps({"test": "data", "value": 123})
    return [
        TextContent(text="Multiple content types test:"),
        ImageContent(data=IMAGE, mime_type="image/png"),
        EmbeddedResource(
            resource=TextResourceContents(
                uri="test://mixed-content-resource", mime_type="application/json", text=data
            )
        ),
    ]


@server.tool()
def test_error_handling() -> str:
    """Tests error response handling"""
    raise RuntimeError("This tool intentionally returns an error for testing")


# -- tools: notifications and requests during a call ---------------------------------------------------------


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    meta = ctx.request_context.meta if ctx.request_context else None
    return str((meta or {}).get("progress_token", 0))


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    try:
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(text=prompt))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
    except Exception as exc:
        return f"Sampling not supported or error: {exc}"
    text = result.content.text if isinstance(result.content, TextContent) else "No response"
    return f"LLM response: {text}"


async def _elicited(ctx: Context, message: str, schema: dict[str, Any], said: str) -> str:
    """Asks the client mid-call (`elicitation/create` on the call's own stream), as a server before
    2026-07-28 does, and says what came back, whatever the content (the suite's answers are its own)."""
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except Exception as exc:
        return f"Elicitation not supported or error: {exc}"
    return f"{said}: action={result.action}, content={json.dumps(result.content or {})}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)"""
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    return await _elicited(ctx, message, schema, "User response")


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    message = "Please review and update the form fields with defaults"
    return await _elicited(ctx, message, schema, "Elicitation completed")


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema improvements per SEP-1330"""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    message = "Please select options from the enum fields"
    return await _elicited(ctx, message, schema, "Elicitation completed")


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Tests SSE polling: closes the call's stream mid-call (SEP-1699)"""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Diagnostic (server-stateless): a call whose response stream carries progress, and never a request"""
    await ctx.report_progress(progress=50, total=100)
    return "Streaming complete"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Diagnostic (server-stateless): logs, which a 2026-07-28 request only receives if its _meta asks"""
    await ctx.info("Diagnostic trace logging activated")
    return "Logging evaluated"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability: without it, a JSON-RPC error naming it"""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool requires the client 'sampling' capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "Client declared sampling capability; proceeding."


@server.tool(name="test_x_mcp_header")
def x_mcp_header(
    region: Annotated[
        str,
        Field(
            description="Mirrored into the Mcp-Param-Region header",
            json_schema_extra={"x-mcp-header": "Region"},
        ),
    ] = "<none>",
) -> str:
    """Tests SEP-2243 Mcp-Param-* headers: a parameter mirrored into a header"""
    return f"region={region}"


@server.tool(name="json_schema_2020_12_tool")
def json_schema_2020_12_tool() -> str:
    """Tool with JSON Schema 2020-12 features (SEP-1613)"""
    return "json_schema_2020_12_tool"


# MCPServer derives a tool's schema from its signature; this one's is the suite's, verbatim.
server._tool_manager._tools["json_schema_2020_12_tool"].parameters = SCHEMA_2020_12


def _dynamic() -> str:
    """Added and removed by the change triggers."""
    return "dynamic"


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Changes the tool list and says so to subscriptions/listen streams (SEP-2575)"""
    server.add_tool(_dynamic, name="test_dynamic_tool")
    server.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "tool list changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Changes the prompt list and says so to subscriptions/listen streams (SEP-2575)"""
    server.add_prompt(Prompt.from_function(_dynamic, name="test_dynamic_prompt", description="dynamic"))
    server.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    return "prompt list changed"


# -- tools: input rounds (SEP-2322, 2026-07-28) --------------------------------------------------------------


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """An InputRequiredResult asking one form"""
    if (content := _accepted(ctx, "user_name")) is not None:
        return f"Hello, {content.get('name', 'stranger')}!"
    return InputRequiredResult(input_requests={"user_name": _elicit("What is your name?", NAME)})


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """An InputRequiredResult asking one sampling"""
    answer = (ctx.input_responses or {}).get("capital_question")
    if isinstance(answer, CreateMessageResult):
        return f"Model said: {answer.content.text if isinstance(answer.content, TextContent) else '?'}"
    return InputRequiredResult(
        input_requests={"capital_question": _sample("What is the capital of France?", 100)}
    )


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """An InputRequiredResult asking the client's roots"""
    answer = (ctx.input_responses or {}).get("client_roots")
    if isinstance(answer, ListRootsResult):
        return f"Client exposed {len(answer.roots)} root(s)."
    return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """An InputRequiredResult whose requestState must come back unchanged"""
    if _accepted(ctx, "confirm") is not None and ctx.request_state == "request-state-nonce":
        return "state-ok: confirmation received"
    return InputRequiredResult(
        input_requests={"confirm": _elicit("Please confirm", CONFIRM)}, request_state="request-state-nonce"
    )


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """An InputRequiredResult asking a form, a sampling and the roots at once"""
    if {"user_name", "greeting", "client_roots"} <= (ctx.input_responses or {}).keys():
        return "All inputs received."
    requests: dict[str, InputRequest] = {
        "user_name": _elicit("What is your name?", NAME),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    return InputRequiredResult(input_requests=requests, request_state="multiple-inputs")


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Two rounds of input, the requestState carrying the first answer into the second"""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    if state["round"] == 1 and (step1 := _accepted(ctx, "step1")) is not None:
        color = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
        return InputRequiredResult(
            input_requests={"step2": _elicit("Step 2: What is your favorite color?", color)},
            request_state=json.dumps({"round": 2, "name": step1.get("name")}),
        )
    if state["round"] == 2 and (step2 := _accepted(ctx, "step2")) is not None:
        return f"{state.get('name')} likes {step2.get('color')}."
    return InputRequiredResult(  # the first round, or an answer missing: from the start
        input_requests={"step1": _elicit("Step 1: What is your name?", NAME)},
        request_state=json.dumps({"round": 1}),
    )


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """An InputRequiredResult whose requestState the SDK's boundary seals: a tampered one never gets here"""
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"confirm": _elicit("Please confirm", CONFIRM)}, request_state="round-1"
        )
    return f"state-ok: {ctx.request_state}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Input requests only of the kinds the client declared"""
    capabilities = ctx.client_capabilities
    requests: dict[str, InputRequest] = {}
    if capabilities is None or capabilities.sampling is not None:
        requests["sample"] = _sample("Say hello", 50)
    if capabilities is None or capabilities.elicitation is not None:
        requests["ask"] = _elicit("What is your name?", NAME)
    return InputRequiredResult(input_requests=requests, request_state="capability-gated")


# -- resources -----------------------------------------------------------------------------------------------

subscribed: set[str] = set()


@server.resource("test://static-text")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing"""
    return base64.b64decode(IMAGE)


@server.resource("test://template/{id}/data", mime_type="application/json")
def template(id: str) -> str:
    """A resource template with parameter substitution"""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource")
def watched() -> str:
    """A resource that can be subscribed to for updates"""
    return "Watched resource content"


async def _subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def _unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


async def _set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


lowlevel = server._lowlevel_server
lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)
lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


# -- prompts and completions ---------------------------------------------------------------------------------


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A simple prompt without arguments"""
    return [UserMessage(content=TextContent(text="This is a simple prompt for testing."))]


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with required arguments"""
    return [UserMessage(content=TextContent(text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that includes an embedded resource"""
    text = "Embedded resource content for testing."
    return [
        UserMessage(
            content=EmbeddedResource(
                resource=TextResourceContents(uri=resourceUri, mime_type="text/plain", text=text)
            )
        ),
        UserMessage(content=TextContent(text="Please process the embedded resource above.")),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt that includes image content"""
    return [
        UserMessage(content=ImageContent(data=IMAGE, mime_type="image/png")),
        UserMessage(content=TextContent(text="Please analyze the image above.")),
    ]


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """An InputRequiredResult from prompts/get (SEP-2322, a request that is no tool call)"""
    if (content := _accepted(ctx, "user_context")) is not None:
        return [
            UserMessage(content=TextContent(text=f"Use the following context: {content.get('context', '?')}"))
        ]
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    return InputRequiredResult(
        input_requests={"user_context": _elicit("What context should the prompt use?", schema)}
    )


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    return Completion(values=[], total=0, has_more=False)


# -- transports ----------------------------------------------------------------------------------------------


class Events(EventStore):
    """Every event of every stream, in memory, so a client that reconnects is sent what it missed
    (SEP-1699)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        self.events.append((stream_id, str(len(self.events) + 1), message))
        return self.events[-1][1]

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, event, _ in self.events if event == last_event_id), None)
        if stream is None:
            return None
        for s, event, message in self.events[int(last_event_id) :]:
            if s == stream and message is not None:
                await send_callback(EventMessage(message, event))
        return stream


async def serve_http(port: int) -> None:
    app = server.streamable_http_app(event_store=Events(), retry_interval=100, host="127.0.0.1")
    http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(http.serve())
    while not http.started:
        if serving.done():
            serving.result()
            return
        await asyncio.sleep(0.02)
    bound = http.servers[0].sockets[0].getsockname()[1]
    print(f"fixture: http://127.0.0.1:{bound}/mcp", flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (0: any free port)"
    )
    args = parser.parse_args()
    if args.http is None:
        server.run()  # stdio
    else:
        asyncio.run(serve_http(args.http))


if __name__ == "__main__":
    sys.exit(main())
