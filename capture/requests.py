"""Model requests and responses as a capture journals them.

A request is journaled beside the response it got (``action_proposed.request``) so that a
replay can check that the code asks the same before it is given the recorded answer. A
conversation is resent whole at every call, so a request is kept as: the digest of all of
it (what a replay compares), the messages new since the session's previous request (from
the first one that differs), and its other parameters. The journal of a long session grows
with its messages, not with their square; `full_requests` rebuilds every request.

Responses are kept as the raw JSON the client parsed (``action_proposed.response``): a
replay rebuilds the very objects the code read. For a stream, the list of chunk bodies.
`proposal_of` maps each shape (chat completion, chat stream, Responses API, its stream)
to the fields of ``action_proposed``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic_core import to_jsonable_python

from journal import ActionProposed, canonical_bytes, json_stand_in, sets_ordered
from journal.formats import content_text, proposal_from_completion, proposal_from_response

from .clients.anthropic_messages import assembled_message, message_proposal
from .clients.genai_messages import assembled_response, response_proposal

__all__ = [
    "UNCOMPARED_PARAMETERS",
    "assembled_chat",
    "conversation_turn",
    "from_model",
    "full_requests",
    "jsonable",
    "proposal_of",
    "request_record",
    "sent_parameters",
]

UNCOMPARED_PARAMETERS = frozenset({"timeout", "extra_headers", "extra_query"})
"""Request parameters that change how the call is made, not what the model answers."""


def jsonable(value: object) -> Any:
    """A value as JSON: models and dataclasses as their fields, anything else as its repr.

    A repr loses its memory address (``<app.Handle object>``): it changes at every run.
    A one-shot iterator (a generator, sync or async) is named, never read: reading it would
    leave nothing for the code it was handed to. A set (or frozenset) in plain dicts, lists
    and tuples is a list in a fixed order: its own order follows the hash seed and what was
    added and removed, so two runs of the same code would journal two orders.
    """
    if isinstance(value, Iterator | AsyncIterator):
        return f"<{type(value).__name__}>"
    return json_value(sets_ordered(value), stable_repr)


def json_value(value: object, fallback: Callable[[Any], Any]) -> Any:
    """``to_jsonable_python(value, fallback=fallback)``, which never fails the code's call.

    Bytes that are not UTF-8 (which it refuses: the output of a failed
    ``subprocess.run(check=True)``) make the value's bytes base64 instead.
    """
    try:
        return to_jsonable_python(value, fallback=fallback)
    except UnicodeDecodeError:
        return to_jsonable_python(value, fallback=fallback, bytes_mode="base64")


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")
"""The memory address in a default repr (``<app.Handle object at 0x7f...>``)."""


def stable_repr(value: object) -> str:
    """``repr(value)`` without a memory address: it changes at every run."""
    return _ADDRESS.sub("", repr(value))


def sent_parameters(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What a request sends: ``kwargs`` without the client's "leave it out" markers.

    ``openai.NOT_GIVEN`` and ``openai.omit`` (and anthropic's) mean the parameter is not
    sent at all, so a request that passes one is the request that leaves the parameter out.
    """
    return {key: value for key, value in kwargs.items() if not _left_out(value)}


def _left_out(value: object) -> bool:
    kind = type(value)
    return kind.__module__.split(".")[0] in _SDKS and kind.__name__ in {"NotGiven", "Omit"}


_SDKS = frozenset({"openai", "anthropic"})
"""The client packages whose ``NotGiven`` and ``Omit`` markers leave a parameter out."""


def _messages_key(body: Mapping[str, Any]) -> str:
    """Where a request keeps its conversation: ``messages``, ``input`` or ``contents``."""
    if "messages" in body:
        return "messages"
    return next((key for key in ("input", "contents") if key in body), "messages")


def request_record(
    kwargs: Mapping[str, Any], previous: Sequence[Any]
) -> tuple[dict[str, Any], list[Any]]:
    """The record of a request, and its messages (the ``previous`` of the next request).

    Args:
        kwargs: what the code passed to ``create``.
        previous: the messages of the session's previous request (``[]`` at the first).
    """
    body = {
        key: json_stand_in(jsonable(value))  # NaN, huge integers: as strings (see events)
        for key, value in kwargs.items()
        if key not in UNCOMPARED_PARAMETERS
    }
    key = _messages_key(body)
    given = body.pop(key, [])
    messages = list(given) if isinstance(given, list) else [given]
    start = 0
    while start < min(len(previous), len(messages)) and canonical_bytes(
        previous[start]
    ) == canonical_bytes(messages[start]):
        start += 1
    whole = canonical_bytes({**body, key: given})
    record = {
        "digest": hashlib.sha256(whole).hexdigest(),
        "messages_key": key,
        "from": start,
        "messages": messages[start:],
        "params": body,
    }
    return record, messages


