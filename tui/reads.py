"""What the reading commands compute, as plain data: one place for the CLI and the MCP server.

``agent-journal sessions --json``, ``state``, ``search``, ``fixture`` and the tools of
``agent-journal mcp`` (`tui.mcp_server`) call these, so a coding agent reading a journal
over MCP sees what a person sees on the command line: the same listing fields, the same
state and changes, the same hits, the same checks and error lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from journal import (
    InvalidInputError,
    Journal,
    SearchFilters,
    SearchHit,
    SessionDetails,
    SessionState,
    SessionSummary,
)

__all__ = [
    "StateAt",
    "fixture_note",
    "require_seq",
    "search_hits",
    "sessions_json",
    "state_at",
    "state_json",
]


def require_seq(session_id: str, label: str, seq: int, last_seq: int) -> None:
    """Raise `InvalidInputError` unless ``0 <= seq <= last_seq``; ``label`` names the argument."""
    if not 0 <= seq <= last_seq:
        raise InvalidInputError(
            f"session {session_id}: {label} {seq}: no such seq (it has seqs 0..{last_seq})"
        )


def sessions_json(journal: Journal, found: list[SessionSummary]) -> list[dict[str, Any]]:
    """The ``sessions --json`` objects: each summary's fields with its metadata and halt reason."""
    details = journal.session_details([s.session_id for s in found])
    return [
        s.model_dump(mode="json")
        | details.get(s.session_id, SessionDetails()).model_dump(mode="json")
        for s in found
    ]


class StateAt(NamedTuple):
    """A session's folded state after one seq, and what that event changed."""

    seq: int
    state: SessionState
    changes: list[Any]
    """`replay.StateChange` items: ``path``, ``before``, ``after``."""


def state_at(journal: Journal, session_id: str, at_seq: int | None, label: str) -> StateAt:
    """The state after ``at_seq`` (the last seq when None), from the timeline's snapshots.

    Raises:
        SessionNotFoundError: no such session.
        InvalidInputError: no such seq (``label`` names the argument in the message).
    """
    from replay import Timeline

    timeline = Timeline(journal, session_id)
    seq = timeline.last_seq if at_seq is None else at_seq
    require_seq(session_id, label, seq, timeline.last_seq)
    return StateAt(seq, timeline.state_at(seq), list(timeline.changes_at(seq)))


def state_json(session_id: str, found: StateAt) -> dict[str, Any]:
    """The ``state --json`` document of `state_at`'s answer."""
    return {
        "session_id": session_id,
        "seq": found.seq,
        "state": found.state.model_dump(mode="json"),
        "changed": [{"path": c.path, "before": c.before, "after": c.after} for c in found.changes],
    }


def search_hits(
    journal: Journal, query: str, filters: SearchFilters, limit: int
) -> list[SearchHit]:
    """Search as ``agent-journal search`` does: a session filter must name a session."""
    if filters.session_id is not None:
        journal.require(filters.session_id)  # a mistyped id is an error, not "no matches"
    return journal.search(query, filters, limit=limit)


def fixture_note(summary: SessionSummary, target: Path, redact: bool) -> str:
    """The line ``agent-journal fixture`` prints once ``target`` is written."""
    kind = (
        f"expected {summary.status}" if summary.status in ("halted", "failed") else summary.status
    )
    return f"wrote {target}: {summary.events} events, {kind}{', redacted' if redact else ''}"
