"""What the proxy knows of one wire format: how its requests and responses map to events.

A `Wire` is a table of pure functions over the JSON a wire format sends (`openai_wire`:
chat completions and the Responses API; `anthropic_wire`: Anthropic's messages). The
proxy's server, sessions and replay know the formats only through it, so a new format is
one module that builds a `Wire`:

* ``start``: what the first request says of the model (`StartFields`);
* ``turn``: what a request's messages bring since the model's last output (`Turn`: the
  user's messages, the tool results answering its calls);
* ``proposal``: a response body (or a stream's chunk bodies) as ``action_proposed``;
* ``reply_key``: what identifies a message the model wrote (its text and call ids), so a
  request that carries it back is known to continue the conversation it was sent in;
* ``terminal`` / ``failed``: which stream event ends a response, which one is an error;
* ``events`` and ``end``: recorded chunk bodies as the bytes of the stream that sent them;
* ``error``: an error body in the format's own shape (the replay's refusals).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from journal import ActionProposed

from ..turns import StartFields, Turn

__all__ = ["Family", "ReplyKey", "StartFields", "Turn", "Wire", "proposal_key", "sse_event"]

Family = Literal["openai", "anthropic"]
"""Which upstream a wire format's requests go to."""


ReplyKey = tuple[str, tuple[str, ...]]
"""A model message as `Wire.reply_key` knows it: its text and its call ids."""


@dataclass(frozen=True)
class Wire:
    """One wire format, as the proxy serves it; see the module."""

    name: str
    """As journaled (``session_started.metadata.proxy.wire``): ``openai-chat``, ..."""
    family: Family
    path: str
    """The path the clients send it to (``/v1/chat/completions``)."""
    start: Callable[[Mapping[str, Any]], StartFields]
    turn: Callable[[Sequence[Any]], Turn]
    proposal: Callable[[Any, bool, float | None], ActionProposed]
    """``proposal(body_or_chunks, stream, latency_ms)``."""
    reply_key: Callable[[Any], ReplyKey | None]
    """The key of a message in a request, None when the model did not write it."""
    terminal: Callable[[str | None, Any], bool]
    """``terminal(event_name, data)``: whether a stream event ends the response."""
    failed: Callable[[str | None, Any], bool]
    """``failed(event_name, data)``: whether a stream event is an error the client raises."""
    events: Callable[[Sequence[Any]], Iterator[bytes]]
    """Recorded chunk bodies as the stream's bytes, one event each."""
    end: bytes
    """What a whole stream ends with after its events (chat's ``data: [DONE]``)."""
    error: Callable[[int, str, Mapping[str, Any]], dict[str, Any]]
    """``error(status, message, details)``: an error body as this format's servers send."""


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: ``event:`` (when named) and ``data:`` lines, a blank line."""
    payload = data if isinstance(data, str) else orjson.dumps(data).decode()
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def proposal_key(proposal: ActionProposed) -> ReplyKey:
    """The `ReplyKey` of the message the model wrote with ``proposal``."""
    return proposal.text or "", tuple(call.call_id for call in proposal.calls)