_MODEL_ITEM_TYPES = frozenset({"function_call", "reasoning", "custom_tool_call"})


_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
"""The chat role of a message as LangChain serialises it (its ``type``)."""


def role_of(message: Any) -> str | None:
    """A message's chat role: its ``role``, or the role of a LangChain message's ``type``."""
    if not isinstance(message, Mapping):
        return None
    role = message.get("role")
    if role is None and "content" in message:
        role = _LANGCHAIN_ROLES.get(str(message.get("type")))
    return role if isinstance(role, str) else None


def from_model(item: Any) -> bool:
    """Whether a conversation item is the model's own output (chat, Responses, LangChain)."""
    if not isinstance(item, dict):
        return False
    return role_of(item) == "assistant" or item.get("type") in _MODEL_ITEM_TYPES


def conversation_turn(
    messages: Sequence[Any],
) -> tuple[list[str], list[tuple[Any, str, bool]]]:
    """What the messages since the model's last output bring (chat, Responses, LangChain).

    The texts of the user's messages (a bare string item is one), and the tool results
    as ``(call_id, text, failed)``: chat ``tool`` messages (a LangChain one with ``status``
    ``error`` failed) and Responses ``function_call_output`` items, in their order.
    """
    last = max((i for i, item in enumerate(messages) if from_model(item)), default=-1)
    inputs: list[str] = []
    results: list[tuple[Any, str, bool]] = []
    for message in messages[last + 1 :]:
        if isinstance(message, str):
            inputs.append(message)
            continue
        if not isinstance(message, dict):
            continue
        text, _ = content_text(message.get("content"))
        role = role_of(message)
        if role == "user":
            inputs.append(text)
        elif role == "tool":
            results.append((message.get("tool_call_id"), text, message.get("status") == "error"))
        elif message.get("type") == "function_call_output":
            output = message.get("output")
            results.append(
                (
                    message.get("call_id"),
                    output if isinstance(output, str) else content_text(output)[0],
                    False,
                )
            )
    return inputs, results


def full_requests(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every request of a session, whole again, from its journaled records in order."""
    requests: list[dict[str, Any]] = []
    messages: list[Any] = []
    for record in records:
        messages = [*messages[: int(record.get("from", 0))], *record.get("messages", [])]
        params = dict(record.get("params", {}))
        requests.append({**params, str(record.get("messages_key", "messages")): list(messages)})
    return requests


def assembled_chat(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A chat completion body assembled from the chunk bodies of its stream."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    body: dict[str, Any] = {"choices": [{"index": 0, "message": {"role": "assistant"}}]}
    for chunk in chunks:
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) is not None:
                body[key] = chunk[key]
        if chunk.get("usage"):
            body["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    int(piece.get("index", 0)),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                body["choices"][0]["finish_reason"] = choice["finish_reason"]
    message = body["choices"][0]["message"]
    message["content"] = "".join(text) or None
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return body


def _completed_response(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Responses API response a stream of its events ends with."""
    for event in reversed(events):
        response = event.get("response")
        if isinstance(response, Mapping) and event.get("type", "").startswith("response."):
            return dict(response)
    return {}


def proposal_of(
    kind: str, response: Any, *, stream: bool, latency_ms: float | None
) -> ActionProposed:
    """The ``action_proposed`` of a response body (or chunk bodies, for a stream).

    ``kind`` is ``chat`` (chat completions), ``responses`` (the Responses API) or
    ``anthropic`` (Anthropic's Messages API: `capture.clients.anthropic_messages`) or
    ``genai`` (Gemini's ``generateContent``: `capture.clients.genai_messages`).
    """
    if kind == "genai":
        whole = assembled_response(response) if stream else response
        return response_proposal(whole if isinstance(whole, Mapping) else {}, latency_ms=latency_ms)
    if kind == "anthropic":
        message = assembled_message(response) if stream else response
        body = message if isinstance(message, Mapping) else {}
        return message_proposal(body, latency_ms=latency_ms)
    if kind == "chat":
        body = assembled_chat(response) if stream else response
        return proposal_from_completion(body, latency_ms=latency_ms)
    body = _completed_response(response) if stream else response
    return proposal_from_response(body, latency_ms=latency_ms)
