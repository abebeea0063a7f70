"""What the SQL stores share: schema setup, appends, imports, reads, verify, repair and erase.

Appends check what they wrote (`UnplannedWriteError` otherwise: a foreign trigger or rule
dropped or changed rows); verify reads each session in one snapshot (`_snapshot`) and checks
its derived data (`journal._derived`); repair rebuilds that derived data from intact events.

`SQLJournal` implements the whole `Journal` contract over a handful of primitives that
each backend provides (a read context, a write transaction, how positions are assigned,
how a session is locked, which triggers are installed), so SQLite and PostgreSQL run the
very same planning (`plan_append`, `ImportStream`), projection and checks. Queries are
written once with ``?`` placeholders; the PostgreSQL transaction object rewrites them.
"""

from __future__ import annotations

import functools
import getpass
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, Self, get_args

import orjson
from pydantic import ValidationError

from ._derived import PROJECTION_READ, DerivedCheck
from ._planner import AppendPlan, ImportStream, SessionHead, plan_append
from ._search_index import BATCH, SearchIndex, hit, hit_clauses, index_rows, session_clauses
from ._sqltx import (
    DERIVED_TABLES,
    JOURNAL_TABLES,
    OWN_TRIGGERS,
    SchemaSpec,
    SqlTx,
    TriggerState,
    TxFactory,
    foreign_problem,
    trigger_problem,
)
from .canonical import GENESIS_HASH, format_ts
from .clock import utc_now
from .errors import (
    ChainKindError,
    InvalidEventError,
    InvalidInputError,
    JournalError,
    NotAJournalError,
    SchemaVersionError,
    SessionNotFoundError,
    StoreError,
    UnplannedWriteError,
)
from .events import AgentEvent
from .fold import FOLD_VERSION, SessionState, fold
from .projection import (
    PROJECTION_COLUMNS,
    SessionDetails,
    SessionSummary,
    projection_row,
    projection_values,
    value_picker,
)
from .records import (
    ImportRecord,
    RecordedEvent,
    StoredEvent,
    as_text,
    decode,
    decode_body,
    stored_row,
)
from .search import SEARCH_INDEX_TABLE, SearchFilters, SearchHit, query_parts
from .store import (
    DEFAULT_MAX_EVENT_BYTES,
    Erasure,
    Journal,
    SchemaSetup,
    erasure_bytes,
)
from .verify import Problem, VerifyReport, check_session

_STATE_CACHE_SIZE = 256
STATE_EVERY = 32
"""An append on this connection's cached head writes the session's state JSON only when
its last seq reaches another multiple of this (``last_seq // STATE_EVERY`` changes); the
other appends update the projection's columns alone. The stored state is then the fold up
to its own ``last_seq``, never more than ``STATE_EVERY - 1`` events behind the session, and
whoever reads it folds those events on (`SQLJournal._locate`). The state grows with the
session (its repeat counters: ~24 kB at 10,000 events of the bench's workload); written on
every append, it doubled the cost of one in a long session."""
_ROW_COLUMNS = "session_id, seq, ts, type, v, body, hash, summary, pos"
_BODY_COLUMNS = "body, seq, hash, pos"
"""What `decode_body` takes (``seq`` second, as `_row_pages` needs)."""
_ERASURE_COLUMNS = (
    "session_id",
    "erased_at",
    "erased_by",
    "reason",
    "events",
    "head_hash",
    "hash",
)
REPAIRABLE = frozenset({"projection", "snapshot"})
"""The findings `SQLJournal.repair` mends: derived data rebuilt from intact events."""
_RETURNING_HEAD = " RETURNING last_seq, head_hash"
"""What a projection write returns, to check the row holds the plan's head."""
_MAX_SEQ = 2**63 - 1
_IN_CHUNK = 500
"""Ids per ``IN (...)`` list: far below SQLite's and PostgreSQL's parameter limits."""


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
def _upsert_sql(names: tuple[str, ...]) -> str:
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


def _head_after(plan: AppendPlan) -> SessionHead:
    """The head a session is at once ``plan`` is written."""
    return SessionHead(plan.rows[-1].seq, plan.head_hash, plan.state)


class ImportRows:
    """Where an import's planned rows go: SQLite inserts them as they come.

    A context manager around the import's transaction; `finish` is called once every
    session is planned, before the projections are written.
    """

    def __init__(self, journal: SQLJournal, tx: SqlTx) -> None:
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


