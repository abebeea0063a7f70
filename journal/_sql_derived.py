"""Derived data over SQL: snapshots of folded states, and the search index.

Both live in tables of their own, created on first need, never written by an append and
never exported. Snapshots are claims verify checks against the fold of the events (a bad
one reads as none: the caller folds from the events). The search index is caught up with
the events before each search, in batches (`journal._search_index.BATCH`), each read and
indexed in one write transaction so an erase meanwhile waits for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import ValidationError

from ._search_check import claimed, events_at, made_by
from ._search_index import BATCH, hit, hit_clauses, index_rows
from ._sqlstore import SQLStore
from .errors import InvalidInputError, StoreError
from .fold import SessionState
from .records import StoredEvent
from .search import SearchFilters, SearchHit, query_parts
from .store import JournalDerivedData

__all__ = ["SNAPSHOTS_DDL", "SQLDerived"]

SNAPSHOTS_DDL = (
    "CREATE TABLE IF NOT EXISTS snapshots (session_id TEXT NOT NULL, fold_version INTEGER "
    "NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, "
    "PRIMARY KEY (session_id, fold_version, seq))"
)
"""The derived table of folded states, created on first need."""


class SQLDerived(SQLStore, JournalDerivedData):
    """`JournalDerivedData` over SQL: snapshots, and the search index (`SQLStore.SEARCH`)."""

    def load_snapshot(
        self, session_id: str, seq: int, fold_version: int
    ) -> tuple[int, SessionState] | None:
        """The nearest snapshot at or before ``seq``; see `Journal.load_snapshot`."""
        with self._reading() as tx:
            if not self._has_snapshots(tx):
                return None
            row = tx.one(
                "SELECT seq, state FROM snapshots WHERE session_id = ? AND fold_version = ? "
                "AND seq <= ? ORDER BY seq DESC LIMIT 1",
                (session_id, fold_version, seq),
            )
        if row is None:
            return None
        try:
            return int(row[0]), SessionState.model_validate(orjson.loads(row[1]))
        except (orjson.JSONDecodeError, ValidationError, ValueError, TypeError):
            return None  # derived data that went bad: the caller folds from the events instead

    def save_snapshots(
        self, session_id: str, fold_version: int, snapshots: Sequence[tuple[int, SessionState]]
    ) -> None:
        """Store snapshots, keeping existing ones; see `Journal.save_snapshots`."""
        with self._transaction() as tx:
            tx.run(SNAPSHOTS_DDL)
            self._snapshots_table = True
            tx.run_many(
                "INSERT INTO snapshots(session_id, fold_version, seq, state) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [
                    (session_id, fold_version, seq, state.model_dump_json())
                    for seq, state in snapshots
                ],
            )

    def refresh_search_index(self) -> int:
        """Catch the search index up; see `Journal.refresh_search_index`.

        A journal opened read-only (`SQLStore._read_only_reason`) is searched with the
        index it holds when that index is current; else the error names the fix.
        """
        reason = self._read_only_reason()
        if reason is not None:
            self._require_current_index(reason)
            return 0
        if not self._search_ready:  # once per journal object
            setup = self._transaction if self.SEARCH.SETUP_IN_TRANSACTION else self._reading
            with setup() as tx:
                self.SEARCH.prepare(tx, self._table_names(tx))
            self._search_ready = self._search_table = True
        with self._reading() as tx:
            position = self.SEARCH.position(tx)
        added = 0
        while True:
            with self._transaction() as tx:  # read and indexed together: an erase waits
                rows = self._rows_after(tx, position, BATCH)
                if rows:
                    self.SEARCH.add(tx, index_rows(rows))
            added += len(rows)
            if len(rows) < BATCH:
                return added
            position = rows[-1].position or position

    def _require_current_index(self, reason: str) -> None:
        """Refuse, naming the fix, unless the index holds every event (nothing to write)."""
        with self._reading() as tx:
            current = self._has_search_index(tx) and not self._rows_after(
                tx, self.SEARCH.position(tx), 1
            )
        if not current:
            raise StoreError(
                f"{self.target}: search keeps its index in the journal and cannot build or "
                f"update it here: the journal is read-only ({reason}); search a copy of it "
                "in a writable folder"
            )

    def search(
        self, query: str, filters: SearchFilters | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Catch the index up, then search it; see `Journal.search`."""
        parts = query_parts(query)
        if limit < 1:
            raise InvalidInputError(f"search: the limit must be at least 1, not {limit}")
        self.refresh_search_index()
        where, params = hit_clauses(filters or SearchFilters(), self.SEARCH.META_MATCH)
        for attempt in range(2):
            with self._reading() as tx:
                rows = self.SEARCH.find(tx, parts, where, params, limit)
                events = events_at(tx, [int(row[7]) for row in rows])
            untrue = [int(row[7]) for row in rows if not _holds(row, events)]
            if not untrue or attempt == 1 or self._read_only_reason() is not None:
                break
            with self._transaction() as tx:  # put the rows right, then ask again: a real
                truth = [events[pos] for pos in untrue if pos in events]  # match they hid shows
                self.SEARCH.replace(tx, untrue, index_rows(truth))
        return [hit(row, parts) for row in rows if int(row[7]) not in untrue]


def _holds(row: Sequence[Any], events: dict[int, StoredEvent]) -> bool:
    """Whether a found row (`SearchIndex.find`) is what the event at its position makes."""
    session_id, seq, kind, ts, tools, text, _, pos = row
    return made_by(events.get(int(pos))) == claimed(pos, session_id, seq, kind, tools, ts, text)
