"""One-line summaries of events, stored beside each event so listings never decode payloads."""

from __future__ import annotations

from typing import assert_never

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
    FallbackInvoked,
    RepairApplied,
    SessionStarted,
    UserInput,
    VerificationFailed,
)

__all__ = ["SUMMARY_WIDTH", "clip", "summarize"]

SUMMARY_WIDTH = 160
"""Longest summary stored, in characters."""


def clip(text: str, width: int = SUMMARY_WIDTH) -> str:
    """Flatten ``text`` to one line and cut it to ``width`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def summarize(event: AgentEvent) -> str:
    """Return a one-line, human summary of ``event`` (at most `SUMMARY_WIDTH` characters)."""
    # The most frequent types first: each case is an isinstance check.
    match event:
        case ActionProposed():
            calls = ", ".join(
                f"{call.tool}({call.args if isinstance(call.args, str) else _json(call.args)})"
                for call in event.calls
            )
            reasoning = f"reasoning: {event.reasoning}" if event.reasoning else ""
            text = calls or event.text or reasoning
            if calls and event.text:
                text += f" | {event.text}"
        case ActionCommitted():
            text = f"{event.tool} -> {_json(event.result)}"
        case UserInput():
            text = event.text
        case AgentCompleted():
            text = event.answer
        case ActionFailed():
            text = f"{event.kind} {event.tool}: {event.message}"
        case VerificationFailed():
            text = f"{event.stage} {event.tool}: {event.message}"
        case SessionStarted():
            text = f"{event.agent or 'unknown agent'} model={event.model or '-'}"
            if event.replay_of:
                text += f" replay_of={event.replay_of}"
            if event.forked_from:
                text += f" forked_from={event.forked_from}@{event.fork_seq}"
        case RepairApplied():
            text = f"{event.level}: {event.detail}"
        case CircuitOpened():
            text = f"{event.tool} open after {event.failures} failures"
        case FallbackInvoked():
            text = f"{event.tool} -> {event.fallback}"
        case ContextCompacted():
            text = f"seq {event.from_seq}..{event.to_seq}: {event.summary}"
        case AgentHalted():
            text = f"{event.rule}: {event.reason}"
        case _:
            assert_never(event)
    return clip(text)
