"""Derived data checked against the events: summaries, the projection, snapshots.

Everything a store derives from a session's events is a claim `verify` checks, never a
fact it trusts: the ``summary`` column of each event row (recomputed from the decoded
event, for rows written at the event type's current version: an upcast event may summarise
differently), the ``sessions`` projection row (every column and the state JSON compared with
the fold of the events; its state JSON with the fold up to the state's own ``last_seq``, as
an append writes it only every ``STATE_EVERY`` events) and the stored snapshots of the
current fold version (each compared with the fold up to its seq; one past the last event is
a finding too).

`DerivedCheck` is fed the session's rows in seq order by `journal.verify.check_session`.
The refold is buffered: events are folded in runs that end at a snapshot's seq or every
`RUN` events, so the cost is one `fold` per run, not one state model per event.
Refolding is verify's job, never an append's (an append folds one event onto its head).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ._event_summary import summarize
from .events import EVENT_TYPES
from .fold import FOLD_VERSION, SessionState, fold
from .problems import Problem, ProblemKind
from .projection import PROJECTION_COLUMNS, projection_row
from .records import RecordedEvent, StoredEvent

__all__ = ["PROJECTION_READ", "DerivedCheck"]

RUN = 1000
"""Events folded at once between two snapshot seqs."""

PROJECTION_READ = (*PROJECTION_COLUMNS, "fold_version", "state")
"""The columns of the sessions row that verify reads and compares (all of them)."""


_CURRENT_VERSIONS = {name: model.VERSION for name, model in EVENT_TYPES.items()}


def _json(text: object) -> object:
    """Stored JSON text as a value (compared by value, not by bytes); garbled: itself."""
    try:
        return orjson.loads(text) if isinstance(text, str | bytes) else text
    except orjson.JSONDecodeError:
        return text


class DerivedCheck:
    """Recomputes one session's derived data from its events and reports disagreements.

    ``projection`` is the stored sessions row (`PROJECTION_READ` by name) or None;
    ``snapshots`` maps the seqs of the session's stored snapshots of the current fold
    version to their state JSON. Without ``refold`` only the summaries are checked.
    """

    def __init__(
        self,
        session_id: str,
        projection: Mapping[str, Any] | None,
        snapshots: Mapping[int, str],
        *,
        refold: bool = True,
    ) -> None:
        self._refold = refold
        self._session_id = session_id
        self._projection = projection
        self._snapshots = dict(snapshots)
        self._state_seq = _older_state_seq(projection)
        """The seq the projection's state JSON is folded to, when before the last event's."""
        self._state_checked = False
        claims = self._snapshots.keys()
        self._pending = sorted(claims if self._state_seq is None else {*claims, self._state_seq})
        self._buffer: list[RecordedEvent] = []
        self._state = SessionState()
        self.problems: list[Problem] = []

    def _report(self, seq: int | None, kind: ProblemKind, message: str) -> None:
        self.problems.append(
            Problem(session_id=self._session_id, seq=seq, kind=kind, message=message)
        )

    def see(self, row: StoredEvent, event: RecordedEvent) -> None:
        """Check the row's summary and fold the event (in a run)."""
        if _CURRENT_VERSIONS.get(row.type) == row.v and row.summary != summarize(event.event):
            self._report(
                row.seq,
                "summary",
                f"the summary column of seq {row.seq} is not the event's summary",
            )
        if not self._refold:
            return
        self._buffer.append(event)
        at_snapshot = bool(self._pending) and self._pending[0] == row.seq
        if at_snapshot or len(self._buffer) >= RUN:
            self._state = fold(self._buffer, self._state)
            self._buffer = []
        if at_snapshot:
            seq = self._pending.pop(0)
            folded = orjson.loads(self._state.model_dump_json())
            if seq in self._snapshots and _json(self._snapshots[seq]) != folded:
                self._report(seq, "snapshot", f"the snapshot at seq {seq} is not the fold there")
            if seq == self._state_seq and self._projection is not None:
                self._state_checked = True  # here, not against the last event's fold
                if _json(self._projection["state"]) != folded:
                    self._report(
                        seq,
                        "projection",
                        f"the projection's state JSON (folded to seq {seq}) is not the fold "
                        "of the events there",
                    )

    def finish(self, head_hash: str) -> None:
        """Compare the projection and the snapshots with the fold of every event seen."""
        if not self._refold:
            return
        self._state = fold(self._buffer, self._state)
        self._buffer = []
        for seq in self._pending:
            if seq in self._snapshots:
                self._report(seq, "snapshot", f"a snapshot at seq {seq} is past the last event")
        if self._projection is not None:
            expected = projection_row(self._state, head_hash)
            stored = dict(self._projection)
            written_by = stored.get("fold_version")
            if written_by != FOLD_VERSION or self._state_checked:
                expected.pop("state")  # another fold's, or checked at its own seq above
            if type(written_by) is int and 1 <= written_by < FOLD_VERSION:
                # written before an upgrade of the fold: stale, refolded on read and by the
                # next append, not a false claim (a version from the future is one)
                expected.pop("fold_version")
            differ = [
                name
                for name, value in expected.items()
                if name in stored
                and (_json(stored[name]) if name == "state" else stored[name])
                != (_json(value) if name == "state" else value)
            ]
            if differ:
                shown = ", ".join(
                    f"{name} {stored[name]!r:.40} (the events say {expected[name]!r:.40})"
                    for name in differ[:3]
                    if name != "state"
                )
                more = "; its state JSON differs too" if "state" in differ else ""
                self._report(
                    None,
                    "projection",
                    f"the projection disagrees with the fold of the events: "
                    f"{shown or 'state'}{more}",
                )


def _older_state_seq(projection: Mapping[str, Any] | None) -> int | None:
    """The ``last_seq`` of a projection's state JSON of the current fold version when it is
    before the row's own (an append writes the state only every ``STATE_EVERY`` events):
    the seq where verify compares it with the fold. None: compared with the last fold."""
    if projection is None or projection.get("fold_version") != FOLD_VERSION:
        return None
    state = _json(projection.get("state"))
    seq = state.get("last_seq") if isinstance(state, dict) else None
    last = projection.get("last_seq")
    if type(seq) is int and type(last) is int and 0 <= seq < last:
        return seq
    return None
