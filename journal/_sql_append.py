"""Appends over SQL: plan against the session's head, write the projection and the rows.

An append locks its session, plans its events against the head (the planner,
`journal._planner.plan_append`, checks and hashes them), writes the ``sessions``
projection row and inserts the rows, in one transaction; a plan made on this connection's
cached head is written by one guarded UPDATE instead of a read of the head first. What was
written is checked to be what was planned (`UnplannedWriteError` otherwise: a foreign
trigger or rule dropped or changed rows), and read back after the last write and every
trigger it fired (`SQLAppends._check_kept`: a trigger may delete rows an INSERT counted);
positions that are not consecutive are a `PositionError`. SQLite shares the transaction
among concurrent appends (group commit); PostgreSQL writes a small append on a cached head
in one statement, in a transaction that reads it back before the commit.

The statements that write the projection row and the events are made once per shape (the
columns they write) and cached, so an append builds no SQL text; the projection writes
note which of their parameters may be None (`null_places`), for SQLite, which binds a None
dearly (`journal.sqlite.without_nulls`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, get_args

from ._planner import AppendPlan, SessionHead, Stamps, plan_append
from ._sqlstore import SQLStore, state_due
from ._sqltx import SqlTx
from .errors import JournalError, PositionError, UnplannedWriteError
from .events import AgentEvent
from .fold import FOLD_VERSION, SessionState
from .projection import (
    PROJECTION_COLUMNS,
    SessionSummary,
    projection_row,
    projection_values,
    value_picker,
)
from .records import StoredEvent
from .store import JournalWriter

__all__ = [
    "KEPT_ROWS",
    "NO_POSITION",
    "SQLAppends",
    "head_after",
    "insert_events_sql",
    "kept_params",
    "null_places",
    "upsert_sql",
]

NO_POSITION = (
    "the journal's positions (or what hands them out) were changed outside agent-journal "
    "(verify reports how); nothing was written, and a retry fails the same"
)
"""The end of every `PositionError` message."""
_STATE_CACHE_SIZE = 256
"""Sessions whose head this connection keeps (`SQLAppends._remember`)."""
_RETURNING_HEAD = " RETURNING last_seq, head_hash"
"""What a projection write returns, to check the row holds the plan's head."""


KEPT_ROWS = (
    "SELECT count(*), max(CASE WHEN seq = ? THEN hash END), min(pos), max(pos) FROM events "
    "WHERE session_id = ? AND seq >= ? AND seq <= ?"
)
"""What of an append's rows is there, read back in its transaction after its last write:
how many of its seqs hold a row, the hash at its last seq, and their first and last
positions, which must be consecutive (`kept_params`)."""


def kept_params(session_id: str, first_seq: int, last: StoredEvent) -> tuple[Any, ...]:
    """The parameters of `KEPT_ROWS` for the rows ``first_seq`` to ``last`` of a session."""
    return (last.seq, session_id, first_seq, last.seq)


