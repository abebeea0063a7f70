"""The model calls and tool calls of OTLP spans, in the shapes the instrumentations write.

Three shapes of one model call are read into a `ModelCall` (chat messages in the OpenAI
form, the reply, usage, the error):

* GenAI semantic conventions 1.37 on: ``gen_ai.input.messages`` / ``gen_ai.output.messages``
  / ``gen_ai.system_instructions`` span attributes (JSON text of ``parts``);
* GenAI up to 1.36: messages as events (``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``), as log records
  tied to the span by its id, or as span events;
* OpenInference: ``llm.input_messages.N.message.*``, ``llm.output_messages.N.message.*``,
  ``llm.token_count.*``, ``llm.model_name``, ``llm.tools.N.tool.json_schema``.

A tool span (``gen_ai.operation.name`` ``execute_tool``, or OpenInference kind ``TOOL``) is a
`ToolSpan`. `projection` is what a replay compares of a request: the roles, texts, tool
calls (name and arguments as values) and tool results, without ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .otlp_read import LogRecord, Span

__all__ = ["ModelCall", "ToolSpan", "model_call_of", "projection", "tool_span_of"]

LEGACY_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""The GenAI message events (semconv up to 1.36) and the role each stands for."""
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
ERROR = 2


@dataclass
class ModelCall:
    """One model call read from a span: what was sent, what came back, or how it failed."""

    span: Span
    shape: str
    model: str | None
    inputs: list[dict[str, Any]] | None
    """The request's messages, OpenAI chat form; None when the trace holds no content."""
    reply: dict[str, Any] | None
    """The reply as an OpenAI chat message (``content``, ``tool_calls``); None: no content."""
    finish_reason: str | None
    usage: dict[str, int]
    tools: list[Any] = field(default_factory=list)
    failure: dict[str, Any] | None = None
    """``{"type", "message", "status_code"}`` when the call failed."""


@dataclass
class ToolSpan:
    """One tool call read from a span."""

    span: Span
    tool: str
    call_id: str | None
    arguments: Any
    result: Any
    failure: str | None


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _arguments_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id if isinstance(call_id, str) else None,
        "type": "function",
        "function": {"name": str(name or ""), "arguments": _arguments_text(arguments)},
    }


