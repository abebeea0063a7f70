"""One-line summaries of events, stored beside each event so listings never decode payloads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .events import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentEvent,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    EventModel,
    FallbackInvoked,
    ModelCallFailed,
    RepairApplied,
    SessionStarted,
    UserInput,
    VerificationFailed,
)

__all__ = ["SUMMARY_WIDTH", "clip", "summarize"]

SUMMARY_WIDTH = 160
"""Longest summary stored, in characters."""


def clip(text: str, width: int = SUMMARY_WIDTH) -> str:
    """Flatten ``text`` to one line and cut it to ``width`` characters with an ellipsis.

    A long text (a tool's result) is flattened from its start only, when that is enough:
    the start flattened is the start of the whole flattened (a word the cut halves is
    still the start of that word), so once it is longer than ``width`` the rest cannot
    show.
    """
    long = len(text) > _HEAD * width
    line = text[: _HEAD * width] if long else text
    if not line.isprintable() or "  " in line or line[:1] == " " or line[-1:] == " ":
        line = " ".join(line.split())  # else there is nothing to flatten: see the test
    if long and len(line) <= width:  # a start that is mostly blank: the whole text decides
        line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


_HEAD = 4
"""`clip` flattens the first ``_HEAD * width`` characters of a longer text alone first."""


def _json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _proposed(event: ActionProposed) -> str:
    calls = ", ".join(
        [
            f"{call.tool}({call.args if isinstance(call.args, str) else _json(call.args)})"
            for call in event.calls
        ]
    )
    if calls:
        return f"{calls} | {event.text}" if event.text else calls
    return event.text or (f"reasoning: {event.reasoning}" if event.reasoning else "")


def _started(event: SessionStarted) -> str:
    text = f"{event.agent or 'unknown agent'} model={event.model or '-'}"
    if event.replay_of:
        text += f" replay_of={event.replay_of}"
    if event.forked_from:
        text += f" forked_from={event.forked_from}@{event.fork_seq}"
    return text


_SUMMARIES: dict[type[EventModel], Callable[[Any], str]] = {
    ActionProposed: _proposed,
    ActionCommitted: lambda e: f"{e.tool} -> {_json(e.result)}",
    UserInput: lambda e: e.text,
    AgentCompleted: lambda e: e.answer,
    ActionFailed: lambda e: f"{e.kind} {e.tool}{' abandoned' if e.abandoned else ''}: {e.message}",
    VerificationFailed: lambda e: f"{e.stage} {e.tool}".rstrip() + f": {e.message}",
    SessionStarted: _started,
    RepairApplied: lambda e: f"{e.level}: {e.detail}",
    CircuitOpened: lambda e: f"{e.tool} open after {e.failures} failures",
    FallbackInvoked: lambda e: f"{e.tool} -> {e.fallback}",
    ContextCompacted: lambda e: f"seq {e.from_seq}..{e.to_seq}: {e.summary}",
    AgentHalted: lambda e: f"{e.rule}: {e.reason}",
    ModelCallFailed: lambda e: (
        f"model {e.status_code or e.kind}"
        + (f" after {len(e.response)} chunks" if isinstance(e.response, list) else "")
        + f": {e.message}"
    ),
}
"""Each event type's line before `clip`, found by the event's exact type."""


def summarize(event: AgentEvent) -> str:
    """Return a one-line, human summary of ``event`` (at most `SUMMARY_WIDTH` characters)."""
    render = _SUMMARIES.get(type(event))
    if render is None:  # a subclass of an event model
        render = next(f for kind, f in _SUMMARIES.items() if isinstance(event, kind))
    return clip(render(event))