@functools.cache
def insert_events_sql(position: str | None = "?") -> str:
    """The INSERT of one events row from a `StoredEvent`'s fields, in order; ``position``
    is the SQL value of its position (a ``?`` for the row's own), None for no position
    column (the database gives one; the row's fields bound without theirs)."""
    if position is None:
        return (
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
    return (
        "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary, pos) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, {position})"
    )


_MAY_BE_NULL = frozenset(
    name
    for name, spec in SessionSummary.model_fields.items()
    if type(None) in get_args(spec.annotation)
)
"""The projection columns whose value may be None."""
_NULL_PLACES: dict[str, tuple[int, ...]] = {}
"""The SQL of each projection write made below -> the positions of its parameters that may
be None (`null_places`)."""


def null_places(text: str) -> tuple[int, ...] | None:
    """The positions of the parameters of a projection write ``text`` (as made here) whose
    value may be None; None for any other statement (any parameter may be None)."""
    return _NULL_PLACES.get(text)


def _noting_nulls(text: str, params: Iterable[str]) -> str:
    """``text``, its ``params`` (the column each parameter is compared with or set to)
    noted for `null_places`."""
    _NULL_PLACES[text] = tuple(place for place, name in enumerate(params) if name in _MAY_BE_NULL)
    return text


@functools.cache
def _update_sql(names: tuple[str, ...]) -> str:
    """The UPDATE of the projection columns ``names`` of one session's row."""
    return _noting_nulls(
        f"UPDATE sessions SET {', '.join(f'{n} = ?' for n in names)} WHERE session_id = ?",
        (*names, "session_id"),
    )


@functools.cache
def _guarded_update_sql(names: tuple[str, ...], same: str, indexed: tuple[str, ...]) -> str:
    """`_update_sql` that changes the row only while it is the head the plan was made on."""
    return _noting_nulls(
        f"{_update_sql(names)} AND last_seq = ? AND head_hash = ? AND fold_version = ? "
        f"AND {' AND '.join(f'{n} {same} ?' for n in indexed)}",
        (*names, "session_id", "last_seq", "head_hash", "fold_version", *indexed),
    )


@functools.cache
def upsert_sql(names: tuple[str, ...]) -> str:
    """The INSERT of a whole projection row (``names``), or its UPDATE when it is there."""
    updates = ", ".join(f"{name} = excluded.{name}" for name in names if name != "session_id")
    return _noting_nulls(
        f"INSERT INTO sessions({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
        f"ON CONFLICT(session_id) DO UPDATE SET {updates}",
        names,
    )


@functools.cache
def _always_set(indexed: tuple[str, ...], state: bool) -> tuple[str, ...]:
    """The columns of a `projection_row` that an append always writes: all but the key and
    the ``indexed`` ones (and the state JSON unless ``state``)."""
    return tuple(
        name
        for name in (*PROJECTION_COLUMNS, "fold_version", "state")
        if name != "session_id" and name not in indexed and (state or name != "state")
    )


def _changed_columns(
    plan: AppendPlan, columns: tuple[str, ...], stored: tuple[Any, ...], state: bool = True
) -> tuple[tuple[str, ...], list[Any]]:
    """The projection columns to SET for ``plan``'s state, and their values: all but the
    key and the indexed ``columns`` that keep their ``stored`` value (and the state JSON
    unless ``state``)."""
    values = plan.state.__dict__
    names = _always_set(columns, state)
    if value_picker(columns)(values) != stored:  # rare: most appends change no indexed column
        names += tuple(
            name for name, value in zip(columns, stored, strict=True) if values[name] != value
        )
    return names, projection_values(plan.state, plan.head_hash, names)


def head_after(plan: AppendPlan) -> SessionHead:
    """The head a session is at once ``plan`` is written."""
    return SessionHead(plan.rows[-1].seq, plan.head_hash, plan.state)


class SQLAppends(SQLStore, JournalWriter):
    """`JournalWriter.append` over SQL, and the projection writes an import shares."""

    # -- primitives a backend may change ---------------------------------------------

    def _reserve_positions(self, tx: SqlTx, count: int) -> None:
        """Take the global positions of the ``count`` events the transaction will insert.

        Called once per write transaction that inserts events, before its first write
        (SQLite: a no-op, its single writer numbers rows as they are inserted, so its
        streamed import, `ImportRows`, does not call it).
        """

    def _begin_append(self, tx: SqlTx, session_id: str, count: int) -> None:
        """`_lock_session`, then `_reserve_positions` (PostgreSQL: in one round trip)."""
        self._lock_session(tx, session_id)
        self._reserve_positions(tx, count)

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> int:
        """Insert rows; the database assigns their global positions. Returns the rows written."""
        return tx.changed_many(insert_events_sql(), rows)

    def _project(
        self, tx: SqlTx, text: str, params: Sequence[Any], session_id: str, plan: AppendPlan
    ) -> bool:
        """Run a write of the session's projection row; False when it changed no row.

        A row it changed must hold the plan's last seq and head hash (a foreign trigger may
        rewrite the values a statement writes), else the write is refused.
        """
        found = tx.rows(text + _RETURNING_HEAD, params)
        if not found:
            return False
        if [tuple(row) for row in found] != [(plan.rows[-1].seq, plan.head_hash)]:
            shown = f"last seq and head {tuple(found[0])!r:.60}"
            raise self._unplanned(session_id, f"the sessions projection holds {shown}")
        return True

    def _write_committed(
        self,
        write: Callable[[SqlTx], AppendPlan | None],
        committed: Callable[[AppendPlan | None], None],
    ) -> AppendPlan | None:
        """Run ``write`` in a write transaction; once it is committed, ``committed``.

        Returns what ``write`` returned. SQLite shares the transaction and its commit with
        concurrent callers (`journal._group_commit`); here each call has its own.
        """
        with self._transaction() as tx:
            plan = write(tx)
        committed(plan)
        return plan

    # -- checked writes --------------------------------------------------------------

    def _insert_planned(self, tx: SqlTx, session_id: str, rows: Sequence[StoredEvent]) -> None:
        """`_insert_events`, refused (`UnplannedWriteError`) unless every row was written."""
        written = self._insert_events(tx, rows)
        if written != len(rows):
            raise self._unplanned(session_id, f"{written} of {len(rows)} events were written")

    def _settle_triggers(self, tx: SqlTx) -> None:
        """Fire what the writes of ``tx`` left to fire before its commit (PostgreSQL: the
        deferred constraint triggers; SQLite fires every trigger within its statement)."""

    def _check_kept(
        self,
        tx: SqlTx,
        session_id: str,
        first_seq: int,
        last: StoredEvent,
        *,
        consecutive: bool = True,
    ) -> None:
        """Refuse (`UnplannedWriteError`) unless the rows written, seqs ``first_seq`` to
        ``last``, are there, read back after the transaction's last write and after every
        trigger it fired.

        A foreign trigger may remove or move the rows after the insert counted them (an
        ``AFTER INSERT`` trigger that deletes them with the guards off); the rows must be
        there when the append commits, else it is not acknowledged. ``consecutive``: the
        rows took consecutive positions (an append; an import's sessions interleave). Cost:
        one indexed read of the append's seqs (`KEPT_ROWS`).
        """
        self._settle_triggers(tx)
        found = tx.one(KEPT_ROWS, kept_params(session_id, first_seq, last))
        self._refuse_unkept(session_id, first_seq, last, found, consecutive=consecutive)

    def _refuse_unkept(
        self,
        session_id: str,
        first_seq: int,
        last: StoredEvent,
        found: tuple[Any, ...] | None,
        *,
        consecutive: bool = True,
    ) -> None:
        """Raise `UnplannedWriteError` unless ``found`` (`KEPT_ROWS`) holds every row, and
        `PositionError` when they should have consecutive positions and do not."""
        count, last_hash, low, high = found if found is not None else (0, None, None, None)
        planned = last.seq - first_seq + 1
        if count != planned:
            raise self._unplanned(session_id, f"{count} of {planned} events are there at commit")
        if last_hash != last.hash:
            raise self._unplanned(session_id, f"seq {last.seq} holds another event at commit")
        if consecutive and high - low != planned - 1:
            raise PositionError(
                f"{self.target}: session {session_id}: its {planned} new events took positions "
                f"{low} to {high}, not consecutive ones: {NO_POSITION}"
            )

    def _unplanned(self, session_id: str, what: str) -> UnplannedWriteError:
        return UnplannedWriteError(
            f"{self.target}: session {session_id}: {what}; a trigger or rule that is not "
            "agent-journal's changed the write (verify names it); nothing was written"
        )

    def _write(
        self, tx: SqlTx, session_id: str, plan: AppendPlan, indexed: tuple[Any, ...] = ()
    ) -> None:
        """Write the projection and insert the rows; ``indexed`` as `_locate` returned it."""
        self._write_projection(tx, session_id, plan, indexed)
        self._insert_planned(tx, session_id, plan.rows)

    def _write_projection(
        self, tx: SqlTx, session_id: str, plan: AppendPlan, indexed: tuple[Any, ...] = ()
    ) -> None:
        """Write the session's projection row for the state and last row of ``plan``."""
        if indexed:
            names, params = _changed_columns(plan, self.INDEXED_COLUMNS, indexed)
            params.append(session_id)
            if self._project(tx, _update_sql(names), params, session_id, plan):
                return
        row = projection_row(plan.state, plan.head_hash)
        row["session_id"] = session_id
        if not self._project(tx, upsert_sql(tuple(row)), list(row.values()), session_id, plan):
            raise self._unplanned(session_id, "the sessions projection row was not written")

    def _write_on_head(
        self, tx: SqlTx, session_id: str, plan: AppendPlan, head: SessionHead
    ) -> bool:
        """Write ``plan`` if ``head`` (from this connection's cache) is still the stored head.

        One guarded UPDATE of the projection stands in for reading the head first: it
        changes the row only while its last seq, head hash, fold version and indexed
        columns are the ones this connection wrote; it writes the state JSON only when it is
        due (`STATE_EVERY`). False (nothing written) when another writer got there first, or
        the row was changed or removed outside this connection.
        """
        text, params = self._guarded_update(session_id, plan, head)
        if not self._project(tx, text, params, session_id, plan):
            return False
        self._insert_planned(tx, session_id, plan.rows)
        return True

    def _guarded_update(
        self, session_id: str, plan: AppendPlan, head: SessionHead
    ) -> tuple[str, list[Any]]:
        """The projection UPDATE of `_write_on_head` and its parameters."""
        columns = self.INDEXED_COLUMNS
        indexed = value_picker(columns)(head.state.__dict__)
        due = state_due(head.last_seq, plan.rows[-1].seq)
        names, params = _changed_columns(plan, columns, indexed, due)
        params += [session_id, head.last_seq, head.head_hash, FOLD_VERSION, *indexed]
        return _guarded_update_sql(names, self.NULL_SAFE_EQUAL, columns), params

    # -- the append ------------------------------------------------------------------

    def _remember(self, session_id: str, plan: AppendPlan) -> None:
        """Cache the head ``plan`` left the session at (the oldest entry makes room)."""
        if len(self._heads) >= _STATE_CACHE_SIZE:
            self._heads.pop(next(iter(self._heads)), None)
        self._heads[session_id] = head_after(plan)

    def _state_after(self, session_id: str, seq: int) -> SessionState | None:
        """The state this connection's last write of the session left it in, if at ``seq``."""
        cached = self._heads.get(session_id)
        return cached.state if cached is not None and cached.last_seq == seq else None

    def append(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: Stamps | None = None,
    ) -> int:
        """Append events in one transaction; see `Journal.append`."""
        plan = self._commit(session_id, *self._append_plans(session_id, events, expected_seq, ts))
        assert plan is not None
        return plan.rows[-1].seq

    def _append_plans(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        expected_seq: int | None,
        ts: Stamps | None,
    ) -> tuple[
        Callable[[SqlTx, SessionHead | None], AppendPlan], Callable[[SessionHead], AppendPlan], int
    ]:
        """What `_commit` takes to append ``events``: its planner on the stored head, on the
        cached head, and the count of rows every plan has. The stamp is taken now."""
        if not events:
            raise ValueError("append needs at least one event")
        stamp = ts if ts is not None else self._clock()

        def planned(head: SessionHead | None) -> AppendPlan:
            return plan_append(
                session_id,
                head,
                events,
                expected_seq=expected_seq,
                ts=stamp,
                hasher=self.hasher,
                max_event_bytes=self.max_event_bytes,
            )

        return (lambda tx, head: planned(head)), planned, len(events)

    def _commit(
        self,
        session_id: str,
        make_plan: Callable[[SqlTx, SessionHead | None], AppendPlan | None],
        on_cached_head: Callable[[SessionHead], AppendPlan] | None = None,
        count: int | None = None,
    ) -> AppendPlan | None:
        """Lock the session, plan against its head and write the plan, in one transaction
        (`_write_committed`: on SQLite one shared with concurrent appends).

        With ``on_cached_head``, the plan is first made against this connection's cached
        head, in the transaction but before the session is locked, and written by
        `_write_on_head` (no read of the head: one statement less, and the lock is held for
        less). It is made in the transaction, not before it, so that on SQLite the leader of
        a group commit plans every queued append itself: its callers wait asleep instead of
        taking turns at the interpreter lock with it. When the cache turns out stale, or
        that plan fails (it may fail differently against the stored head), the session is
        planned again against the stored head in the same transaction. ``count``, when every
        plan has that many rows (an append), reserves their positions with the lock;
        otherwise they are reserved once the plan is made.
        """
        return self._write_committed(*self._write_of(session_id, make_plan, on_cached_head, count))

    def _write_of(
        self,
        session_id: str,
        make_plan: Callable[[SqlTx, SessionHead | None], AppendPlan | None],
        on_cached_head: Callable[[SessionHead], AppendPlan] | None,
        count: int | None,
    ) -> tuple[Callable[[SqlTx], AppendPlan | None], Callable[[AppendPlan | None], None]]:
        """`_commit`'s write (run in the transaction) and what runs once it is committed."""

        def write(tx: SqlTx) -> AppendPlan | None:
            cached, guess = self._guess(session_id, on_cached_head)
            if count is None:
                self._lock_session(tx, session_id)
            else:
                self._begin_append(tx, session_id, count)
            if (
                guess is not None
                and cached is not None
                and self._write_on_head(tx, session_id, guess, cached)
            ):
                self._check_kept(tx, session_id, guess.rows[0].seq, guess.rows[-1])
                return guess
            head, indexed = self._locate(tx, session_id)
            plan = make_plan(tx, head)
            if plan is None:
                return None
            if count is None:
                self._reserve_positions(tx, len(plan.rows))
            self._write(tx, session_id, plan, indexed)
            self._check_kept(tx, session_id, plan.rows[0].seq, plan.rows[-1])
            return plan

        def committed(plan: AppendPlan | None) -> None:
            if plan is not None:
                self._remember(session_id, plan)

        return write, committed

    def _guess(
        self, session_id: str, on_cached_head: Callable[[SessionHead], AppendPlan] | None
    ) -> tuple[SessionHead | None, AppendPlan | None]:
        """This connection's cached head of the session, and the plan made on it, if any."""
        cached = self._heads.get(session_id)
        if on_cached_head is None or cached is None:
            return cached, None
        try:
            return cached, on_cached_head(cached)
        except JournalError:
            return cached, None  # decided against the stored head, which may differ
