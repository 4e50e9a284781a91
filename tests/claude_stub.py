"""A stand-in for Anthropic's Messages API, so that the real Claude Code CLI and the Agent SDK run offline.

The CLI sends `HEAD /` and `POST /v1/messages?beta=true` (streaming); nothing else was seen. The stub answers
the last *user* message of a request (a `role: "system"` entry may follow it), by a script the prompt itself
carries, so that one stub serves every test of a module:

- `call <tool> <JSON input>`: the model calls `<tool>` with that input (id `toolu_<n>`);
- after the tool's result, it says `done: <what the result said>` and ends its turn;
- anything else: a one-line text reply.

Every request's body is kept (`requests`), so a test sees what reached the model: a refusal's reason in an
error `tool_result`, say. The stub runs in a thread of the test's process, or as its own process
(`python -m tests.claude_stub PORTFILE`) where the CLI runs in a network namespace of its own.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_ids = itertools.count(1)


def _last_user(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in reversed(messages) if m.get("role") == "user")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content", "")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tool_result` blocks of a request's last user message."""
    return [b for b in _blocks(_last_user(body["messages"])) if b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks the model answers `body` with, by the script above."""
    results = tool_results(body)
    if results:
        said = "; ".join(result_text(b) for b in results)
        return [{"type": "text", "text": f"done: {said}"}]
    texts = [b.get("text", "") for b in _blocks(_last_user(body["messages"])) if b.get("type") == "text"]
    for text in reversed(texts):
        if text.startswith("call ") and body.get("tools"):
            tool, _, given = text.removeprefix("call ").partition(" ")
            return [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(_ids):04d}",
                    "name": tool,
                    "input": json.loads(given),
                }
            ]
    return [{"type": "text", "text": "ok"}]


def events(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Messages API's stream of one reply: its message, each block, and its end."""
    blocks = answer(body)
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    usage = {"input_tokens": 10, "output_tokens": 0}
    message = {
        "id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant",
        "model": body.get("model", "stub"), "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": usage,
    }  # fmt: skip
    yield "message_start", {"type": "message_start", "message": message}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    end = {"stop_reason": stop, "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


class Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, log: Path | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.log = log
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def keep(self, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(body)
            if self.log is not None:
                with self.log.open("a") as kept:
                    kept.write(json.dumps(body) + "\n")

    def start(self) -> Stub:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


class _Handler(BaseHTTPRequestHandler):
    server: Stub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read `requests`."""

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.keep(body)
        if not body.get("stream"):
            blocks = answer(body)
            reply = {
                "id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant", "model": "stub",
                "content": blocks, "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }  # fmt: skip
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        stream = b"".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events(body)
        )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(stream)))
        self.end_headers()
        self.wfile.write(stream)


def main() -> None:
    """Serve until killed, writing the URL to the file named by the first argument and each request's body
    as a line of the second."""
    stub = Stub(Path(sys.argv[2]))
    Path(sys.argv[1]).write_text(stub.url)
    stub.serve_forever()


if __name__ == "__main__":
    main()