class SQLJournal(Journal):
    """The `Journal` contract over SQL; subclasses supply the connection primitives."""

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

    _setup: SchemaSetup

    def __init__(
        self,
        *,
        clock: Any = None,
        hmac_key: bytes | None = None,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key, max_event_bytes=max_event_bytes)
        self._heads: dict[str, SessionHead] = {}
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
    def _foreign_tables(self, tables: set[str]) -> set[str]:
        """The tables that make a target without ``meta`` something other than a journal."""

    @abstractmethod
    def _missing_error(self) -> StoreError:
        """The error for an empty target opened with ``create=False``."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[SqlTx]:
        """A short read transaction that sees one consistent snapshot of the whole journal."""

    @abstractmethod
    def _trigger_states(self) -> dict[str, TriggerState]:
        """The schema's guard triggers that are installed, by name, and how they compare."""

    @abstractmethod
    def _foreign_objects(self, tables: frozenset[str]) -> list[tuple[str, str, str]]:
        """Every trigger and rule on ``tables``: (``trigger`` or ``rule``, name, table)."""

    def _lock_session(self, tx: SqlTx, session_id: str) -> None:
        """Serialise writers of one session until the transaction ends (SQLite: a no-op)."""

    def _lock_erasures(self, tx: SqlTx) -> None:
        """Serialise erasures until the transaction ends, so their chain never forks."""

    def _keep_positions(self, tx: SqlTx) -> None:
        """Before an erase deletes rows: make sure their positions are never given again
        (PostgreSQL: a no-op, its sequence never goes back)."""

    def _reserve_positions(self, tx: SqlTx, count: int) -> None:
        """Take the global positions of the ``count`` events the transaction will insert.

        Called once per write transaction that inserts events, before its first write
        (SQLite: a no-op, its single writer numbers rows as they are inserted, so its
        streamed import, `ImportRows`, does not call it).
        """

    def _rows_after(self, tx: SqlTx, position: int, limit: int) -> list[StoredEvent]:
        """`read_after` inside ``tx`` (PostgreSQL: only up to its safe horizon)."""
        return [
            stored_row(row)
            for row in tx.rows(
                f"SELECT {_ROW_COLUMNS} FROM events WHERE pos > ? ORDER BY pos LIMIT ?",
                (position, limit),
            )
        ]

    def _begin_append(self, tx: SqlTx, session_id: str, count: int) -> None:
        """`_lock_session`, then `_reserve_positions` (PostgreSQL: in one round trip)."""
        self._lock_session(tx, session_id)
        self._reserve_positions(tx, count)

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> int:
        """Insert rows; the database assigns their global positions. Returns the rows written."""
        return tx.changed_many(insert_events_sql(), rows)

    def _insert_planned(self, tx: SqlTx, session_id: str, rows: Sequence[StoredEvent]) -> None:
        """`_insert_events`, refused (`UnplannedWriteError`) unless every row was written."""
        written = self._insert_events(tx, rows)
        if written != len(rows):
            raise self._unplanned(session_id, f"{written} of {len(rows)} events were written")

    def _unplanned(self, session_id: str, what: str) -> UnplannedWriteError:
        return UnplannedWriteError(
            f"{self.target}: session {session_id}: {what}; a trigger or rule that is not "
            "agent-journal's changed the write (verify names it); nothing was written"
        )

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

    # -- schema setup ----------------------------------------------------------------

    @property
    def schema_setup(self) -> SchemaSetup:
        """What opening this journal did to its schema."""
        return self._setup

    def _prepare(self, read: TxFactory, write: TxFactory, *, create: bool, hmac: bool) -> None:
        """Check the schema; create or upgrade it under an exclusive write when needed."""
        with read() as tx:
            found = self._settle(tx, create=create, hmac=hmac, change=False)
        if found is None:
            with write() as tx:
                found = self._settle(tx, create=create, hmac=hmac, change=True)
        assert found is not None
        self._setup = found

    def _settle(self, tx: SqlTx, *, create: bool, hmac: bool, change: bool) -> SchemaSetup | None:
        spec = self.SCHEMA
        tables = self._table_names(tx)
        if "meta" not in tables:
            foreign = self._foreign_tables(tables)
            if foreign:
                raise NotAJournalError(
                    f"{self.target}: is a {self.KIND} but not an agent-journal journal "
                    f"(tables: {', '.join(sorted(foreign)[:5])})"
                )
            if not create:
                raise self._missing_error()
            if not change:
                return None
            for statement in spec.create:
                tx.run(statement)
            tx.run_many(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [
                    ("format", spec.format),
                    ("schema_version", str(spec.version)),
                    ("chain", "hmac-sha256" if hmac else "sha256"),
                ],
            )
            return SchemaSetup(action="created", version=spec.version)
        meta = dict(tx.rows("SELECT key, value FROM meta"))
        if meta.get("format") != spec.format:
            raise NotAJournalError(
                f"{self.target}: has a meta table but is not an agent-journal journal"
            )
        try:
            version = int(meta.get("schema_version", "0"))
        except ValueError:
            raise NotAJournalError(
                f"{self.target}: has a meta table but its schema_version "
                f"{meta.get('schema_version')!r} is not a number"
            ) from None
        oldest = min(spec.migrations, default=spec.version)
        if version < oldest:
            raise NotAJournalError(
                f"{self.target}: has a meta table but its schema_version {version} is not one "
                f"agent-journal ever wrote (the oldest is {oldest})"
            )
        if version > spec.version:
            raise SchemaVersionError(
                f"{self.target}: schema version {version} is newer than this code "
                f"({spec.version}); upgrade agent-journal"
            )
        chain = meta.get("chain", "sha256")
        if chain != ("hmac-sha256" if hmac else "sha256"):
            need = "an HMAC key" if chain == "hmac-sha256" else "no HMAC key"
            raise ChainKindError(
                f"{self.target}: this journal's chain is {chain}; open it with {need}"
            )
        if version == spec.version:
            return SchemaSetup(action="current", version=version)
        if not change:
            return None
        for step in range(version, spec.version):
            for statement in spec.migrations[step]:
                tx.run(statement)
        tx.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(spec.version),))
        return SchemaSetup(action="upgraded", version=spec.version, from_version=version)

    def _query(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._reading() as tx:
            return tx.rows(text, params)

    # -- writing ---------------------------------------------------------------------

    def _head(self, tx: SqlTx, session_id: str) -> SessionHead | None:
        return self._locate(tx, session_id)[0]

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

    def _summary(self, row: Sequence[Any]) -> SessionSummary:
        """A row of the sessions projection as a summary (a garbled row is an error)."""
        try:
            return SessionSummary.model_validate(dict(zip(PROJECTION_COLUMNS, row, strict=True)))
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise self._corrupt(row[0], field, first["msg"]) from e

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
        if not self._project(tx, _upsert_sql(tuple(row)), list(row.values()), session_id, plan):
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
        state_due = plan.rows[-1].seq // STATE_EVERY != head.last_seq // STATE_EVERY
        names, params = _changed_columns(plan, columns, indexed, state_due)
        params += [session_id, head.last_seq, head.head_hash, FOLD_VERSION, *indexed]
        return _guarded_update_sql(names, self.NULL_SAFE_EQUAL, columns), params

    def _remember(self, session_id: str, plan: AppendPlan) -> None:
        """Cache the head ``plan`` left the session at (the oldest entry makes room)."""
        if len(self._heads) >= _STATE_CACHE_SIZE:
            self._heads.pop(next(iter(self._heads)), None)
        self._heads[session_id] = _head_after(plan)

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
        ts: datetime | str | None = None,
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
        ts: datetime | str | None,
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
        with self._transaction() as tx, self._import_rows(tx) as sink:
            for session_id in sorted({session_id for session_id, _ in sessions}):
                self._lock_session(tx, session_id)  # in one order: no deadlock between two
            for session_id, records in sessions:
                head: SessionHead | None
                if session_id in done:
                    head, indexed = _head_after(done[session_id][0]), done[session_id][1]
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
            sink.finish()
            for session_id, (plan, indexed) in done.items():
                self._write_projection(tx, session_id, plan, indexed)
        for session_id, (plan, _) in done.items():
            self._remember(session_id, plan)
        return counts

    def _import_rows(self, tx: SqlTx) -> ImportRows:
        """Where ``tx``'s import puts its planned rows (PostgreSQL spools them first)."""
        return ImportRows(self, tx)

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
                return guess
            head, indexed = self._locate(tx, session_id)
            plan = make_plan(tx, head)
            if plan is None:
                return None
            if count is None:
                self._reserve_positions(tx, len(plan.rows))
            self._write(tx, session_id, plan, indexed)
            return plan

        def committed(plan: AppendPlan | None) -> None:
            if plan is not None:
                self._remember(session_id, plan)

        return write, committed

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

    @staticmethod
    def _hash_at(tx: SqlTx, session_id: str, seq: int) -> str | None:
        row = tx.one("SELECT hash FROM events WHERE session_id = ? AND seq = ?", (session_id, seq))
        return None if row is None else str(row[0])

    # -- reading ---------------------------------------------------------------------

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

    def events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Stream validated events in pages; see `Journal.events` (decoded from the bodies)."""
        for page in self._row_pages(self._query, session_id, start, stop, _BODY_COLUMNS):
            for body, seq, hash_, pos in page:
                yield decode_body(session_id, seq, body, hash_, pos)

    def stored_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[StoredEvent]:
        """Stream stored rows in pages of `PAGE_SIZE`; see `Journal.stored_events`.

        The seqs must run densely from ``start`` to the projection's last seq (or ``stop``):
        a row missing, or one whose seq a foreign writer damaged so that no range query
        finds it, is a `StoreError` naming the seq, never a silently shorter session.
        """
        found = self._query("SELECT last_seq FROM sessions WHERE session_id = ?", (session_id,))
        last = found[0][0] if found and type(found[0][0]) is int else None
        end = last if stop is None or last is None else min(last, stop - 1)
        expected = start
        for row in self._pages(self._query, session_id, start, stop):
            if row.seq != expected:
                raise self._gap(session_id, expected)
            expected += 1
            yield row
        if end is not None and expected <= end:
            raise self._gap(session_id, expected)

    def _gap(self, session_id: str, seq: int) -> StoreError:
        return StoreError(
            f"{self.target}: session {session_id}: seq {seq} is missing or its row is damaged "
            "(run agent-journal verify); the journal was altered outside agent-journal"
        )

    def read_after(self, position: int, *, limit: int = 500) -> list[StoredEvent]:
        """Rows appended after a global position; see `Journal.read_after`."""
        with self._reading() as tx:
            return self._rows_after(tx, position, limit)

    def head_position(self) -> int:
        """The newest global position; see `Journal.head_position`."""
        return int(self._query("SELECT coalesce(max(pos), 0) FROM events")[0][0])

    def sessions(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        rule: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> list[SessionSummary]:
        """List summaries, newest first; see `Journal.sessions`."""
        clauses, params = session_clauses(
            "sessions.session_id", self.SEARCH.META_MATCH, status=None, rule=rule, meta=meta or {}
        )
        for clause, value in (
            (self.STATUS_CLAUSES.get(status or "", "status = ?"), status),
            ("agent = ?", agent),
            ("started >= ?", since),
            ("started < ?", until),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        text = f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM sessions"
        if clauses:
            text += " WHERE " + " AND ".join(clauses)
        text += " ORDER BY started DESC NULLS LAST, session_id"
        if limit is not None:
            text += f" LIMIT {int(limit)}"
        return [self._summary(row) for row in self._query(text, params)]

    def last_summaries(self, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The type and summary of each session's last event; see `Journal.last_summaries`."""
        ids = list(dict.fromkeys(session_ids))
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            rows = self._query(
                "SELECT e.session_id, e.type, e.summary FROM sessions s JOIN events e "
                "ON e.session_id = s.session_id AND e.seq = s.last_seq "
                f"WHERE s.session_id IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            for session_id, kind, summary in rows:  # untrusted: any column type may be there
                found[as_text(session_id)] = (as_text(kind), as_text(summary))
        return found

    def session_details(self, session_ids: Sequence[str]) -> dict[str, SessionDetails]:
        """Metadata and halt reasons; see `Journal.session_details`."""
        ids = list(dict.fromkeys(session_ids))
        found: dict[str, SessionDetails] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            rows = self._query(
                "SELECT e.session_id, e.seq, e.body FROM sessions s JOIN events e "
                "ON e.session_id = s.session_id AND (e.seq = 0 OR (e.seq = s.last_seq "
                "AND e.type = 'agent_halted')) "
                f"WHERE s.session_id IN ({', '.join('?' * len(chunk))}) ORDER BY e.seq",
                chunk,
            )
            for session_id, seq, body in rows:
                sid = as_text(session_id)
                payload = _json_object(body)
                known = found.get(sid, SessionDetails())
                metadata, reason = payload.get("metadata"), payload.get("reason")
                if seq == 0 and isinstance(metadata, dict):
                    known = known.model_copy(update={"metadata": metadata})
                if payload.get("type") == "agent_halted" and isinstance(reason, str):
                    known = known.model_copy(update={"halt_reason": reason})
                found[sid] = known
        return found

    def summary(self, session_id: str) -> SessionSummary | None:
        """One session's summary; see `Journal.summary`."""
        rows = self._query(
            f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        return self._summary(rows[0])

    def state(self, session_id: str) -> SessionState:
        """The state after the last event; see `Journal.state`."""
        with self._reading() as tx:
            head = self._head(tx, session_id)
        if head is None:
            raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
        return head.state

    # -- verification ----------------------------------------------------------------

    def _guard_problems(self, allow_triggers: Collection[str]) -> list[Problem]:
        installed = self._trigger_states()
        problems = [
            trigger_problem(name, self.SCHEMA.purposes[name], installed.get(name))
            for name in self.SCHEMA.triggers
            if installed.get(name) != "ok"
        ]
        own = {*self.SCHEMA.triggers, *OWN_TRIGGERS, *allow_triggers}
        problems += [
            foreign_problem(kind, name, table)
            for kind, name, table in self._foreign_objects(JOURNAL_TABLES | DERIVED_TABLES)
            if name not in own
        ]
        for (session_id,) in self._query("SELECT session_id FROM erase_authorised"):
            problems.append(
                Problem(
                    session_id=session_id,
                    seq=None,
                    kind="missing_trigger",
                    message="an erase authorisation was left in place: "
                    "DELETE of this session's events is not rejected",
                )
            )
        return problems

    def _erasure_problems(self) -> list[Problem]:
        """The erasure audit records that do not chain (`journal.store.erasure_bytes`)."""
        found = self._query("SELECT value FROM meta WHERE key = 'erasures_chained_after'")
        chained_after = int(found[0][0]) if found and str(found[0][0]).isdigit() else 0
        previous, problems = GENESIS_HASH, []
        columns = ", ".join(_ERASURE_COLUMNS)
        for record_id, *values in self._query(f"SELECT id, {columns} FROM erasures ORDER BY id"):
            fields = dict(zip(_ERASURE_COLUMNS, values, strict=True))
            try:
                erasure = Erasure.model_validate(fields)
            except ValidationError:
                erasure = None
            if erasure is not None and not erasure.hash and record_id <= chained_after:
                continue  # written before erasures were chained
            if erasure is None or self.hasher(previous, erasure_bytes(erasure)) != erasure.hash:
                problems.append(
                    Problem(
                        session_id=as_text(fields["session_id"]),
                        seq=None,
                        kind="erasure",
                        message=f"erasure audit record {record_id} does not chain to the one "
                        "before it: it was written or altered outside agent-journal",
                    )
                )
            previous = str(fields["hash"])
        return problems

    def heads(self) -> dict[str, tuple[int, str]]:
        """Each session's last seq and hash, read from its event rows; see `Journal.heads`."""
        rows = self._query(
            "SELECT e.session_id, e.seq, e.hash FROM events e JOIN "
            "(SELECT session_id, max(seq) AS seq FROM events GROUP BY session_id) m "
            "ON e.session_id = m.session_id AND e.seq = m.seq ORDER BY e.session_id"
        )
        return {as_text(sid): (int(seq), as_text(hash_)) for sid, seq, hash_ in rows}

    def hash_at(self, session_id: str, seq: int) -> str | None:
        """The stored hash of one event, or None; see `Journal.hash_at`."""
        with self._reading() as tx:
            return self._hash_at(tx, session_id, seq)

    def verify(
        self,
        session_ids: Sequence[str] | None = None,
        *,
        quick: bool = False,
        allow_triggers: Collection[str] = (),
    ) -> VerifyReport:
        """Check chains, derived data, decoding and triggers; see `Journal.verify`.

        Each session is read in one snapshot of its own (`_snapshot`): its projection row,
        its events and its snapshots as of one moment. Erased sessions are not findings:
        their audit records say where they went.
        """
        problems = self._guard_problems(allow_triggers) + self._erasure_problems()
        if session_ids is None:
            targets = [
                sid
                for (sid,) in self._query(
                    "SELECT session_id FROM sessions UNION SELECT session_id FROM events ORDER BY 1"
                )
            ]
        else:
            targets = list(session_ids)
        total = checked = 0
        for session_id in targets:
            with self._snapshot() as tx:
                found, count = self._check_one(tx, session_id, refold=not quick)
            if found is None:
                continue  # erased
            problems.extend(found)
            total += count
            checked += 1
        return VerifyReport(ok=not problems, problems=problems, sessions=checked, events=total)

    def _check_one(
        self, tx: SqlTx, session_id: str, *, refold: bool
    ) -> tuple[list[Problem] | None, int]:
        """One session's findings and row count, read through ``tx`` (None: erased)."""
        stored = tx.one(
            f"SELECT {', '.join(PROJECTION_READ)} FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        projection = None if stored is None else dict(zip(PROJECTION_READ, stored, strict=True))
        last_seq = head = None
        garbled: list[Problem] = []
        if projection is not None:
            last_seq, head = projection["last_seq"], projection["head_hash"]
            if type(last_seq) is not int or not isinstance(head, str):
                garbled.append(
                    Problem(
                        session_id=session_id,
                        seq=None,
                        kind="projection",
                        message=f"the projection's last_seq {last_seq!r:.40} and head hash "
                        f"{head!r:.20} are not a seq and a hash",
                    )
                )
                last_seq = head = None
        derived = None
        if not garbled:
            snapshots = self._snapshot_rows(tx, session_id) if refold else {}
            derived = DerivedCheck(session_id, projection, snapshots, refold=refold)
        try:
            found, count = check_session(
                session_id,
                self._pages(tx.rows, session_id),
                projected_last_seq=last_seq,
                projected_head=head,
                hasher=self.hasher,
                derived=derived,
            )
        except InvalidEventError as e:  # a row a foreign writer gave a non-integer seq
            found = [Problem(session_id=session_id, seq=None, kind="undecodable", message=str(e))]
            count = 1
        if garbled:  # compared with the projection already
            found = garbled + [problem for problem in found if problem.kind != "projection"]
        if projection is None and count == 0:
            if tx.one("SELECT 1 FROM erasures WHERE session_id = ?", (session_id,)):
                return None, 0
            raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
        return found, count

    def repair(self, session_ids: Sequence[str] | None = None) -> list[Problem]:
        """Rebuild disagreeing projections and snapshots from the events; see `Journal.repair`."""
        if session_ids is None:
            session_ids = [
                sid
                for (sid,) in self._query(
                    "SELECT session_id FROM sessions UNION SELECT session_id FROM events ORDER BY 1"
                )
            ]
        repaired: list[Problem] = []
        for session_id in session_ids:
            with self._transaction() as tx:
                self._lock_session(tx, session_id)
                found, _ = self._check_one(tx, session_id, refold=True)
                if not found or {p.kind for p in found} - REPAIRABLE:
                    continue  # intact, erased, or its events themselves are in question
                rows = list(self._pages(tx.rows, session_id))  # some: none would be "truncated"
                row = projection_row(fold(decode(r) for r in rows), rows[-1].hash)
                row["session_id"] = session_id
                tx.run(_upsert_sql(tuple(row)), list(row.values()))
                if self._has_snapshots(tx):
                    tx.run("DELETE FROM snapshots WHERE session_id = ?", (session_id,))
            self._heads.pop(session_id, None)
            repaired.extend(found)
        return repaired

    def _snapshot_rows(self, tx: SqlTx, session_id: str) -> dict[int, str]:
        """The session's stored snapshots of the current fold version: seq -> state JSON."""
        if not self._has_snapshots(tx):
            return {}
        return {
            int(seq): state
            for seq, state in tx.rows(
                "SELECT seq, state FROM snapshots WHERE session_id = ? AND fold_version = ?",
                (session_id, FOLD_VERSION),
            )
        }

    # -- erasing ---------------------------------------------------------------------

    def erase(self, session_id: str, *, reason: str, erased_by: str | None = None) -> Erasure:
        """Remove a whole session with an audit record; see `Journal.erase`."""
        if not reason.strip():
            raise InvalidInputError(f"session {session_id}: an erase needs a reason")
        with self._transaction() as tx:
            self._lock_session(tx, session_id)
            last = tx.one(
                "SELECT hash FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                (session_id,),
            )
            projected = tx.one("SELECT head_hash FROM sessions WHERE session_id = ?", (session_id,))
            head = last or projected
            if head is None:
                raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
            (count,) = tx.rows("SELECT count(*) FROM events WHERE session_id = ?", (session_id,))[0]
            self._lock_erasures(tx)
            last = tx.one("SELECT hash FROM erasures ORDER BY id DESC LIMIT 1")
            erasure = Erasure(
                session_id=session_id,
                erased_at=format_ts(utc_now()),
                erased_by=erased_by or _os_user(),
                reason=reason.strip(),
                events=int(count),
                head_hash=str(head[0]),
            )
            previous = str(last[0]) if last is not None and last[0] else GENESIS_HASH
            erasure = erasure.model_copy(
                update={"hash": self.hasher(previous, erasure_bytes(erasure))}
            )
            tx.run(
                f"INSERT INTO erasures({', '.join(_ERASURE_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in _ERASURE_COLUMNS)})",
                [getattr(erasure, name) for name in _ERASURE_COLUMNS],
            )
            if count:
                self._keep_positions(tx)
                tx.run("INSERT INTO erase_authorised(session_id) VALUES (?)", (session_id,))
                tx.run("DELETE FROM events WHERE session_id = ?", (session_id,))
                tx.run("DELETE FROM erase_authorised WHERE session_id = ?", (session_id,))
            tx.run("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            if self._has_snapshots(tx):
                tx.run("DELETE FROM snapshots WHERE session_id = ?", (session_id,))
            if self._has_search_index(tx):
                self.SEARCH.drop_session(tx, session_id)
        self._heads.pop(session_id, None)
        return erasure

    def erasures(self, session_id: str | None = None) -> list[Erasure]:
        """Audit records of erased sessions, oldest first; see `Journal.erasures`."""
        text = f"SELECT {', '.join(_ERASURE_COLUMNS)} FROM erasures"
        params: tuple[str, ...] = ()
        if session_id is not None:
            text += " WHERE session_id = ?"
            params = (session_id,)
        return [
            Erasure.model_validate(dict(zip(_ERASURE_COLUMNS, row, strict=True)))
            for row in self._query(text + " ORDER BY id", params)
        ]

    # -- snapshots (derived data) ---------------------------------------------------

    def _has_snapshots(self, tx: SqlTx) -> bool:
        if not self._snapshots_table:
            self._snapshots_table = "snapshots" in self._table_names(tx)
        return self._snapshots_table

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

    # -- the search index (derived data) ---------------------------------------------

    def _has_search_index(self, tx: SqlTx) -> bool:
        if not self._search_table:
            self._search_table = SEARCH_INDEX_TABLE in self._table_names(tx)
        return self._search_table

    def refresh_search_index(self) -> int:
        """Catch the search index up; see `Journal.refresh_search_index`."""
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

    def search(
        self, query: str, filters: SearchFilters | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Catch the index up, then search it; see `Journal.search`."""
        parts = query_parts(query)
        if limit < 1:
            raise InvalidInputError(f"search: the limit must be at least 1, not {limit}")
        self.refresh_search_index()
        where, params = hit_clauses(filters or SearchFilters(), self.SEARCH.META_MATCH)
        with self._reading() as tx:
            rows = self.SEARCH.find(tx, parts, where, params, limit)
        return [hit(row, parts) for row in rows]


SNAPSHOTS_DDL = (
    "CREATE TABLE IF NOT EXISTS snapshots (session_id TEXT NOT NULL, fold_version INTEGER "
    "NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, "
    "PRIMARY KEY (session_id, fold_version, seq))"
)
"""The derived table of folded states, created on first need."""


def _json_object(text: object) -> dict[str, Any]:
    """``text`` parsed when it is a JSON object, else empty (a body altered by someone else:
    verify's finding; a listing shows what it can)."""
    try:
        found = orjson.loads(text) if isinstance(text, str | bytes) else None
    except orjson.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
