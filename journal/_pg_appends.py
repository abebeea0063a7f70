"""PostgreSQL appends: the session lock, the global positions taken, the rows inserted.

Writers of one session are serialised by a transaction-level advisory lock on the session
id; writers of different sessions are not serialised at all. Each write transaction takes
its positions once, before its first write, together with its transaction id
(`journal._pg_positions` has how and why); an append takes its session's lock in the same
round trip. A small append on this object's cached head is one statement
(`journal._pg_positions.ONE_STATEMENT`); a larger one loads its rows with COPY. An import
spools its planned rows to a temporary file until the positions of all of them can be
taken at once (`SpooledRows`).
"""

from __future__ import annotations

import os
import pickle
import tempfile
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from . import _postgres_schema as schema
from ._pg_positions import (
    LOCK_SESSION,
    ONE_STATEMENT_EVENTS,
    RESERVE,
    TAKE_MANY,
    TAKE_ONE,
    one_statement,
)
from ._pg_tx import PgTx
from ._planner import AppendPlan, SessionHead
from ._sql_append import SQLAppends
from ._sql_import import ImportRows, SQLImports
from ._sqltx import SqlTx, event_params
from .records import StoredEvent

__all__ = ["PgAppends", "SpooledRows"]

_EVENTS = "events(pos, session_id, seq, ts, type, v, body, hash, summary)"
SETTLE = "SET CONSTRAINTS ALL IMMEDIATE"
"""Fires the deferred constraint triggers the transaction's writes queued, now rather than
at its commit, so what an append reads back after it (`SQLAppends._check_kept`) is what
the commit keeps."""


class SpooledRows(ImportRows):
    """An import's planned rows spooled to a temporary file until its positions are taken.

    Positions are taken once per transaction, before its first write, for an exact count:
    the count of a streamed import is known only once every session is planned, so the
    rows wait on disk (not in memory) in between, then `finish` reserves and inserts them.
    """

    def __init__(self, journal: SQLAppends, tx: SqlTx) -> None:
        super().__init__(journal, tx)
        self.spool = tempfile.TemporaryFile(prefix="agent-journal-import-")
        self.count = 0

    def __exit__(self, *exc: object) -> None:
        self.spool.close()

    def add(self, session_id: str, batches: Iterable[Sequence[StoredEvent]]) -> None:
        for rows in batches:
            pickle.dump((session_id, list(rows)), self.spool, protocol=pickle.HIGHEST_PROTOCOL)
            self.count += len(rows)

    def _spooled(self) -> Iterator[tuple[str, list[StoredEvent]]]:
        """The batches spooled so far, in order (the file is left at its end)."""
        self.spool.seek(0)
        try:
            while True:
                try:
                    yield pickle.load(self.spool)  # our own file, just written
                except EOFError:
                    return
        finally:
            self.spool.seek(0, os.SEEK_END)

    def hash_at(self, session_id: str, seq: int) -> str | None:
        """Read the spool first (a session named twice in one import): rare, and a scan."""
        found = None
        for spooled_id, rows in self._spooled():
            if spooled_id == session_id and rows[0].seq <= seq <= rows[-1].seq:
                found = rows[seq - rows[0].seq].hash  # a batch's seqs are dense
        return found if found is not None else super().hash_at(session_id, seq)

    def finish(self) -> None:
        if not self.count:
            return
        self.journal._reserve_positions(self.tx, self.count)
        for session_id, rows in self._spooled():
            self.journal._insert_planned(self.tx, session_id, rows)


