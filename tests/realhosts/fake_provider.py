"""Fake model providers for the real hosts: the one boundary that cannot run here.

:class:`FakeProvider` is an Anthropic Messages API for Claude Code; :class:`FakeResponses` an
OpenAI Responses API for Codex CLI.

Claude Code sends ``POST /v1/messages`` (streamed, server-sent events) to
``$ANTHROPIC_BASE_URL``; this server answers as a model that does what a successor's prompt
says: its first answer calls the ``Bash`` tool with the command the prompt gives after
"run exactly:", then, once that tool's result is back, it works for a while (one ``sleep``
call, as a model at work keeps its process alive) and ends its turn. The event sequence is the
one the Messages API documents for streaming (docs.anthropic.com, "Streaming Messages":
``message_start``, ``content_block_start``, ``content_block_delta`` with ``input_json_delta``
or ``text_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``).

Every request is recorded (path, model, the tool names offered, the tool calls answered) in
:attr:`FakeProvider.requests` for the test to assert on.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A command the prompt tells the model to run: an indented line after "run exactly:".
_COMMAND = re.compile(r"run exactly:\n\n  (?P<command>[^\n]+)\n")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
    return "\n".join(parts)


def _tool_results(messages: list[dict[str, Any]]) -> int:
    return sum(
        1
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )


class _LocalServer:
    """An HTTP server on 127.0.0.1 (an ephemeral port) serving from a background thread."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class FakeProvider(_LocalServer):
    """A Messages API on 127.0.0.1 (an ephemeral port) in a background thread."""

    def __init__(self, work_seconds: int = 20) -> None:
        self.work_seconds = work_seconds
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json({})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    self._json({"input_tokens": 10})
                    return
                block, stop = provider._answer(self.path, body)
                message = {
                    "id": f"msg_{next(provider._ids):04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "claude"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                }
                if not body.get("stream"):
                    self._json({**message, "content": [block], "stop_reason": stop})
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                self._event("message_start", {"type": "message_start", "message": message})
                if block["type"] == "tool_use":
                    start = {**block, "input": {}}
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                else:
                    start = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": block["text"]}
                self._event(
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": start},
                )
                self._event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                )
                self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
                self._event(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                )
                self._event("message_stop", {"type": "message_stop"})

            def _json(self, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _event(self, kind: str, data: dict[str, Any]) -> None:
                self.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        self._handler = Handler

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        messages = body.get("messages") or []
        tools = [t.get("name") for t in body.get("tools") or []]
        prompt = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        found = _COMMAND.search(prompt)
        done = _tool_results(messages)
        command: str | None = None
        if "Bash" in tools and found is not None:
            if done == 0:
                command = found.group("command")
            elif done == 1 and self.work_seconds:
                command = f"sleep {self.work_seconds}"
        self.requests.append(
            {"path": path, "model": body.get("model"), "tools": tools, "command": command}
        )
        if command is None:
            return {"type": "text", "text": "done"}, "end_turn"
        block = {
            "type": "tool_use",
            "id": f"toolu_{next(self._ids):04d}",
            "name": "Bash",
            "input": {"command": command, "description": "run the command"},
        }
        return block, "tool_use"

    def __enter__(self) -> FakeProvider:
        self._serve(self._handler)
        return self


class FakeResponses(_LocalServer):
    """A fake OpenAI Responses API for the real Codex CLI (``POST /v1/responses``, streamed).

    Codex reaches it as a custom model provider (``[model_providers.fake]`` with ``base_url``
    and ``wire_api = "responses"`` in ``$CODEX_HOME/config.toml``). Each answer is the event
    sequence Codex's own tests mock (``openai/codex`` ``codex-rs/core/tests/common/
    responses.rs``: ``response.created``, ``response.output_item.done``,
    ``response.completed``). The model calls Codex's ``exec_command`` tool with the command
    its prompt gives after "run exactly:", then works for a while (``sleep``), then answers.
    """

    def __init__(self, work_seconds: int = 20) -> None:
        self.work_seconds = work_seconds
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                raw = "".join(
                    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
                    for e in provider._answer(self.path, body)
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._handler = Handler

    def _answer(self, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input") or []
        tools = [t.get("name") for t in body.get("tools") or []]
        prompt = "\n".join(
            part.get("text", "")
            for item in items
            if item.get("type") == "message" and item.get("role") == "user"
            for part in item.get("content") or []
            if isinstance(part, dict)
        )
        done = sum(1 for item in items if item.get("type") == "function_call_output")
        found = _COMMAND.search(prompt)
        command: str | None = None
        if "exec_command" in tools and found is not None:
            if done == 0:
                command = found.group("command")
            elif done == 1 and self.work_seconds:
                command = f"sleep {self.work_seconds}"
        self.requests.append({"path": path, "tools": tools, "command": command})
        response = f"resp_{next(self._ids):04d}"
        if command is None:
            text = [{"type": "output_text", "text": "done"}]
            item: dict[str, Any] = {"type": "message", "role": "assistant", "content": text,
                                    "id": f"msg_{next(self._ids):04d}"}  # fmt: skip
        else:
            item = {"type": "function_call", "call_id": f"call_{next(self._ids):04d}",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": command, "yield_time_ms": 60000})}  # fmt: skip
        usage = {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 1,
                 "output_tokens_details": None, "total_tokens": 11}  # fmt: skip
        return [
            {"type": "response.created", "response": {"id": response}},
            {"type": "response.output_item.done", "item": item},
            {"type": "response.completed", "response": {"id": response, "usage": usage}},
        ]

    def __enter__(self) -> FakeResponses:
        self._serve(self._handler, "/v1")
        return self
