"""The sessions a replay reads and writes: the recording, a free id, the target journal."""

from __future__ import annotations

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
