"""The OpenAI-compatible wire formats: chat completions and the Responses API.

Both map to events with the functions the captured openai client uses
(`capture.requests`: `conversation_turn`, `proposal_of`), so a session recorded by the
proxy holds what the wrapped client would have journaled for the same exchanges.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from journal import ActionProposed
from journal.formats import MODEL_SETTINGS, content_text, system_prompt_of

from ..clients.openai_streams import TERMINAL
from ..requests import conversation_turn, from_model, proposal_of
from .wire import ReplyKey, StartFields, Turn, Wire, sse_event

__all__ = ["CHAT", "RESPONSES", "function_tools"]

RESPONSES_SETTINGS = (*MODEL_SETTINGS, "max_output_tokens", "reasoning", "text", "truncation")
"""Responses API request parameters that are the model's settings."""


def function_tools(tools: object) -> list[dict[str, Any]]:
    """The tools of a request that are functions with a name (built-in tools are not)."""
    named: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function", tool)
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            named.append(dict(tool))
    return named


def _settings(request: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {name: request[name] for name in names if name in request}


def _chat_start(request: Mapping[str, Any]) -> StartFields:
    messages = request.get("messages")
    prompt = system_prompt_of(messages)[0] if isinstance(messages, list) else ""
    model = request.get("model")
    return StartFields(
        model=model if isinstance(model, str) else None,
        system_prompt=prompt,
        tools=function_tools(request.get("tools")),
        model_settings=_settings(request, MODEL_SETTINGS),
    )


def _responses_start(request: Mapping[str, Any]) -> StartFields:
    items = request.get("input")
    prompt = request.get("instructions")
    if not isinstance(prompt, str):
        prompt = system_prompt_of(items)[0] if isinstance(items, list) else ""
    model = request.get("model")
    return StartFields(
        model=model if isinstance(model, str) else None,
        system_prompt=prompt,
        tools=function_tools(request.get("tools")),
        model_settings=_settings(request, RESPONSES_SETTINGS),
    )


def _turn(messages: Sequence[Any]) -> Turn:
    inputs, results = conversation_turn(messages)
    return Turn(
        inputs, [(str(call_id), text, failed) for call_id, text, failed in results if call_id]
    )


def _chat_proposal(response: Any, stream: bool, latency_ms: float | None) -> ActionProposed:
    return proposal_of("chat", response, stream=stream, latency_ms=latency_ms)


def _responses_proposal(response: Any, stream: bool, latency_ms: float | None) -> ActionProposed:
    return proposal_of("responses", response, stream=stream, latency_ms=latency_ms)


def _reply_key(message: Any) -> ReplyKey | None:
    """A chat assistant message's text and call ids; a Responses output item's."""
    if not from_model(message):
        return None
    if message.get("type") in ("function_call", "custom_tool_call"):
        return "", (str(message.get("call_id")),)
    if message.get("type") == "reasoning":
        return "", ()
    calls = message.get("tool_calls") or []
    ids = tuple(str(call.get("id")) for call in calls if isinstance(call, Mapping))
    return content_text(message.get("content"))[0], ids


def _chat_terminal(event: str | None, data: Any) -> bool:
    return isinstance(data, str) and data == "[DONE]"


def _chat_failed(event: str | None, data: Any) -> bool:
    return isinstance(data, Mapping) and "error" in data


def _responses_terminal(event: str | None, data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("type") in TERMINAL


def _responses_failed(event: str | None, data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("type") in ("error", "response.failed")


def _chat_events(chunks: Sequence[Any]) -> Iterator[bytes]:
    for chunk in chunks:
        yield sse_event(chunk)


def _responses_events(chunks: Sequence[Any]) -> Iterator[bytes]:
    for chunk in chunks:
        kind = chunk.get("type") if isinstance(chunk, Mapping) else None
        yield sse_event(chunk, kind if isinstance(kind, str) else None)


def _error(status: int, message: str, details: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "agent_journal_replay",
            "param": None,
            "code": status,
            **details,
        }
    }


CHAT = Wire(
    name="openai-chat",
    family="openai",
    path="/v1/chat/completions",
    start=_chat_start,
    turn=_turn,
    proposal=_chat_proposal,
    reply_key=_reply_key,
    terminal=_chat_terminal,
    failed=_chat_failed,
    events=_chat_events,
    end=sse_event("[DONE]"),
    error=_error,
)
"""``POST /v1/chat/completions``, with ``stream`` too (``data:`` events, ``[DONE]``)."""

RESPONSES = Wire(
    name="openai-responses",
    family="openai",
    path="/v1/responses",
    start=_responses_start,
    turn=_turn,
    proposal=_responses_proposal,
    reply_key=_reply_key,
    terminal=_responses_terminal,
    failed=_responses_failed,
    events=_responses_events,
    end=b"",
    error=_error,
)
"""``POST /v1/responses``, with ``stream`` too (named events up to ``response.completed``)."""
