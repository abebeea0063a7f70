"""Copying sessions between journals: any two stores, SQLite or PostgreSQL, either way.

A copy reads the source's stored rows and imports them into the destination with
`Journal.import_records`, which verifies every record's hash against the chain, one
transaction per session; rows stream from one store to the other in pages and batches, so
memory is flat in the session's size. Copying again is a no-op for sessions that
are already there with the same content, and appends only the new tail of a session that
grew since; a session that differs is a conflict and is left as it was. A session that
was erased from the destination is not brought back (its erasure's head hash is in the
source's chain): copying must not undo a retention or right-to-erasure request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..canonical import loads_strict
from ..errors import JournalError
from ..projection import SessionSummary
from ..records import CanonicalRecord, ImportRecord, canonical_record, where
from ..store import Journal

__all__ = ["CopyResult", "copy_session", "copy_sessions", "erased_in", "select_sessions"]


@dataclass
class CopyResult:
    """What a copy did: sessions copied, new events, sessions already there, erased, errors."""

    sessions: int = 0
    new_events: int = 0
    unchanged: int = 0
    erased: list[str] = field(default_factory=list)
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
) -> Iterator[ImportRecord]:
    for row in source.stored_events(session_id):
        record: dict[str, Any] | CanonicalRecord | None = canonical_record(
            row.body.encode(), row.hash
        )
        if record is None:  # a body that is not canonical (a foreign writer's) is refused there
            record = {**loads_strict(row.body), "hash": row.hash}
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

    ``on_event(n)`` is called as events are read (a progress bar's advance). A session
    whose head the destination holds already is not read again.

    Raises:
        InvalidEventError: a record's hash does not verify against its chain.
        SessionConflictError: the destination holds different content for the session.
    """
    summary = source.summary(session_id)
    if summary is not None and _holds(destination, session_id, summary.last_seq, summary.head_hash):
        if on_event is not None:
            on_event(summary.events)
        return 0
    return destination.import_records(session_id, _records(source, session_id, on_event))


def _holds(journal: Journal, session_id: str, seq: int, hash_: str) -> bool:
    """Tell whether ``journal`` has the chain whose hash at ``seq`` is ``hash_`` (so all of it)."""
    return any(
        row.hash == hash_ for row in journal.stored_events(session_id, start=seq, stop=seq + 1)
    )


def erased_in(destination: Journal, source: Journal, session_id: str) -> bool:
    """Tell whether the source's session is one the destination erased (or a longer copy)."""
    if destination.summary(session_id) is not None:
        return False
    for erasure in destination.erasures(session_id):
        rows = source.stored_events(session_id, start=erasure.events - 1, stop=erasure.events)
        if any(row.hash == erasure.head_hash for row in rows):
            return True
    return False


def copy_sessions(
    source: Journal,
    destination: Journal,
    sessions: Sequence[SessionSummary],
    *,
    on_event: Callable[[int], None] | None = None,
) -> CopyResult:
    """Copy sessions one transaction each; a session that fails is reported, not fatal.

    Sessions erased from the destination are skipped and listed in `CopyResult.erased`.
    """
    result = CopyResult()
    for summary in sessions:
        try:
            if erased_in(destination, source, summary.session_id):
                result.erased.append(summary.session_id)
                if on_event is not None:
                    on_event(summary.events)
                continue
            new = copy_session(source, destination, summary.session_id, on_event=on_event)
        except JournalError as e:
            result.errors.append(str(e))
            continue
        result.sessions += 1
        result.new_events += new
        result.unchanged += new == 0
    return result
