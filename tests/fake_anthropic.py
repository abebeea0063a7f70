"""A server speaking Anthropic's Messages API on 127.0.0.1, its model a deterministic policy.

``POST /v1/messages`` answers from what the conversation holds, with `tests.fake_openai`'s
policy (``order N`` → ``lookup_order``, then ``check_stock``, ``send_email``, the answer),
as a whole message or, with ``"stream": true``, the named server-sent events
``message_start`` ... ``message_stop``. A request with ``thinking`` gets a ``thinking`` block
(with its signature) and a ``redacted_thinking`` block before each answer, and the server
refuses (400) a conversation whose earlier assistant turns do not send them back unchanged,
as the real API does. Usage counts cache writes on a conversation's first call and cache
reads after, when the system prompt asks for caching.

`Anthropic.faults` queues what the next requests get instead: ``"429"``, ``"500"``,
``"529"`` (an error status and Anthropic's error body), ``"break:N"`` (a stream's first N
events, then an ``error`` event: the client raises mid-stream). `Anthropic.script`, when set,
is the event list every streamed answer sends (the property test's). Ids derive from the
conversation, so the same conversation gets the same bytes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.client_replays import threaded_server
from tests.proxy_upstream import anthropic_message

ERROR_TYPES = {
    400: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _thoughts(digest: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "thinking",
            "thinking": f"Plan {digest}: look first.",
            "signature": f"sig{digest}",
        },
        {"type": "redacted_thinking", "data": f"enc{digest}"},
    ]


def message(body: dict[str, Any]) -> dict[str, Any]:
    """The whole message answering ``body``."""
    whole = anthropic_message(body)
    digest = whole["id"].removeprefix("msg_")
    if body.get("thinking"):
        whole["content"] = [*_thoughts(digest), *whole["content"]]
    cached = any(isinstance(b, dict) and "cache_control" in b for b in body.get("system") or [])
    first = len(body.get("messages", [])) == 1
    whole["usage"] = {
        **whole["usage"],
        "cache_creation_input_tokens": 50 if cached and first else 0,
        "cache_read_input_tokens": 50 if cached and not first else 0,
    }
    return whole


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [text[:half], text[half:]]


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "redacted_thinking":
        return [{"type": "content_block_start", "index": index, "content_block": block}]
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _halves(block["text"])]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            *({"type": "thinking_delta", "thinking": p} for p in _halves(block["thinking"])),
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        text = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _halves(text)]
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
    ]


def events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The same message as a stream's events."""
    whole = message(body)
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    found: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(whole["content"]):
        found += _block_events(index, block)
        found.append({"type": "content_block_stop", "index": index})
    found.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    found.append({"type": "message_stop"})
    return found


def _thinking_kept(body: dict[str, Any]) -> bool:
    """Whether every earlier assistant turn sends its thinking blocks back as given."""
    if not body.get("thinking"):
        return True
    sent = body.get("messages", [])
    for at, turn in enumerate(sent):
        if turn.get("role") != "assistant" or not isinstance(turn.get("content"), list):
            continue
        expected = message({**body, "messages": sent[:at]})["content"][:2]
        given = [{k: v for k, v in b.items() if v is not None} for b in turn["content"][:2]]
        if given != expected:
            return False
    return True


class Anthropic(BaseHTTPRequestHandler):
    """The handler; see the module. Class-level queues: one server at a time."""

    faults: list[str | None] = []
    requests: list[dict[str, Any]] = []
    script: list[dict[str, Any]] | None = None
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.lock:
            self.requests.append(body)
            fault = self.faults.pop(0) if self.faults else None
        if not self.path.endswith("/v1/messages"):
            return self._error(404, "no such path")
        if fault is not None and not fault.startswith("break:"):
            return self._error(int(fault), f"fault {fault}")
        if not _thinking_kept(body):
            return self._error(400, "thinking blocks must be sent back unchanged")
        if not body.get("stream"):
            return self._json(200, message(body))
        sent = self.script if self.script is not None else events(body)
        if fault is not None:
            kept = int(fault.partition(":")[2])
            error = {"type": "error", "error": {"type": "overloaded_error", "message": "cut"}}
            sent = [*sent[:kept], error]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in sent:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()
        return None

    def _json(self, status: int, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-should-retry", "false")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, text: str) -> None:
        kind = ERROR_TYPES.get(status, "api_error")
        self._json(status, {"type": "error", "error": {"type": kind, "message": text}})

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@contextmanager
def serving() -> Iterator[str]:
    """The server on a free port while the block runs; yields its root URL."""
    Anthropic.faults, Anthropic.requests, Anthropic.script = [], [], None
    with threaded_server(Anthropic) as url:
        yield url
