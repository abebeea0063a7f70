"""The sessions a replay reads and writes: the recording, a free id, the target journal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from journal import (
    InvalidInputError,
    Journal,
    RecordedEvent,
    SessionNotFoundError,
    SessionStarted,
)

from .normalize import record_of

__all__ = [
    "free_session_id",
    "known_tools",
    "load_recording",
    "recorded_start",
    "session_records",
]


def load_recording(journal: Journal, session_id: str) -> tuple[list[RecordedEvent], SessionStarted]:
    """A session's events and its ``session_started``, checked to be a whole recording.

    Raises:
        SessionNotFoundError: no such session.
        InvalidInputError: seq 0 is not ``session_started``, or a seq is missing (a journal
            altered outside agent-journal: ``verify`` says more).
    """
    recorded = list(journal.events(session_id))
    if not recorded:
        raise SessionNotFoundError(f"session {session_id}: not in {journal.target}")
    for seq, item in enumerate(recorded):
        if item.seq != seq:
            raise InvalidInputError(
                f"session {session_id}: seq {seq} is missing in {journal.target}; run verify"
            )
    return recorded, _started(session_id, recorded[0].event)


def recorded_start(journal: Journal, session_id: str) -> SessionStarted:
    """The ``session_started`` of a session, read alone (`load_recording` reads them all).

    Raises:
        SessionNotFoundError: no such session.
        InvalidInputError: seq 0 is not ``session_started``.
    """
    for item in journal.events(session_id, stop=1):
        return _started(session_id, item.event)
    raise SessionNotFoundError(f"session {session_id}: not in {journal.target}")


def _started(session_id: str, event: object) -> SessionStarted:
    """``event``, the first of a session, as its ``session_started``."""
    if not isinstance(event, SessionStarted):
        raise InvalidInputError(
            f"session {session_id}: seq 0 is {getattr(event, 'type', event)}, not session_started"
        )
    return event


def free_session_id(journal: Journal, base: str, suffix: str) -> str:
    """The first ``<base>.<suffix>-<n>`` not in ``journal`` (ids stay within 128 chars)."""
    stem = base[: 128 - len(suffix) - 8]
    n = 1
    while journal.summary(f"{stem}.{suffix}-{n}") is not None:
        n += 1
    return f"{stem}.{suffix}-{n}"


def session_records(journal: Journal, session_id: str) -> list[dict[str, Any]]:
    """A session's events as the flat records replay, diff and fixtures compare.

    Each is decoded and upcast to the current version of its type (`record_of`), so two
    runs compare the same whichever version of agent-journal wrote them.
    """
    return [record_of(item) for item in journal.events(session_id)]


def _spec_name(spec: object) -> str | None:
    """The name of a tool spec as a request sends it (chat, Responses, or the inner object)."""
    if not isinstance(spec, dict):
        return None
    inner = spec.get("function")
    name = inner.get("name") if isinstance(inner, dict) else spec.get("name")
    return name if isinstance(name, str) else None


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def known_tools(records: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The tools a recording knows, from its flat records (a JSONL file's, `record_of`'s).

    Those its ``session_started`` and every request it sent declared, and those its model
    called or its code ran: a session's first request may declare none (a triage call
    before the tool loop), so the tools of ``session_started`` alone are not all of them.
    """
    names: set[str | None] = set()
    for record in records:
        kind = record.get("type")
        if kind == "session_started":
            config = record.get("config")
            tools = config.get("tools") if isinstance(config, dict) else None
            names.update(_spec_name(spec) for spec in _listed(tools))
        elif kind in ("action_proposed", "model_call_failed"):
            calls = _listed(record.get("calls"))
            names.update(call.get("tool") for call in calls if isinstance(call, dict))
            request = record.get("request")
            params = request.get("params") if isinstance(request, dict) else None
            declared = params.get("tools") if isinstance(params, dict) else None
            names.update(_spec_name(spec) for spec in _listed(declared))
        elif kind in ("action_committed", "action_failed", "verification_failed"):
            names.add(record.get("tool"))
    return frozenset(name for name in names if isinstance(name, str) and name)
