"""Pieces of the OpenAI chat format mapped to event fields: calls, usage, reasoning, text.

Shared by the transcript importer (`journal.formats.openai_import`), the openai-client capture
(`capture.clients.openai_journaled`) and the model provider on the openai client
(`agentloop.openai_provider`), so a message means the same thing in all three.

* Tool calls: ``{"id", "type": "function", "function": {"name", "arguments"}}``;
  ``arguments`` is JSON text or an object, kept as the raw string when it is not a JSON
  object. The legacy single ``function_call`` is read as one call.
* Usage: ``prompt_tokens`` / ``completion_tokens`` (chat completions) or ``input_tokens``
  / ``output_tokens`` (responses), cached tokens from ``prompt_tokens_details``,
  ``input_tokens_details`` or ``cache_read_input_tokens``; a ``cost`` beside them.
* Reasoning: ``reasoning_content`` (vLLM, DeepSeek), ``reasoning`` (OpenRouter, Ollama) or
  ``thinking``, the first that is a string.
* Content: a string, or a list of parts whose ``text`` parts are joined; other parts
  (images, audio) are named so the caller can report them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..canonical import canonical_bytes, dumps_canonical, loads_strict
from ..errors import InvalidEventError
from ..events import ActionProposed, ToolCall, ToolSpec, Usage, arguments_text

__all__ = [
    "MODEL_SETTINGS",
    "REASONING_FIELDS",
    "ParsedCalls",
    "PendingCalls",
    "content_text",
    "cost_of",
    "parse_arguments",
    "proposal_from_completion",
    "proposal_from_message",
    "proposal_from_response",
    "reasoning_of",
    "response_body",
    "system_prompt_of",
    "tool_calls_of",
    "tool_specs_of",
    "usage_of",
]

REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
"""Message fields read as the model's reasoning, in order of preference."""

MODEL_SETTINGS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "reasoning_effort",
    "parallel_tool_calls",
    "tool_choice",
)
"""Chat-completion request parameters that are the model's settings."""


def content_text(content: Any) -> tuple[str, list[str]]:
    """Return a message content's text and the types of the parts that are not text.

    ``None`` is empty text; a list of parts keeps its ``text`` parts joined by newlines.
    """
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, list):
        texts: list[str] = []
        other: list[str] = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
            else:
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                other.append(str(kind))
        return "\n".join(texts), other
    return "", [type(content).__name__]


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | str, bool]:
    """Return a call's arguments as emitted (an object, or the raw text) and whether valid.

    JSON text that is an object becomes the object; anything else (invalid JSON, a JSON
    array or number) is kept as the raw string. ``None`` or ``""`` are no arguments.
    """
    if raw is None or raw == "":
        return {}, True
    if isinstance(raw, Mapping):
        return dict(raw), True
    if not isinstance(raw, str):
        try:
            return dumps_canonical(raw).decode("utf-8"), False
        except InvalidEventError:
            return repr(raw), False
    try:
        value = loads_strict(raw)
    except (ValueError, UnicodeDecodeError):
        return raw, False
    return (value, True) if isinstance(value, dict) else (raw, False)


def _text_of(raw: Any, args: dict[str, Any] | str) -> str:
    """The arguments' text as emitted: the raw string, or the text of what was given."""
    return raw if isinstance(raw, str) else arguments_text(args)


@dataclass
class ParsedCalls:
    """The tool calls of one assistant message, and what could not be read of them."""

    calls: list[ToolCall] = field(default_factory=list)
    invalid_arguments: list[str] = field(default_factory=list)
    """Call ids whose arguments were kept as a raw string."""
    unreadable: list[str] = field(default_factory=list)
    """One description per call that has no function name (not mapped)."""
    missing_ids: int = 0
    """Calls without an id, given ``<prefix>-<n>``."""


