"""Copying sessions between journals: any two stores, SQLite or PostgreSQL, either way.

A copy reads the source's stored rows and imports them into the destination with
`Journal.import_records`, which verifies every record's hash against the chain before it
writes anything, one transaction per session. Copying again is a no-op for sessions that
are already there with the same content, and appends only the new tail of a session that
grew since; a session that differs is a conflict and is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .canonical import loads_strict
from .errors import JournalError
from .records import where
from .sessions import SessionSummary
from .store import Journal

__all__ = ["CopyResult", "copy_session", "copy_sessions", "select_sessions"]


@dataclass
class CopyResult:
    """What a copy did: sessions copied, new events written, sessions already there, errors."""

    sessions: int = 0
    new_events: int = 0
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)


def select_sessions(
    source: Journal,
    session_ids: Sequence[str] = (),
    *,
    since: str | None = None,
    status: str | None = None,
) -> list[SessionSummary]:
    """Return the sessions to copy: the ones named (all when none are), filtered.

    ``since`` keeps sessions started at or after that time; ``status`` keeps one status.

    Raises:
        SessionNotFoundError: a named session is not in the source.
    """
    if not session_ids:
        return source.sessions(status=status, since=since)
    chosen = [source.require(session_id) for session_id in session_ids]
    return [
        summary
        for summary in chosen
        if (status is None or summary.status == status)
        and (since is None or (summary.started is not None and summary.started >= since))
    ]


def _records(
    source: Journal, session_id: str, on_event: Callable[[int], None] | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    for row in source.stored_events(session_id):
        record = loads_strict(row.body)
        record["hash"] = row.hash
        if on_event is not None:
            on_event(1)
        yield f"{source.target}: {where(session_id, row.seq)}", record


def copy_session(
    source: Journal,
    destination: Journal,
    session_id: str,
    *,
    on_event: Callable[[int], None] | None = None,
) -> int:
    """Copy one session, all or nothing; return how many events were new (0: already there).

    ``on_event(1)`` is called for every event read (a progress bar's advance).

    Raises:
        InvalidEventError: a record's hash does not verify against its chain.
        SessionConflictError: the destination holds different content for the session.
    """
    return destination.import_records(session_id, _records(source, session_id, on_event))


def copy_sessions(
    source: Journal,
    destination: Journal,
    sessions: Sequence[SessionSummary],
    *,
    on_event: Callable[[int], None] | None = None,
) -> CopyResult:
    """Copy sessions one transaction each; a session that fails is reported, not fatal."""
    result = CopyResult()
    for summary in sessions:
        try:
            new = copy_session(source, destination, summary.session_id, on_event=on_event)
        except JournalError as e:
            result.errors.append(str(e))
            continue
        result.sessions += 1
        result.new_events += new
        result.unchanged += new == 0
    return result
