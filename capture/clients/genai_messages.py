"""Google's Gemini API (``google-genai``) as the journal reads it: pure functions over its JSON.

The JSON is the SDK's own objects as JSON, by their Python field names (``function_call``,
``thought_signature``, ``usage_metadata``; bytes as base64): a request as
`capture.clients.genai` records it (``model``, ``contents`` as a list of ``Content``, the
fields of the ``GenerateContentConfig`` beside them), a response as a
``GenerateContentResponse`` and a stream as the list of its chunks.

A request's ``system_instruction`` is the system prompt, the ``function_declarations`` of its
``tools`` the tool specs, in OpenAI's format as the journal keeps them (other tools, such as
Google Search or code execution, are not the agent's: left out of the specs, kept in the
request). A user content's ``text`` parts are the user's input and its ``function_response``
parts the results of the model's calls (a response whose only key is ``error`` makes one a
failure). A response's first candidate is the answer: its ``text`` parts the text, its
``thought`` parts the reasoning, its ``function_call`` parts the calls (the arguments, an
object, as canonical JSON, keys sorted, as the journal keeps the response). A call the model
gave no ``id`` is known by its name and its position among the calls of its content
(``lookup_order#0``), and the ``function_response`` of that name answers it, in order.
Thought signatures stay in the raw response and in the requests, verbatim. Usage:
``input_tokens`` is the ``prompt_token_count`` (the cached part included, as OpenAI counts
its prompt tokens), ``output_tokens`` the candidates' and the thoughts' tokens,
``cached_tokens`` the ``cached_content_token_count``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from journal import ActionProposed, ToolCall, Usage, canonical_bytes, json_stand_in

from ..turns import StartFields, Turn

__all__ = [
    "SETTINGS",
    "assembled_response",
    "call_ids",
    "finished",
    "response_proposal",
    "start_fields",
    "text_of",
    "turn_of",
]

SETTINGS = (
    "temperature",
    "top_p",
    "top_k",
    "candidate_count",
    "max_output_tokens",
    "stop_sequences",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "response_mime_type",
    "response_schema",
    "response_json_schema",
    "thinking_config",
    "tool_config",
    "safety_settings",
    "automatic_function_calling",
    "cached_content",
)
"""``GenerateContentConfig`` fields that are the model's settings."""


def _parts(content: Any) -> list[Mapping[str, Any]]:
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return [part for part in parts or () if isinstance(part, Mapping)]


def _texts(parts: Sequence[Mapping[str, Any]], *, thought: bool = False) -> list[str]:
    return [
        part["text"]
        for part in parts
        if isinstance(part.get("text"), str) and bool(part.get("thought")) is thought
    ]


def text_of(content: Any) -> str:
    """The text of a ``system_instruction`` (a string, a part, a content, a list of them)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text for text in (text_of(item) for item in content) if text)
    if isinstance(content, Mapping):
        if "parts" in content:
            return "\n".join(_texts(_parts(content)))
        if isinstance(content.get("text"), str):
            return str(content["text"])
    return ""


def _tool_specs(tools: Any) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else ():
        declared = tool.get("function_declarations") if isinstance(tool, Mapping) else None
        for declaration in declared or ():
            if not isinstance(declaration, Mapping) or not isinstance(declaration.get("name"), str):
                continue
            schema = declaration.get("parameters") or declaration.get("parameters_json_schema")
            function: dict[str, Any] = {"name": declaration["name"], "parameters": schema or {}}
            if isinstance(declaration.get("description"), str):
                function["description"] = declaration["description"]
            specs.append({"type": "function", "function": function})
    return specs


def start_fields(request: Mapping[str, Any]) -> StartFields:
    """What a session's first request says of the model (system prompt, tools, settings)."""
    model = request.get("model")
    return StartFields(
        model=model if isinstance(model, str) else None,
        system_prompt=text_of(request.get("system_instruction")),
        tools=_tool_specs(request.get("tools")),
        model_settings={name: request[name] for name in SETTINGS if name in request},
    )