def tool_calls_of(message: Mapping[str, Any], id_prefix: str = "call") -> ParsedCalls:
    """Read an assistant message's ``tool_calls`` (or legacy ``function_call``)."""
    parsed = ParsedCalls()
    entries: list[Any] = []
    given = message.get("tool_calls")
    if isinstance(given, list):
        entries.extend(given)
    elif given not in (None, {}, ""):
        parsed.unreadable.append(f"tool_calls is {type(given).__name__}, not an array")
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        entries.append({"function": legacy})
    for index, entry in enumerate(entries):
        function = entry.get("function") if isinstance(entry, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            parsed.unreadable.append(f"tool call #{index} has no function name")
            continue
        assert isinstance(function, Mapping) and isinstance(entry, Mapping)
        call_id = entry.get("id")
        if not isinstance(call_id, str) or not call_id:
            parsed.missing_ids += 1
            call_id = f"{id_prefix}-{index}"
        raw = function.get("arguments")
        args, valid = parse_arguments(raw)
        if not valid:
            parsed.invalid_arguments.append(call_id)
        parsed.calls.append(
            ToolCall(call_id=call_id, tool=name, args=args, arguments=_text_of(raw, args))
        )
    return parsed


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_of(usage: Any) -> Usage:
    """Map an OpenAI ``usage`` object (chat completions or responses) to `Usage`."""
    if not isinstance(usage, Mapping):
        return Usage()
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=_count(usage.get("prompt_tokens", usage.get("input_tokens"))),
        output_tokens=_count(usage.get("completion_tokens", usage.get("output_tokens"))),
        cached_tokens=_count(
            cached if cached is not None else usage.get("cache_read_input_tokens")
        ),
    )


def cost_of(*sources: Any) -> float | None:
    """The first finite, non-negative ``cost`` number found in ``sources`` (mappings)."""
    for source in sources:
        value = source.get("cost") if isinstance(source, Mapping) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def reasoning_of(message: Mapping[str, Any]) -> str | None:
    """The message's reasoning text, from the first of `REASONING_FIELDS` that is a string."""
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def proposal_from_message(
    message: Mapping[str, Any],
    *,
    usage: Any = None,
    model: str | None = None,
    latency_ms: float | None = None,
    cost: float | None = None,
    id_prefix: str = "call",
) -> tuple[ActionProposed, ParsedCalls]:
    """Map one assistant message (the model's whole output) to ``action_proposed``.

    ``usage``, ``model`` and ``cost`` default to the message's own fields. Returns the
    event and the parsed calls (for what could not be read).
    """
    parsed = tool_calls_of(message, id_prefix)
    text, _ = content_text(message.get("content"))
    own_model = message.get("model")
    return (
        ActionProposed(
            calls=parsed.calls,
            text=text if text or not parsed.calls else None,
            reasoning=reasoning_of(message),
            model=model if model is not None else own_model if isinstance(own_model, str) else None,
            usage=usage_of(usage if usage is not None else message.get("usage")),
            latency_ms=latency_ms,
            cost=cost if cost is not None else cost_of(message, message.get("usage")),
        ),
        parsed,
    )


def response_body(response: Any) -> dict[str, Any]:
    """A chat completion as a plain JSON object (an openai model object, or a dict already).

    Raises:
        TypeError: neither a mapping nor an object with ``model_dump``.
    """
    if isinstance(response, Mapping):
        return dict(response)
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        body = dump(mode="json")
        if isinstance(body, dict):
            return body
    raise TypeError(f"not a chat completion: {type(response).__name__}")


def proposal_from_completion(
    body: Mapping[str, Any], *, latency_ms: float | None = None, id_prefix: str = "call"
) -> ActionProposed:
    """Map a whole chat completion (its first choice, usage, model, cost) to ``action_proposed``."""
    choices = body.get("choices") or [{}]
    first = choices[0] if isinstance(choices[0], Mapping) else {}
    message = first.get("message")
    usage = body.get("usage")
    model = body.get("model")
    proposal, _ = proposal_from_message(
        message if isinstance(message, Mapping) else {},
        usage=usage,
        model=model if isinstance(model, str) else None,
        latency_ms=latency_ms,
        cost=cost_of(usage, body),
        id_prefix=id_prefix,
    )
    return proposal


