"""A server speaking the Gemini API's REST format on 127.0.0.1, its model a deterministic policy.

``POST /{version}/models/{model}:generateContent`` answers from what the conversation holds, with
`tests.fake_openai`'s policy (``order N`` → ``lookup_order``, then ``check_stock``,
``send_email``, the answer), as one ``GenerateContentResponse``;
``:streamGenerateContent?alt=sse`` sends the same response as server-sent ``data:`` chunks
(the text in two pieces, the function call whole, the finish reason and the usage in the
last). A request whose ``generationConfig.thinkingConfig.includeThoughts`` is set gets a
thought part before each answer and a ``thoughtSignature`` (bytes that are not UTF-8, in
base64) on its first part, and the server refuses (400) a conversation whose earlier model
turns do not send their signatures back unchanged, as the real API does for function calls.
A request for JSON (``responseMimeType``) with no tools gets the JSON object
``{"question": ..., "answer": "in stock"}`` as its text. Usage counts the prompt, the
candidates, the thoughts and (after a conversation's first call) cached prompt tokens.

`Gemini.faults` queues what the next requests get instead: ``"429"``, ``"500"``, ``"503"``
(an error status and Google's error body), ``"break:N"`` (a stream's first N chunks, then an
error chunk: the client raises mid-stream). `Gemini.script`, when set, is the chunk list every
streamed answer sends (the property test's). Ids derive from the conversation, so the same
conversation gets the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests import fake_openai
from tests.client_replays import threaded_server

STATUS = {
    400: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's contents as chat messages, as `tests.fake_openai.decide` reads them."""
    messages: list[dict[str, Any]] = []
    for content in body.get("contents", []):
        role = "assistant" if content.get("role") == "model" else "user"
        for part in content.get("parts", []):
            if "functionResponse" in part:
                response = part["functionResponse"].get("response", {})
                result = response.get("result", response)
                messages.append({"role": "tool", "content": json.dumps(result)})
            elif "functionCall" in part:
                messages.append({"role": "assistant", "tool_call": part["functionCall"]["name"]})
            elif "text" in part and not part.get("thought"):
                messages.append({"role": role, "content": part["text"]})
    return messages


def _thinking(body: dict[str, Any]) -> bool:
    config = body.get("generationConfig", {}).get("thinkingConfig", {})
    # (the SDK sends this one field as ``include_thoughts``: either is read)
    return bool(config.get("includeThoughts") or config.get("include_thoughts"))


def _json_asked(body: dict[str, Any]) -> bool:
    """Whether the request asks for JSON and gives no tools (structured output)."""
    asked = body.get("generationConfig", {}).get("responseMimeType") == "application/json"
    return asked and not body.get("tools")


def _signature(digest: str) -> str:
    """A thought signature: opaque bytes (not UTF-8), base64 on the wire."""
    return base64.b64encode(b"\xff\xfe" + hashlib.sha256(digest.encode()).digest()[:10]).decode()


def response(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The whole ``GenerateContentResponse`` answering ``body``."""
    messages = _conversation(body)
    text, call = fake_openai.decide(messages)
    if _json_asked(body):  # structured output: the answer as the JSON object asked for
        question = messages[0]["content"] if messages else ""
        text, call = json.dumps({"question": question, "answer": "in stock"}), None
    digest = fake_openai._digest(messages)
    parts: list[dict[str, Any]] = []
    if _thinking(body):
        parts.append({"text": f"Plan {digest}: look first.", "thought": True})
    if text is not None:
        parts.append({"text": text})
    if call is not None:
        name, arguments = call
        parts.append({"functionCall": {"name": name, "args": arguments}})
    if _thinking(body):
        parts[1]["thoughtSignature"] = _signature(digest)
    prompt = 10 * len(messages)
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": 7,
        "totalTokenCount": prompt + 7,
    }
    if len(messages) > 1:
        usage["cachedContentTokenCount"] = 10
    if _thinking(body):
        usage["thoughtsTokenCount"] = 5
        usage["totalTokenCount"] += 5
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": f"resp_{digest}",
    }


def chunks(body: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """The same response as a stream's chunks."""
    whole = response(body, model)
    candidate = whole["candidates"][0]
    found: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        if "text" in part and not part.get("thought"):
            half = len(part["text"]) // 2
            pieces = [{**part, "text": part["text"][:half]}, {"text": part["text"][half:]}]
        else:
            pieces = [part]
        for piece in pieces:
            content = {"role": "model", "parts": [piece]}
            found.append({"candidates": [{"content": content, "index": 0}], "modelVersion": model})
    last = found[-1]["candidates"][0]
    last["finishReason"] = candidate["finishReason"]
    found[-1]["usageMetadata"] = whole["usageMetadata"]
    for chunk in found:
        chunk["responseId"] = whole["responseId"]
    return found


def _bytes(text: Any) -> bytes | None:
    """Base64 in either alphabet (the SDK sends the URL-safe one back) as its bytes."""
    if not isinstance(text, str):
        return None
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_"))


def _signatures_kept(body: dict[str, Any], model: str) -> bool:
    """Whether every earlier model turn sends its thought signature back as given."""
    if not _thinking(body):
        return True
    sent = body.get("contents", [])
    for at, turn in enumerate(sent):
        if turn.get("role") != "model":
            continue
        expected = response({**body, "contents": sent[:at]}, model)
        wanted = expected["candidates"][0]["content"]["parts"][1]["thoughtSignature"]
        given = [_bytes(part.get("thoughtSignature")) for part in turn.get("parts", [])]
        if _bytes(wanted) not in given:
            return False
    return True


class Gemini(BaseHTTPRequestHandler):
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
        path, _, query = self.path.partition("?")
        model, _, method = path.rpartition("/models/")[2].partition(":")
        if method not in ("generateContent", "streamGenerateContent"):
            return self._error(404, f"no such method: {self.path}")
        if self.headers.get("x-goog-api-key") is None:
            return self._error(400, "an API key is required")
        if fault is not None and not fault.startswith("break:"):
            return self._error(int(fault), f"fault {fault}")
        if not _signatures_kept(body, model):
            return self._error(400, "thought signatures must be sent back unchanged")
        if method == "generateContent":
            return self._json(200, response(body, model))
        if query != "alt=sse":
            return self._error(400, "streams are server-sent events here (alt=sse)")
        sent = self.script if self.script is not None else chunks(body, model)
        if fault is not None:
            kept = int(fault.partition(":")[2])
            cut = {"error": {"code": 503, "message": "stream cut", "status": STATUS[503]}}
            sent = [*sent[:kept], cut]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in sent:
            self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        self.wfile.flush()
        return None

    def _json(self, status: int, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, text: str) -> None:
        error = {"code": status, "message": text, "status": STATUS.get(status, "UNKNOWN")}
        self._json(status, {"error": error})

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@contextmanager
def serving() -> Iterator[str]:
    """The server on a free port while the block runs; yields its root URL."""
    Gemini.faults, Gemini.requests, Gemini.script = [], [], None
    with threaded_server(Gemini) as url:
        yield url
