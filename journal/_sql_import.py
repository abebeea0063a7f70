"""Imports over SQL: whole sessions streamed in, all or nothing, in one transaction.

Each session's records are checked, folded and hashed as they are read (the planner,
`journal._planner.ImportStream`), in batches, so memory stays flat in the session's size;
identical content is a no-op, a longer recording appends the rest, different content a
conflict. The rows go to an `ImportRows` as they are planned (SQLite inserts them at once;
PostgreSQL spools them until their positions are taken), and each session's projection row
is written once every row is in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self

from ._planner import AppendPlan, ImportStream, SessionHead
from ._sql_append import SQLAppends, head_after
from ._sqltx import SqlTx
from .fold import SessionState
from .records import ImportRecord, StoredEvent

__all__ = ["ImportRows", "SQLImports"]


class ImportRows:
    """Where an import's planned rows go: SQLite inserts them as they come.

    A context manager around the import's transaction; `finish` is called once every
    session is planned, before the projections are written.
    """

    def __init__(self, journal: SQLAppends, tx: SqlTx) -> None:
        self.journal = journal
        self.tx = tx

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing to release (a subclass closes what it spooled to)."""

    def add(self, session_id: str, batches: Iterable[Sequence[StoredEvent]]) -> None:
        """Take a session's planned batches as they come (SQLite: insert them)."""
        for rows in batches:
            self.journal._insert_planned(self.tx, session_id, rows)

    def hash_at(self, session_id: str, seq: int) -> str | None:
        """The hash at ``seq`` of the session as stored or added so far (None: no such row)."""
        return self.journal._hash_at(self.tx, session_id, seq)

    def finish(self) -> None:
        """Write what was added and not written yet (SQLite: nothing is left)."""


class SQLImports(SQLAppends):
    """`JournalWriter.import_records` and `import_sessions` over SQL."""

    def import_records(
        self,
        session_id: str,
        records: Iterable[ImportRecord],
        *,
        check_new: Callable[[SessionState], None] | None = None,
    ) -> int:
        """Import one session's records, all or nothing; see `Journal.import_records`.

        Streamed (`_import`): memory stays flat in the session's size, and any error rolls
        the whole session back.
        """
        return self._import([(session_id, records)], check_new)[0]

    def import_sessions(self, sessions: Sequence[tuple[str, Iterable[ImportRecord]]]) -> list[int]:
        """Import several sessions in one transaction; see `Journal.import_sessions`.

        Streamed as `import_records` is (`_import`): no session's rows are held in memory.
        """
        return self._import(sessions)

    def _import(
        self,
        sessions: Sequence[tuple[str, Iterable[ImportRecord]]],
        check_new: Callable[[SessionState], None] | None = None,
    ) -> list[int]:
        """Import sessions in one transaction, all or nothing; return each one's new events.

        Each session's records are checked, folded and handed to `_import_rows`
        `IMPORT_BATCH` at a time as they are read; the projections are written once every
        row is in. A session named twice is planned the second time on the head its first
        import left. ``check_new`` is given the state of each session new to the journal.
        """
        counts: list[int] = []
        done: dict[str, tuple[AppendPlan, tuple[Any, ...]]] = {}
        firsts: dict[str, int] = {}  # each session's first seq the import writes
        with self._transaction() as tx, self._import_rows(tx) as sink:
            for session_id in sorted({session_id for session_id, _ in sessions}):
                self._lock_session(tx, session_id)  # in one order: no deadlock between two
            for session_id, records in sessions:
                head: SessionHead | None
                if session_id in done:
                    head, indexed = head_after(done[session_id][0]), done[session_id][1]
                else:
                    head, indexed = self._locate(tx, session_id)
                stream = ImportStream(
                    session_id,
                    head,
                    hasher=self.hasher,
                    stored_hash_at=functools.partial(sink.hash_at, session_id),
                    max_event_bytes=self.max_event_bytes,
                )
                sink.add(session_id, stream.batches(records))
                counts.append(stream.written)
                plan = stream.plan()
                if plan is None:
                    continue
                if head is None and check_new is not None:
                    check_new(plan.state)
                done[session_id] = (plan, indexed)
                firsts.setdefault(session_id, 0 if head is None else head.last_seq + 1)
            sink.finish()
            for session_id, (plan, indexed) in done.items():
                self._write_projection(tx, session_id, plan, indexed)
            for session_id, (plan, _) in done.items():
                first = firsts[session_id]  # (its parts' positions may interleave)
                self._check_kept(tx, session_id, first, plan.rows[-1], consecutive=False)
        for session_id, (plan, _) in done.items():
            self._remember(session_id, plan)
        return counts

    def _import_rows(self, tx: SqlTx) -> ImportRows:
        """Where ``tx``'s import puts its planned rows (PostgreSQL spools them first)."""
        return ImportRows(self, tx)