def call_ids(parts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The call id of each ``function_call`` part: its ``id``, or its name and position."""
    found: list[str] = []
    for part in parts:
        call = part.get("function_call")
        if not isinstance(call, Mapping):
            continue
        given = call.get("id")
        found.append(
            given if isinstance(given, str) and given else f"{call.get('name')}#{len(found)}"
        )
    return found


def _from_model(content: Any) -> bool:
    return isinstance(content, Mapping) and content.get("role") == "model"


def _result_text(response: Any) -> tuple[str, bool]:
    """A ``function_response``'s text (its canonical JSON) and whether it is a failure."""
    if isinstance(response, Mapping) and set(response) == {"error"}:
        error = response["error"]
        return (error if isinstance(error, str) else _json_text(error)), True
    return _json_text(response), False


def _json_text(value: Any) -> str:
    return canonical_bytes(json_stand_in(value)).decode()


def turn_of(contents: Sequence[Any]) -> Turn:
    """What the contents after the model's last one bring: user texts, function results."""
    last = max((i for i, c in enumerate(contents) if _from_model(c)), default=-1)
    waiting: list[tuple[str, str]] = []  # (name, call id) of the model's last calls
    if last >= 0:
        parts = _parts(contents[last])
        calls = [p["function_call"] for p in parts if isinstance(p.get("function_call"), Mapping)]
        names = [str(call.get("name")) for call in calls]
        waiting = list(zip(names, call_ids(parts), strict=True))
    turn = Turn()
    for content in contents[last + 1 :]:
        parts = _parts(content)
        for part in parts:
            answer = part.get("function_response")
            if not isinstance(answer, Mapping):
                continue
            name = str(answer.get("name"))
            given = answer.get("id")
            if isinstance(given, str) and given:
                call_id = given
                waiting = [w for w in waiting if w[1] != given]
            else:
                match = next((w for w in waiting if w[0] == name), None)
                call_id = match[1] if match else f"{name}#?"
                if match is not None:
                    waiting.remove(match)
            text, failed = _result_text(answer.get("response"))
            turn.results.append((call_id, text, failed))
        texts = _texts(parts)
        if texts:
            turn.inputs.append("\n".join(texts))
    return turn


def _count(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


def _first_candidate(body: Mapping[str, Any]) -> Mapping[str, Any]:
    candidates = body.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return first if isinstance(first, Mapping) else {}


def response_proposal(
    body: Mapping[str, Any], *, latency_ms: float | None = None
) -> ActionProposed:
    """A ``GenerateContentResponse`` (whole, or a stream's assembled) as ``action_proposed``."""
    parts = _parts(_first_candidate(body).get("content"))
    called = [p["function_call"] for p in parts if isinstance(p.get("function_call"), Mapping)]
    calls = []
    for call, call_id in zip(called, call_ids(parts), strict=True):
        given = call.get("args")
        args = dict(given) if isinstance(given, Mapping) else {}
        # an object, no text: its canonical text (keys sorted), as the journal keeps the
        # response it came in, so that a replay of it gives the same text
        calls.append(
            ToolCall(
                call_id=call_id, tool=str(call.get("name")), args=args, arguments=_json_text(args)
            )
        )
    usage = body.get("usage_metadata")
    usage = usage if isinstance(usage, Mapping) else {}
    model = body.get("model_version")
    return ActionProposed(
        calls=calls,
        text="".join(_texts(parts)) or None,
        reasoning="".join(_texts(parts, thought=True)) or None,
        model=model if isinstance(model, str) else None,
        usage=Usage(
            input_tokens=_count(usage.get("prompt_token_count")),
            output_tokens=_count(usage.get("candidates_token_count"))
            + _count(usage.get("thoughts_token_count")),
            cached_tokens=_count(usage.get("cached_content_token_count")),
        ),
        latency_ms=latency_ms,
    )


def finished(chunk: Any) -> bool:
    """Whether a stream's chunk ends the response: each of its candidates has its reason."""
    candidates = chunk.get("candidates") if isinstance(chunk, Mapping) else None
    if not isinstance(candidates, list) or not candidates:
        return False
    return all(isinstance(c, Mapping) and c.get("finish_reason") for c in candidates)


def assembled_response(chunks: Sequence[Any]) -> dict[str, Any]:
    """The response a stream's chunks make up: the first candidate's parts joined in order.

    The other fields (usage, model version, finish reason) are the last chunk's that has
    them.
    """
    body: dict[str, Any] = {}
    parts: list[Any] = []
    candidate: dict[str, Any] = {}
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            continue
        body.update({k: v for k, v in chunk.items() if k != "candidates" and v is not None})
        first = _first_candidate(chunk)
        candidate.update({k: v for k, v in first.items() if k != "content"})
        parts.extend(_parts(first.get("content")))
    candidate["content"] = {"role": "model", "parts": parts}
    body["candidates"] = [candidate]
    return body
