"""Helpers for the OpenAI-format tests: transcript builders and where the real data is.

Nothing here asserts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from journal import AgentEvent, Journal

from .helpers import REPO

SAMPLE = REPO / "fixtures" / "openai" / "airline-sample.json"
"""Three real airline sessions shipped with the repository."""


def real_transcripts() -> Path:
    """The 50 real airline transcripts (third-party data, MIT; see tests/data/transcripts/)."""
    return REPO / "tests" / "data" / "transcripts" / "airline-qwen2.5-7b.json"


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One OpenAI tool call; ``arguments`` as text or as an object."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(content: str | None = None, *calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An assistant message with text and/or tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content, **extra}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def user(text: str) -> dict[str, Any]:
    """A user message."""
    return {"role": "user", "content": text}


def tool(call_id: str | None, content: str, **extra: Any) -> dict[str, Any]:
    """A tool result."""
    message: dict[str, Any] = {"role": "tool", "content": content, **extra}
    if call_id is not None:
        message["tool_call_id"] = call_id
    return message


def write_json(path: Path, value: Any, *, indent: int | None = 1) -> Path:
    """Write ``value`` as JSON (pretty by default, so positions have lines)."""
    path.write_text(json.dumps(value, indent=indent) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, values: list[Any]) -> Path:
    """Write one JSON value per line."""
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    return path


def types_of(journal: Journal, session_id: str) -> list[str]:
    """The event types of a session, in order."""
    return [item.event.type for item in journal.events(session_id)]


def events_of(journal: Journal, session_id: str) -> list[AgentEvent]:
    """The events of a session, in order."""
    return [item.event for item in journal.events(session_id)]
