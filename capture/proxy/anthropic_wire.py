"""Anthropic's messages API (``POST /v1/messages``) as the proxy journals it.

What a request and a response mean is read by the functions the captured ``anthropic``
client uses (`capture.clients.anthropic_messages`), so a session the proxy records holds
what the wrapped client would have journaled for the same exchanges. A stream is the named
events ``message_start`` ... ``message_stop``; an ``error`` event is a failure the client
raises.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from journal import ActionProposed

from ..clients.anthropic_messages import (
    TERMINAL,
    assembled_message,
    message_proposal,
    start_fields,
    text_of,
    turn_of,
)
from ..requests import proposal_of
from .wire import ReplyKey, Wire, sse_event

__all__ = ["MESSAGES", "assembled_message", "message_proposal"]


def _proposal(response: Any, stream: bool, latency_ms: float | None) -> ActionProposed:
    return proposal_of("anthropic", response, stream=stream, latency_ms=latency_ms)


def _reply_key(message: Any) -> ReplyKey | None:
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return None
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    ids = tuple(
        str(b.get("id")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"
    )
    return text_of(content), ids


def _terminal(event: str | None, data: Any) -> bool:
    return (event or _type(data)) == TERMINAL


def _failed(event: str | None, data: Any) -> bool:
    return (event or _type(data)) == "error"


def _type(data: Any) -> str | None:
    kind = data.get("type") if isinstance(data, Mapping) else None
    return kind if isinstance(kind, str) else None


def _events(chunks: Sequence[Any]) -> Iterator[bytes]:
    for chunk in chunks:
        yield sse_event(chunk, _type(chunk))


def _error(status: int, message: str, details: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "agent_journal_replay", "message": message, **details},
    }


MESSAGES = Wire(
    name="anthropic-messages",
    family="anthropic",
    path="/v1/messages",
    start=start_fields,
    turn=turn_of,
    proposal=_proposal,
    reply_key=_reply_key,
    terminal=_terminal,
    failed=_failed,
    events=_events,
    end=b"",
    error=_error,
)
"""``POST /v1/messages``, with ``stream`` too (named events up to ``message_stop``)."""
