"""A fake upstream for the proxy's tests: OpenAI-compatible and Anthropic, faults on demand.

`tests.fake_openai`'s deterministic policy answers ``/v1/chat/completions`` and
``/v1/responses``; ``/v1/messages`` answers Anthropic's way (a whole message, or the named
events of a stream). `Upstream.faults` queues what the next requests get instead: ``"429"``,
``"500"`` (an error status and body), ``"reset"`` (the connection closed unanswered),
``"break:N"`` (a stream cut after N events), ``"rst"`` (a TCP reset before any byte),
``"rst:N"`` (a chat stream reset once the agent has N of its events: it sets
`Upstream.got` when it has them), ``"slow:S"`` (a chat stream with S seconds between its
events) or ``"hold"`` (a chat stream that sends one event, then nothing until
`Upstream.go` is set), ``"stall"`` (no answer at all until `Upstream.go` is set).
``Upstream.requests`` counts what arrived.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

from tests import fake_openai


def _anthropic_conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        for block in content:
            if block.get("type") == "tool_result":
                result = block.get("content")
                text = result if isinstance(result, str) else result[0]["text"]
                messages.append({"role": "tool", "content": text})
            elif block.get("type") == "text":
                messages.append({"role": message["role"], "content": block["text"]})
            elif block.get("type") == "tool_use":
                messages.append({"role": "assistant", "tool_call": block["name"]})
    return messages


def anthropic_message(body: dict[str, Any]) -> dict[str, Any]:
    messages = _anthropic_conversation(body)
    text, call = fake_openai.decide(messages)
    digest = fake_openai._digest(messages)
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if call is not None:
        name, arguments = call
        content.append(
            {"type": "tool_use", "id": f"toolu_{digest}", "name": name, "input": arguments}
        )
    return {
        "id": f"msg_{digest}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10 * len(messages), "output_tokens": 7},
    }


def anthropic_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    whole = anthropic_message(body)
    start = {
        **whole,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": whole["usage"]["input_tokens"], "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            half = len(block["text"]) // 2
            for piece in (block["text"][:half], block["text"][half:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
        else:
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                }
            )
            text = json.dumps(block["input"])
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 7},
        }
    )
    events.append({"type": "message_stop"})
    return events


class Upstream(fake_openai.Handler):
    """The fake upstream's handler; see the module. Class-level queues: one server at a time."""

    faults: list[str | None] = []
    requests: list[str] = []
    lock = threading.Lock()
    got = threading.Event()
    """Set by the test when its agent has the events an ``rst:N`` stream waits for."""
    go = threading.Event()
    """Set by the test to let a ``hold`` stream go on."""

    def do_GET(self) -> None:  # noqa: N802
        if self.path.endswith("/models"):
            return self._json(
                {
                    "object": "list",
                    "data": [{"id": "fake-1", "object": "model", "owned_by": "test"}],
                }
            )
        self.send_response(404)
        self.end_headers()
        return None

    def do_POST(self) -> None:  # noqa: N802
        with self.lock:
            self.requests.append(self.path)
            fault = self.faults.pop(0) if self.faults else None
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        body = json.loads(raw)
        if fault == "reset":
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return None
        if fault == "rst":
            return self._reset()
        if fault == "stall":
            self.go.wait(30)
            return self._reset()
        if fault is not None and fault.startswith(("rst:", "slow:", "hold")):
            return self._paced(fake_openai.chat_chunks(body), fault)
        if fault is not None and not fault.startswith("break:"):
            status = int(fault)
            data = json.dumps(
                {"error": {"message": f"fault {status}", "type": "server_error"}}
            ).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("retry-after-ms", "5")
            else:
                self.send_header("x-should-retry", "false")
            self.end_headers()
            self.wfile.write(data)
            return None
        if self.path.endswith("/messages"):
            if body.get("stream"):
                events = anthropic_events(body)
                if fault:
                    return self._cut(events, int(fault.partition(":")[2]), named=True)
                return self._named(events)
            return self._json(anthropic_message(body))
        if fault and self.path.endswith("/chat/completions"):
            chunks = fake_openai.chat_chunks(body)
            return self._cut(chunks, int(fault.partition(":")[2]), named=False)
        self.rfile = _Replay(raw, self.rfile)
        self.headers.replace_header("Content-Length", str(len(raw)))
        return super().do_POST()

    def _named(self, events: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

    def _cut(self, events: list[dict[str, Any]], kept: int, *, named: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", "1000000")  # promised, never sent: a cut stream
        self.end_headers()
        for event in events[:kept]:
            head = f"event: {event['type']}\n" if named else ""
            self.wfile.write(f"{head}data: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _reset(self) -> None:
        """Close the connection with a TCP reset (RST), not a FIN."""
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _paced(self, chunks: list[dict[str, Any]], fault: str) -> None:
        """A chat stream reset after N events, slowed down, or held (see the module)."""
        kind, _, value = fault.partition(":")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        for index, event in enumerate([*events, b"data: [DONE]\n\n"]):
            if kind == "rst" and index == int(value):
                self.got.wait(10)
                return self._reset()
            if kind == "hold" and index == 1:
                self.go.wait(30)
            self.wfile.write(event)
            self.wfile.flush()
            if kind == "slow":
                time.sleep(float(value))
        return None


class _Replay:
    """The body read already, read again by the base handler."""

    def __init__(self, raw: bytes, rest: Any) -> None:
        self.raw, self.rest = raw, rest

    def read(self, size: int = -1) -> bytes:
        data, self.raw = self.raw, b""
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rest, name)


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # (so twenty agents at once get through)
    daemon_threads = True


@contextmanager
def upstream() -> Iterator[ThreadingHTTPServer]:
    """The fake upstream on 127.0.0.1 while the block runs (``server.url`` its root)."""
    Upstream.faults = []
    Upstream.requests = []
    Upstream.got, Upstream.go = threading.Event(), threading.Event()
    server = _Server(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def root(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"
