"""An OpenAI-compatible HTTP server on 127.0.0.1 whose model is a small deterministic policy.

Run as a process (``python tests/fake_openai.py``: it prints its port on the first line,
then serves until killed), so a test can stop it and show that a replay needs no server.
It answers ``POST /v1/chat/completions`` (with ``stream=True`` too: server-sent events,
usage in the last chunk) and ``POST /v1/responses``, from what the conversation holds:

* a user message ``order N`` → a ``lookup_order`` call;
* after the lookup → ``check_stock(sku, quantity)``, the quantity written as a string
  when the user spelled it out (``three``): the planted bug of the scratch shop;
* after the stock check → ``send_email``; after the e-mail → the final answer;
* a tool message with ``"error"`` → an apology as the final answer.

``POST /v1/responses`` with ``stream=True`` sends ``response.created`` and
``response.completed`` events.

Call ids, created times and completion ids are derived from the conversation, so the same
conversation gets the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Chat messages, or Responses API input items seen as messages."""
    if "messages" in body:
        return list(body["messages"])
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for item in items or []:
        if item.get("type") == "function_call_output":
            messages.append({"role": "tool", "content": item.get("output", "")})
        elif item.get("type") == "function_call":
            messages.append({"role": "assistant", "tool_call": item.get("name")})
        elif "role" in item:
            messages.append(item)
    return messages


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def decide(messages: list[dict[str, Any]]) -> tuple[str | None, tuple[str, dict[str, Any]] | None]:
    """The policy: (text, None) to answer, or (None, (tool, arguments)) to call a tool."""
    question = next(_text(m.get("content")) for m in messages if m.get("role") == "user")
    results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
    order = re.search(r"order (\d+)", question)
    order_id = order.group(1) if order else "0"
    if results and '"error"' in results[-1]:
        return f"Sorry, I could not help with order {order_id}: {results[-1]}", None
    if len(results) == 0:
        return None, ("lookup_order", {"order_id": order_id})
    if len(results) == 1:
        found = json.loads(results[0])
        word = next((w for w in WORDS if w in question.split()), None)
        quantity: Any = str(WORDS[word]) if word else 1
        return None, ("check_stock", {"sku": found["sku"], "quantity": quantity})
    if len(results) == 2:
        return None, ("send_email", {"to": "customer@example.com", "body": f"order {order_id}"})
    return f"Order {order_id} is in stock; I e-mailed you.", None


def _chat_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    text, call = decide(messages)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        name, arguments = call
        message["tool_calls"] = [
            {
                "id": f"call_{_digest(messages)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    return message


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    messages = _conversation(body)
    message = _chat_message(messages)
    return {
        "id": f"chatcmpl-{_digest(messages)}",
        "object": "chat.completion",
        "created": 1_795_000_000 + len(messages),
        "model": body.get("model", "fake-1"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10 * len(messages), "completion_tokens": 7, "total_tokens": 0},
    }


def chat_chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The same completion as a stream: the text in two pieces, a call's arguments in two."""
    whole = chat_completion(body)
    message = whole["choices"][0]["message"]
    base = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        text = message["content"]
        deltas += [{"content": text[: len(text) // 2]}, {"content": text[len(text) // 2 :]}]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": call["function"]["name"],
                            "arguments": arguments[:half],
                        },
                    }
                ]
            }
        )
        deltas.append(
            {"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}
        )
    chunks = [base | {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    finish = whole["choices"][0]["finish_reason"]
    chunks.append(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append(base | {"choices": [], "usage": whole["usage"]})
    return chunks


def response(body: dict[str, Any]) -> dict[str, Any]:
    """The same decision as a Responses API response."""
    messages = _conversation(body)
    text, call = decide(messages)
    output: list[dict[str, Any]] = []
    if call is not None:
        name, arguments = call
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{_digest(messages)}",
                "call_id": f"call_{_digest(messages)}",
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        )
    else:
        output.append(
            {
                "type": "message",
                "id": f"msg_{_digest(messages)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    return {
        "id": f"resp_{_digest(messages)}",
        "object": "response",
        "created_at": 1_795_000_000 + len(messages),
        "model": body.get("model", "fake-1"),
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools", []),
        "usage": {
            "input_tokens": 10 * len(messages),
            "output_tokens": 7,
            "total_tokens": 10 * len(messages) + 7,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


class Handler(BaseHTTPRequestHandler):
    """Routes the two endpoints; anything else is a 404."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        if self.path.endswith("/chat/completions") and body.get("stream"):
            self._events([json.dumps(chunk) for chunk in chat_chunks(body)] + ["[DONE]"])
        elif self.path.endswith("/chat/completions"):
            self._json(chat_completion(body))
        elif self.path.endswith("/responses") and body.get("stream"):
            whole = response(body)
            started = whole | {"status": "in_progress", "output": []}
            self._events(
                [
                    json.dumps(
                        {"type": "response.created", "sequence_number": 0, "response": started}
                    ),
                    json.dumps(
                        {"type": "response.completed", "sequence_number": 1, "response": whole}
                    ),
                ]
            )
        elif self.path.endswith("/responses"):
            self._json(response(body))
        else:
            self.send_response(404)
            self.end_headers()

    def _json(self, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events(self, payloads: list[str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for payload in payloads:
            self.wfile.write(f"data: {payload}\n\n".encode())
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


class Delaying(Handler):
    """`Handler`, answering a request with an ``x-delay`` header that many seconds late."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        time.sleep(float(self.headers.get("x-delay", "0")))
        super().do_POST()


class Faulty(Handler):
    """`Handler`, answering its next requests with the faults queued in `faults`.

    Each request takes the first entry: None answers as usual; ``"429"``, ``"500"``,
    ``"529"`` answer with that status and an OpenAI-style error body; ``"break:N"`` sends
    the first N chunks of a stream, then an error event (the client raises ``APIError``
    mid-stream). `requests` counts what reached the server.
    """

    faults: list[str | None] = []
    requests: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.requests.append(self.path)
        fault = self.faults.pop(0) if self.faults else None
        if fault is None:
            return super().do_POST()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if fault.startswith("break:"):
            kept = int(fault.partition(":")[2])
            chunks = [json.dumps(chunk) for chunk in chat_chunks(body)[:kept]]
            error = {"error": {"message": "the stream was cut", "type": "server_error"}}
            self._events([*chunks, json.dumps(error)])
            return None
        status = int(fault)
        kinds = {429: "rate_limit_exceeded", 500: "server_error", 529: "overloaded_error"}
        data = json.dumps(
            {"error": {"message": f"fault {status}", "type": kinds.get(status, "error")}}
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None


@contextmanager
def serving(handler: type[Handler] = Handler, port: int = 0) -> Iterator[str]:
    """Serve from a thread while the block runs; yields the base URL (``.../v1``).

    ``port`` 0 takes a free one; another serves again where a stopped server did.
    """
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main() -> None:
    """Serve on an ephemeral port; print it first."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