def _message_of_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A semconv 1.37 message (``role``, ``parts``) as OpenAI chat messages."""
    role = str(message.get("role") or "user")
    texts, calls, results = [], [], []
    for part in message.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind == "tool_call":
            calls.append(_call(part.get("id"), part.get("name"), part.get("arguments")))
        elif kind == "tool_call_response":
            response = part.get("response")
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": part.get("id"),
                    "content": response if isinstance(response, str) else _arguments_text(response),
                }
            )
    if results:
        return results
    out: dict[str, Any] = {"role": role, "content": "".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return [out]


def _semconv_messages(value: Any) -> list[dict[str, Any]] | None:
    parsed = _json(value)
    if not isinstance(parsed, list):
        return None
    out: list[dict[str, Any]] = []
    for message in parsed:
        if isinstance(message, Mapping):
            out.extend(_message_of_parts(message))
    return out


def _legacy_message(role: str, body: Any) -> dict[str, Any]:
    body = body if isinstance(body, Mapping) else {}
    content = body.get("content")
    if isinstance(content, list):
        content = "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    message: dict[str, Any] = {"role": role, "content": content}
    calls = [
        _call(
            call.get("id"),
            (call.get("function") or {}).get("name"),
            (call.get("function") or {}).get("arguments"),
        )
        for call in body.get("tool_calls") or []
        if isinstance(call, Mapping)
    ]
    if calls:
        message["tool_calls"] = calls
    if role == "tool":
        message["tool_call_id"] = body.get("id")
    return message


def _indexed(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` attributes as a list of ``{rest: value}`` by N."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix) :].partition(".")
        if index.isdigit() and rest:
            found.setdefault(int(index), {})[rest] = value
    return [found[index] for index in sorted(found)]


def _openinference_message(flat: Mapping[str, Any]) -> dict[str, Any]:
    role = str(flat.get("message.role") or "user")
    content = flat.get("message.content")
    if content is None:
        parts = _indexed(flat, "message.contents.")
        texts = [str(p.get("message_content.text", "")) for p in parts]
        content = "".join(texts) if texts else None
    message: dict[str, Any] = {"role": role, "content": content}
    calls = [
        _call(
            call.get("tool_call.id"),
            call.get("tool_call.function.name"),
            call.get("tool_call.function.arguments"),
        )
        for call in _indexed(flat, "message.tool_calls.")
    ]
    if calls:
        message["tool_calls"] = calls
    if role == "tool":
        message["tool_call_id"] = flat.get("message.tool_call_id")
    return message


def _failure(span: Span) -> dict[str, Any] | None:
    attributes = span.attributes
    if span.status_code != ERROR and "error.type" not in attributes:
        return None
    exception = next((e for e in span.events if e.name == "exception"), None)
    kind = attributes.get("error.type")
    message = span.status_message
    if exception is not None:
        kind = exception.attributes.get("exception.type") or kind
        message = exception.attributes.get("exception.message") or message
    status = attributes.get("http.response.status_code")
    return {
        "type": str(kind or "Exception"),
        "message": str(message or kind or "the call failed"),
        "status_code": status if isinstance(status, int) else None,
    }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def model_call_of(span: Span, logs: Sequence[LogRecord]) -> ModelCall | None:
    """The model call a span stands for (None: not a model call); ``logs``: its records."""
    a = span.attributes
    if a.get("openinference.span.kind") == "LLM":
        inputs = [_openinference_message(m) for m in _indexed(a, "llm.input_messages.")]
        outputs = [_openinference_message(m) for m in _indexed(a, "llm.output_messages.")]
        tools = [_json(t.get("tool.json_schema")) for t in _indexed(a, "llm.tools.")]
        return ModelCall(
            span=span,
            shape="openinference",
            model=a.get("llm.model_name") if isinstance(a.get("llm.model_name"), str) else None,
            inputs=inputs or None,
            reply=outputs[0] if outputs else None,
            finish_reason=a.get("llm.finish_reason")
            if isinstance(a.get("llm.finish_reason"), str)
            else None,
            usage={
                "prompt_tokens": _int(a.get("llm.token_count.prompt")),
                "completion_tokens": _int(a.get("llm.token_count.completion")),
                "cached_tokens": _int(a.get("llm.token_count.prompt_details.cache_read")),
            },
            tools=[t for t in tools if t is not None],
            failure=_failure(span),
        )
    if a.get("gen_ai.operation.name") not in MODEL_OPERATIONS:
        return None
    reasons = a.get("gen_ai.response.finish_reasons")
    finish = reasons[0] if isinstance(reasons, list) and reasons else None
    model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
    call = ModelCall(
        span=span,
        shape="genai",
        model=model if isinstance(model, str) else None,
        inputs=None,
        reply=None,
        finish_reason=finish if isinstance(finish, str) else None,
        usage={
            "prompt_tokens": _int(a.get("gen_ai.usage.input_tokens")),
            "completion_tokens": _int(a.get("gen_ai.usage.output_tokens")),
            "cached_tokens": _int(a.get("gen_ai.usage.cache_read.input_tokens")),
        },
        failure=_failure(span),
    )
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        instructions = _semconv_messages(a.get("gen_ai.system_instructions")) or []
        system = [{"role": "system", "content": m.get("content")} for m in instructions]
        sent = _semconv_messages(a.get("gen_ai.input.messages")) or []
        call.inputs = [*system, *sent] or None
        replies = _semconv_messages(a.get("gen_ai.output.messages"))
        call.reply = replies[0] if replies else None
        return call
    events = [(e.name, e.attributes) for e in span.events] + [(r.event_name, r.body) for r in logs]
    inputs_seen: list[dict[str, Any]] = []
    for name, body in events:
        if name in LEGACY_EVENTS:
            inputs_seen.append(_legacy_message(LEGACY_EVENTS[name], body))
        elif name == "gen_ai.choice" and isinstance(body, Mapping):
            call.shape = "genai-events"
            message = body.get("message")
            call.reply = _legacy_message("assistant", message)
    if inputs_seen:
        call.shape = "genai-events"
        call.inputs = inputs_seen
    return call


def tool_span_of(span: Span) -> ToolSpan | None:
    """The tool call a span stands for (None: not a tool span)."""
    a = span.attributes
    failure = _failure(span)
    if a.get("gen_ai.operation.name") == "execute_tool":
        name = a.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool ").strip()
        return ToolSpan(
            span,
            str(name),
            a.get("gen_ai.tool.call.id") if isinstance(a.get("gen_ai.tool.call.id"), str) else None,
            _json(a.get("gen_ai.tool.call.arguments")),
            a.get("gen_ai.tool.call.result"),
            None if failure is None else failure["message"],
        )
    if a.get("openinference.span.kind") == "TOOL":
        return ToolSpan(
            span,
            str(a.get("tool.name") or span.name),
            a.get("tool_call.id") if isinstance(a.get("tool_call.id"), str) else None,
            _json(a.get("tool.parameters") or a.get("input.value")),
            a.get("output.value"),
            None if failure is None else failure["message"],
        )
    return None


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content or None
    if isinstance(content, list):
        texts = [
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        ]
        return "".join(texts) or None
    return str(content)


def projection(messages: Sequence[Any]) -> list[list[Any]]:
    """What a replay compares of a request's messages: role, text, calls, and no ids.

    Each message is ``[role, text, [[tool, arguments], ...]]``, the arguments as values
    (an instrumentation may keep them parsed), text parts joined.
    """
    out: list[list[Any]] = []
    for message in messages:
        if not isinstance(message, Mapping):
            out.append(["item", str(message), []])
            continue
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            arguments = function.get("arguments")
            parsed = _json(arguments) if isinstance(arguments, str) else arguments
            calls.append([function.get("name"), arguments if parsed is None else parsed])
        out.append([message.get("role"), _content_text(message.get("content")), calls])
    return out