class PgAppends(SQLImports):
    """`SQLAppends` and `SQLImports` as PostgreSQL does them (see the module)."""

    _schema: str
    """The schema the journal's tables are in."""
    _positions_lock: int
    """The advisory lock key that covers taking positions in this schema."""

    @abstractmethod
    def _pooled(self, action: str, *, mode: str) -> AbstractContextManager[SqlTx]:
        """A pooled connection for ``statement``s, or in a ``read`` or ``write`` transaction."""

    def _session_key(self, session_id: str) -> str:
        return f"agent-journal {self._schema} {session_id}"

    def _lock_session(self, tx: SqlTx, session_id: str) -> None:
        tx.run(
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (self._session_key(session_id),)
        )

    def _reserve_positions(self, tx: SqlTx, count: int) -> None:
        self._reserve(tx, count, None)

    def _begin_append(self, tx: SqlTx, session_id: str, count: int) -> None:
        self._reserve(tx, count, session_id)

    def _reservation(self, count: int, session_id: str | None) -> tuple[str, list[Any]]:
        """The SELECT that takes ``count`` positions (`RESERVE`), and its parameters.

        With ``session_id``, the session's lock is taken first.

        The flag that lets our plain INSERTs past the per-row overwrite check rides along
        (schema.APPEND_FLAG).
        """
        take = RESERVE.format(take=TAKE_ONE if count == 1 else TAKE_MANY)
        params: list[Any] = [] if session_id is None else [self._session_key(session_id)]
        params += [self._positions_lock, *([] if count == 1 else [count])]
        params += [self._positions_lock, schema.APPEND_FLAG]
        lock = "" if session_id is None else LOCK_SESSION
        return f"SELECT {lock}{take}", params

    def _reserve(self, tx: SqlTx, count: int, session_id: str | None) -> None:
        assert isinstance(tx, PgTx) and count > 0 and not tx.end_position
        text, params = self._reservation(count, session_id)
        tx.reserving = True
        found = tx.one(text, params)
        tx.reserving = False
        assert found is not None
        fresh, last = found[-6], int(found[-3])
        if not fresh:
            raise AssertionError("positions are taken before a transaction's first write")
        tx.next_position, tx.end_position = last - count + 1, last + 1

    def _settle_triggers(self, tx: SqlTx) -> None:
        tx.run(SETTLE)

    def _import_rows(self, tx: SqlTx) -> ImportRows:
        return SpooledRows(self, tx)

    def _commit(
        self,
        session_id: str,
        make_plan: Callable[[SqlTx, SessionHead | None], AppendPlan | None],
        on_cached_head: Callable[[SessionHead], AppendPlan] | None = None,
        count: int | None = None,
    ) -> AppendPlan | None:
        """`SQLAppends._commit`, with a small append on a cached head in one statement."""
        if count is not None and count <= ONE_STATEMENT_EVENTS:
            cached, guess = self._guess(session_id, on_cached_head)
            if cached is not None and guess is not None:
                if self._append_in_one_statement(session_id, guess, cached):
                    self._remember(session_id, guess)
                    return guess
            on_cached_head = None  # no plan on the cached head, or a stale one: the stored head
        return super()._commit(session_id, make_plan, on_cached_head, count)

    def _append_in_one_statement(
        self, session_id: str, plan: AppendPlan, head: SessionHead
    ) -> bool:
        """Write ``plan`` with `ONE_STATEMENT` if ``head`` is still the stored head."""
        count = len(plan.rows)
        reserve, params = self._reservation(count, session_id)
        update, update_params = self._guarded_update(session_id, plan, head)
        params += [*update_params, count, session_id]
        if count == 1:
            params += event_params(plan.rows[0])[1:]
        else:
            params += map(list, zip(*(event_params(row)[1:] for row in plan.rows), strict=True))
        params += [count, plan.rows[-1].seq, plan.head_hash, str(count)]
        text = one_statement(reserve, update, count == 1)
        # A transaction, so the rows are read back before the COMMIT (`_check_kept`): five
        # round trips, not pipelined (psycopg's pipeline cost more than the trips it saved).
        with self._pooled("write", mode="write") as tx:
            assert isinstance(tx, PgTx)
            tx.reserving = True
            found = tx.one(text, params)
            tx.reserving = False
            assert found is not None
            if found[1] != count:
                return False  # the head moved on: nothing was written (`ONE_STATEMENT`)
            self._check_kept(tx, session_id, plan.rows[0].seq, plan.rows[-1])
            tx.next_position = int(found[0]) + 1  # what the NOTIFY tells
        return True

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> int:
        assert isinstance(tx, PgTx)
        first = tx.use_positions(len(rows))
        params = [(first + index, *event_params(row)) for index, row in enumerate(rows)]
        if len(params) == 1:
            return tx.changed(
                f"INSERT INTO {_EVENTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", params[0]
            )
        # COPY fires the same triggers and checks the same keys, at half the cost per row
        return tx.copy(_EVENTS, params)
