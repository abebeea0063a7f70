"""The base of the SQL stores: the primitives each backend provides, and the reads all share.

`SQLStore` is what the SQL implementation of each of the journal's roles is written over
(`journal._sql_journal` has the map of roles to modules): a read context, a write
transaction, a snapshot of the whole journal, how a session is locked, how rows are read
after a global position; and the reads every role makes the same way (a session's rows in
pages, its head from the ``sessions`` projection, whether a derived table is there yet).
SQLite and PostgreSQL provide the primitives (`journal.sqlite`, `journal.postgres`); the
roles run the very same planning, projection and checks over them. Queries are written
once with ``?`` placeholders; the PostgreSQL transaction object rewrites them.

The projection's state JSON is written only every `STATE_EVERY` events (`state_due`), so
whoever reads a session's head folds the events after it on (`SQLStore._locate`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import orjson
from pydantic import ValidationError

from ._planner import SessionHead
from ._search_index import SearchIndex
from ._sqltx import SchemaSpec, SqlTx
from .errors import StoreError
from .fold import FOLD_VERSION, SessionState, fold
from .records import StoredEvent, decode, stored_row
from .search import SEARCH_INDEX_TABLE
from .store import DEFAULT_MAX_EVENT_BYTES, JournalBase

__all__ = ["STATE_EVERY", "SQLStore", "state_due"]

STATE_EVERY = 32
"""An append on this connection's cached head writes the session's state JSON only when
its last seq reaches another multiple of this (``last_seq // STATE_EVERY`` changes); the
other appends update the projection's columns alone. The stored state is then the fold up
to its own ``last_seq``, never more than ``STATE_EVERY - 1`` events behind the session, and
whoever reads it folds those events on (`SQLStore._locate`). The state grows with the
session (its repeat counters: ~24 kB at 10,000 events of the bench's workload); written on
every append, it doubled the cost of one in a long session."""
_ROW_COLUMNS = "session_id, seq, ts, type, v, body, hash, summary, pos"
_MAX_SEQ = 2**63 - 1


def state_due(last_seq: int, new_last_seq: int) -> bool:
    """Whether an append that takes a session from ``last_seq`` to ``new_last_seq`` writes
    its state JSON (`STATE_EVERY`, read at each call: `bench/long_session_bench.py` sets
    it)."""
    return new_last_seq // STATE_EVERY != last_seq // STATE_EVERY


class SQLStore(JournalBase):
    """The primitives a SQL backend provides, and the reads every role of the journal shares.

    A backend states its schema and its SQL dialect in the class variables, and implements
    the abstract primitives; the rest has a default that suits SQLite.
    """

    SCHEMA: ClassVar[SchemaSpec]
    KIND: ClassVar[str]
    """What the target is called in messages (``SQLite database``, ``PostgreSQL schema``)."""
    NULL_SAFE_EQUAL: ClassVar[str]
    """The comparison that holds for two NULLs (``IS``; ``IS NOT DISTINCT FROM``)."""
    SEARCH: ClassVar[SearchIndex]
    """The store's search index (derived data, like the snapshots)."""
    STATUS_CLAUSES: ClassVar[Mapping[str, str]] = {}
    """A listing's clause for some statuses, instead of ``status = ?`` (SQLite: with the
    predicate of its partial status index, which it uses only when the query says so)."""
    INDEXED_COLUMNS: ClassVar[tuple[str, ...]]
    """Columns of the ``sessions`` table that its indexes cover. An append leaves them out of
    its UPDATE when their stored value is unchanged, so the indexes are not rewritten (most
    appends change none of them; rewriting them made a one-event commit ~40% dearer)."""

    def __init__(
        self,
        *,
        clock: Any = None,
        hmac_key: bytes | None = None,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key, max_event_bytes=max_event_bytes)
        self._heads: dict[str, SessionHead] = {}
        """The head each session was left at by this connection's last write of it (the
        appends keep it, `SQLAppends._remember`; repair and erase drop a session's)."""
        self._snapshots_table = False
        self._search_table = False
        self._search_ready = False

    # -- primitives each backend provides --------------------------------------------

    @abstractmethod
    def _reading(self) -> AbstractContextManager[SqlTx]:
        """A connection for reads; store errors are translated to ours."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[SqlTx]:
        """A write transaction: committed on success, rolled back on any error."""

    @abstractmethod
    def _table_names(self, tx: SqlTx) -> set[str]:
        """The tables at the target (for SQLite the file, for PostgreSQL the schema)."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[SqlTx]:
        """A short read transaction that sees one consistent snapshot of the whole journal."""

    def _read_only_reason(self) -> str | None:
        """Why this journal was opened read-only, or None (SQLite: `journal._sqlite_read_only`)."""
        return None

    def _lock_session(self, tx: SqlTx, session_id: str) -> None:
        """Serialise writers of one session until the transaction ends (SQLite: a no-op)."""

    def _rows_after(self, tx: SqlTx, position: int, limit: int) -> list[StoredEvent]:
        """`read_after` inside ``tx`` (PostgreSQL: only up to its safe horizon)."""
        return [
            stored_row(row)
            for row in tx.rows(
                f"SELECT {_ROW_COLUMNS} FROM events WHERE pos > ? ORDER BY pos LIMIT ?",
                (position, limit),
            )
        ]

    def _query(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query, read through `_reading`."""
        with self._reading() as tx:
            return tx.rows(text, params)

    # -- reads every role shares -----------------------------------------------------

    def _pages(
        self,
        query: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]],
        session_id: str,
        start: int = 0,
        stop: int | None = None,
    ) -> Iterator[StoredEvent]:
        for page in self._row_pages(query, session_id, start, stop):
            for row in page:
                yield stored_row(row)

    def _row_pages(
        self,
        query: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]],
        session_id: str,
        start: int = 0,
        stop: int | None = None,
        columns: str = _ROW_COLUMNS,
    ) -> Iterator[list[tuple[Any, ...]]]:
        """The session's rows in seq order, in pages of at most `PAGE_SIZE` rows.

        ``columns`` must have ``seq`` second, as `_ROW_COLUMNS` has.
        """
        upper = _MAX_SEQ if stop is None else min(stop, _MAX_SEQ)  # (a crafted last_seq)
        cursor = start
        while True:
            rows = query(
                f"SELECT {columns} FROM events WHERE session_id = ? AND seq >= ? AND seq < ? "
                "ORDER BY seq LIMIT ?",
                (session_id, cursor, upper, self.PAGE_SIZE),
            )
            yield rows
            if len(rows) < self.PAGE_SIZE:
                return
            cursor = rows[-1][1] + 1

    @staticmethod
    def _hash_at(tx: SqlTx, session_id: str, seq: int) -> str | None:
        row = tx.one("SELECT hash FROM events WHERE session_id = ? AND seq = ?", (session_id, seq))
        return None if row is None else str(row[0])

    def _locate(self, tx: SqlTx, session_id: str) -> tuple[SessionHead | None, tuple[Any, ...]]:
        """The session's head, and its stored `INDEXED_COLUMNS` (empty for a new session).

        The state comes from this connection's cache when it is the one for the stored last
        seq and head hash; otherwise from the stored state JSON (read only then: it is the
        widest column) and the events after its own ``last_seq`` folded on (`STATE_EVERY`),
        or by a refold when that was written by another fold version or is garbled.
        """
        indexed = len(self.INDEXED_COLUMNS)
        head = f"SELECT last_seq, head_hash, fold_version, {', '.join(self.INDEXED_COLUMNS)}"
        row = tx.one(f"{head} FROM sessions WHERE session_id = ?", (session_id,))
        if row is None:
            return None, ()
        last_seq, head_hash, fold_version = row[:3]
        cached = self._heads.get(session_id)
        if (
            fold_version == FOLD_VERSION
            and cached is not None
            and cached.head_hash == head_hash
            and cached.last_seq == last_seq
        ):
            return cached, row[3:]
        row = tx.one(f"{head}, state FROM sessions WHERE session_id = ?", (session_id,))
        if row is None:
            return None, ()
        last_seq, head_hash, fold_version = row[:3]
        if type(last_seq) is not int or not isinstance(head_hash, str):
            raise self._corrupt(session_id, "last_seq or head_hash", "not an integer and a hash")
        state = None
        if fold_version == FOLD_VERSION:
            try:
                state = SessionState.model_validate(orjson.loads(row[-1]))
            except (orjson.JSONDecodeError, ValidationError, TypeError):
                pass  # derived data a foreign writer garbled: the fold of the events instead
        if state is None or not 0 <= state.last_seq <= last_seq:
            state = fold(decode(r) for r in self._pages(tx.rows, session_id))
        elif state.last_seq < last_seq:  # at most STATE_EVERY - 1 events behind
            state = fold(
                (decode(r) for r in self._pages(tx.rows, session_id, state.last_seq + 1)), state
            )
        return SessionHead(last_seq, head_hash, state), row[3 : 3 + indexed]

    def _corrupt(self, session_id: object, field: str, problem: str) -> StoreError:
        return StoreError(
            f"{self.target}: session {session_id}: its row in the sessions projection is "
            f"corrupt ({field}: {problem}); the journal was altered outside agent-journal"
        )

    def _has_snapshots(self, tx: SqlTx) -> bool:
        """Whether the snapshots table is there (made on first need; once seen, not asked)."""
        if not self._snapshots_table:
            self._snapshots_table = "snapshots" in self._table_names(tx)
        return self._snapshots_table

    def _has_search_index(self, tx: SqlTx) -> bool:
        """Whether the search index table is there (as `_has_snapshots`)."""
        if not self._search_table:
            self._search_table = SEARCH_INDEX_TABLE in self._table_names(tx)
        return self._search_table
