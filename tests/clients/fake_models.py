"""A scripted model on loopback: a small fake of the Anthropic Messages API (`/v1/messages`)
and of the OpenAI Responses API (`/v1/responses`), for driving real agent clients (Claude
Code, Codex) through a task offline.

A `Script` is a list of steps; each step is a function of what the client has sent back so
far (the tool results it showed the model) and returns the next tool call to make, as
(tool-name suffix, arguments), or None to finish with a text answer. Tool names are matched
by suffix, because each client names MCP tools its own way (`mcp__toolgate__route`,
`toolgate__route`, ...). Every request the client makes is recorded, and every tool result
the model was shown is kept by call, so a test asserts what the client really showed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Step = Callable[["Transcript"], "tuple[str, dict[str, Any]] | None"]


@dataclass
class ToolCall:
    id: str
    suffix: str
    name: str  # the client's full name of the tool
    arguments: dict[str, Any]
    result: str | None = None  # what the client sent back for it, as text


@dataclass
class Transcript:
    calls: list[ToolCall] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    unknown_tools: list[str] = field(default_factory=list)
    final: str | None = None

    def result(self, suffix: str) -> str:
        """The text the client showed the model for the last call of `suffix`."""
        for c in reversed(self.calls):
            if c.suffix == suffix and c.result is not None:
                return c.result
        raise AssertionError(f"no result for a call of {suffix!r}: calls were {[(c.suffix, c.result) for c in self.calls]}")


class Script:
    def __init__(self, steps: list[Step], final_text: str = "All done."):
        self.steps = steps
        self.final_text = final_text
        self.t = Transcript()
        self.lock = threading.Lock()

    def next_call(self, tool_names: list[str]) -> tuple[str, str, dict[str, Any]] | None:
        """The next (id, client tool name, arguments) or None when the script is over."""
        with self.lock:
            n = len(self.t.calls)
            if n >= len(self.steps):
                self.t.final = self.final_text
                return None
            step = self.steps[n](self.t)
            if step is None:
                self.t.final = self.final_text
                return None
            suffix, args = step
            matches = [t for t in tool_names if t == suffix or t.endswith("__" + suffix) or t.endswith("_" + suffix)]
            if not matches:
                self.t.unknown_tools.append(suffix)
                self.t.final = f"I have no tool ending in {suffix}; tools: {tool_names}"
                return None
            # The shortest match: `..._route` before `..._reroute`.
            name = min(matches, key=len)
            call = ToolCall(id=f"call_{n + 1}", suffix=suffix, name=name, arguments=args)
            self.t.calls.append(call)
            return call.id, name, args

    def record_result(self, call_id: str, text: str) -> None:
        with self.lock:
            for c in self.t.calls:
                if c.id == call_id:
                    c.result = text


def _text_of(content: Any) -> str:
    """Anthropic tool_result content (a string or blocks) or a Responses output, as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                parts.append(b.get("text") or json.dumps(b))
            else:
                parts.append(str(b))
        return "\n".join(parts)
    return json.dumps(content)


# ---------------------------------------------------------------------------------------
# Anthropic Messages


def _anthropic(script: Script, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events answering one /v1/messages request."""
    tool_names = [t.get("name", "") for t in body.get("tools") or []]
    scripted = any("toolgate" in n for n in tool_names)
    if scripted:
        for m in body.get("messages", []):
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        script.record_result(b["tool_use_id"], _text_of(b.get("content")))
    nxt = script.next_call(tool_names) if scripted else None
    model = body.get("model", "claude-fake")
    events = [("message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    if nxt is None:
        text = script.t.final if scripted and script.t.final else "ok"
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
        ]
    else:
        call_id, name, args = nxt
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": call_id, "name": name, "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(args)}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
        ]
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# ---------------------------------------------------------------------------------------
# OpenAI Responses


def _responses(script: Script, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    # Codex groups an MCP server's tools in a `namespace` tool: named here `<ns>__<tool>`,
    # called as {"namespace": ns, "name": tool}.
    tool_names = []
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":
            tool_names += [f"{t.get('name')}__{sub.get('name')}" for sub in t.get("tools") or []]
        else:
            tool_names.append(t.get("name") or (t.get("function") or {}).get("name") or "")
    scripted = any("toolgate" in n for n in tool_names)
    items = body.get("input") if isinstance(body.get("input"), list) else []
    if scripted:
        for item in items:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                script.record_result(item.get("call_id", ""), _text_of(item.get("output")))
    nxt = script.next_call(tool_names) if scripted else None
    resp_id = f"resp_{len(script.t.requests)}"
    base = {"id": resp_id, "object": "response", "model": body.get("model", "gpt-fake"), "status": "in_progress", "output": []}
    if nxt is None:
        text = script.t.final if scripted and script.t.final else "ok"
        item = {"type": "message", "id": "msg_" + resp_id, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    else:
        call_id, name, args = nxt
        item = {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
                "arguments": json.dumps(args), "status": "completed"}
        namespaced = [t for t in body.get("tools") or [] if t.get("type") == "namespace"
                      and name.startswith(f"{t.get('name')}__")]
        if namespaced:
            ns = namespaced[0]["name"]
            item["namespace"], item["name"] = ns, name[len(ns) + 2:]
    done = {**base, "status": "completed", "output": [item],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}
    return [
        ("response.created", {"type": "response.created", "response": base}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]


# ---------------------------------------------------------------------------------------
# The server


class FakeModel:
    """Serves both APIs on 127.0.0.1 (an ephemeral port) until `close`."""

    def __init__(self, script: Script):
        self.script = script
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _json(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.script.t.requests.append({"method": "GET", "path": self.path})
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "gpt-fake", "object": "model"}], "models": []})
                else:
                    self._json(404, {"error": {"message": "not here"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {}
                fake.script.t.requests.append({"method": "POST", "path": self.path, "body": body})
                path = self.path.split("?")[0]
                if path.endswith("/messages/count_tokens"):
                    return self._json(200, {"input_tokens": 100})
                if path.endswith("/messages"):
                    events = _anthropic(fake.script, body)
                elif path.endswith("/responses"):
                    events = _responses(fake.script, body)
                else:
                    return self._json(404, {"error": {"message": f"no {path} here"}})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