def proposal_from_response(
    body: Mapping[str, Any], *, latency_ms: float | None = None
) -> ActionProposed:
    """Map a Responses API response (its ``output`` items, usage, model) to ``action_proposed``.

    ``function_call`` items are the calls (``call_id``, ``name``, ``arguments`` text),
    ``message`` items the text, ``reasoning`` items' summaries the reasoning.
    """
    calls: list[ToolCall] = []
    texts: list[str] = []
    thoughts: list[str] = []
    for index, item in enumerate(body.get("output") or []):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call" and isinstance(item.get("name"), str):
            call_id = item.get("call_id") or item.get("id") or f"call-{index}"
            raw = item.get("arguments")
            args, _ = parse_arguments(raw)
            calls.append(
                ToolCall(
                    call_id=str(call_id),
                    tool=item["name"],
                    args=args,
                    arguments=_text_of(raw, args),
                )
            )
        elif kind == "message":
            text, _ = content_text(item.get("content"))
            texts.append(text)
        elif kind == "reasoning":
            summary, _ = content_text(item.get("summary"))
            thoughts.append(summary)
    model = body.get("model")
    usage = body.get("usage")
    text = "".join(texts)
    return ActionProposed(
        calls=calls,
        text=text if text or not calls else None,
        reasoning="\n".join(t for t in thoughts if t) or None,
        model=model if isinstance(model, str) else None,
        usage=usage_of(usage),
        latency_ms=latency_ms,
        cost=cost_of(usage, body),
    )


@dataclass
class PendingCalls:
    """Calls proposed and not answered yet, answered by tool results in order.

    A result names its call by id; when ids repeat, the first unanswered call with that id
    takes it (pairing by position); a result whose id matches no call takes the first
    unanswered call when asked to (`take` with ``by_position=True``).
    """

    calls: list[ToolCall] = field(default_factory=list)

    def reset(self, calls: list[ToolCall]) -> list[ToolCall]:
        """Start waiting for ``calls``; return the calls that were never answered."""
        unanswered, self.calls = self.calls, list(calls)
        return unanswered

    def repeated(self, call_id: str) -> bool:
        """True when more than one waiting call has this id."""
        return sum(call.call_id == call_id for call in self.calls) > 1

    def take(
        self, call_id: str | None, *, tool: str | None = None, by_position: bool = False
    ) -> ToolCall | None:
        """Remove and return the call answered by a result with ``call_id`` (or ``tool``)."""
        for index, call in enumerate(self.calls):
            if (call_id is not None and call.call_id == call_id) or (
                call_id is None and tool is not None and call.tool == tool
            ):
                return self.calls.pop(index)
        if by_position and self.calls:
            return self.calls.pop(0)
        return None


def system_prompt_of(messages: Sequence[Any]) -> tuple[str, int, list[str]]:
    """The leading ``system`` / ``developer`` messages as one prompt.

    Returns the prompt (texts joined by blank lines), the index of the first other message,
    and the types of content parts that are not text.
    """
    texts: list[str] = []
    other: list[str] = []
    first = 0
    while first < len(messages):
        message = messages[first]
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            break
        text, parts = content_text(message.get("content"))
        texts.append(text)
        other.extend(parts)
        first += 1
    return "\n\n".join(texts), first, other


def tool_specs_of(tools: Any) -> tuple[list[ToolSpec], list[str]]:
    """Tool specs from an OpenAI ``tools`` list, and a problem per entry without a name."""
    if tools is None:
        return [], []
    specs: list[ToolSpec] = []
    problems: list[str] = []
    for index, spec in enumerate(tools if isinstance(tools, list) else [tools]):
        function = spec.get("function", spec) if isinstance(spec, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(name, str):
            problems.append(f"tools[{index}] has no function name")
            continue
        parameters = function.get("parameters")
        parameters = dict(parameters) if isinstance(parameters, Mapping) else {}
        description = function.get("description")
        specs.append(
            ToolSpec(
                name=name,
                description=description if isinstance(description, str) else "",
                parameters=parameters,
                schema_hash=hashlib.sha256(canonical_bytes(parameters)).hexdigest(),
            )
        )
    return specs, problems
