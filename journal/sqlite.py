"""The SQLite journal: one file (or ``:memory:``), WAL, append-only enforced by triggers.

Durability: every `append` is written in one ``BEGIN IMMEDIATE`` transaction, and returns
once that transaction is committed. Concurrent appends of one process (threads sharing the
journal object, or coroutines awaiting `Journal.append_async`) share a transaction and its
commit (group commit, `journal._group_commit`); each is acknowledged only after the commit
that holds its events. With ``durability="normal"`` (``PRAGMA synchronous=NORMAL`` in WAL
mode) a committed append survives a crash of the process, but the last commits before a
power loss or an OS crash may be rolled back (never half-applied: the file stays
consistent). ``"full"`` fsyncs the WAL on every commit, so a committed append also survives
a power loss, at a cost in speed (which group commit shares out among concurrent callers).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import compress, count, repeat
from operator import is_
from pathlib import Path
from typing import Any

from . import _sqlite_schema as schema
from ._async_appends import AsyncAppends
from ._file_watch import FileWatch
from ._group_commit import GroupCommit
from ._lock_holders import describe_holders
from ._planner import AppendPlan, Stamps
from ._search_sqlite import SQLiteSearchIndex
from ._sql_append import NO_POSITION, insert_events_sql, null_places
from ._sql_journal import SQLJournal
from ._sqlite_read_only import cannot_create_beside, read_only_target
from ._sqltx import SqlTx, TriggerState, guard_refusal
from .clock import Now
from .errors import (
    JournalBusyError,
    JournalError,
    JournalMissingError,
    NotAJournalError,
    PositionError,
    StoreError,
)
from .events import AgentEvent
from .records import StoredEvent
from .store import DEFAULT_MAX_EVENT_BYTES, Durability

__all__ = ["SQLiteJournal"]

FIRST_INSERT = insert_events_sql(schema.NEXT_POSITION)
"""The INSERT of a transaction's first events row (see `SQLiteJournal._insert_events`), from
a `StoredEvent`'s first eight fields: all but its position, which this INSERT gives it.

No None is bound on this path: CPython's sqlite3 binds a None only after looking for an
adapter, which raises and clears an AttributeError per None (see `without_nulls`)."""
NEXT_INSERT = insert_events_sql(None)
"""The INSERT of the events rows after the first, from their first eight fields as
`FIRST_INSERT`: SQLite gives each the next rowid."""


class SQLiteJournal(SQLJournal):
    """A journal in one SQLite file. Use `Journal.open` rather than this class directly.

    Opening a file written by an older schema upgrades it in place (one transaction).
    Appends that arrive while another commit is in progress share the next commit (group
    commit); ``group_commit=False`` gives every append a transaction of its own, one after
    the other (what the benchmark compares against).
    """

    SCHEMA = schema.SPEC
    KIND = "SQLite database"
    NULL_SAFE_EQUAL = "IS"
    INDEXED_COLUMNS = ("agent", "started")
    STATUS_CLAUSES = {
        status: f"status = ? AND {schema.ENDED_BADLY}" for status in ("halted", "failed")
    }
    SEARCH = SQLiteSearchIndex()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        durability: Durability = "normal",
        clock: Now | None = None,
        hmac_key: bytes | None = None,
        busy_timeout_ms: int = 5000,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
        group_commit: bool = True,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key, max_event_bytes=max_event_bytes)
        path = os.fspath(path)
        self._path = path
        self._lock = threading.RLock()
        self._write_tx = _Transaction(self)
        self._group = (
            GroupCommit(self._transaction, self._write_failure, path) if group_commit else None
        )
        self._async_appends = AsyncAppends(self._group) if self._group is not None else None
        self._identity: tuple[int, int] | None = None
        self._watch: FileWatch | None = None
        memory = path == ":memory:"
        if not memory and not create and not Path(path).exists():
            raise JournalMissingError(f"{path}: no journal here (the file does not exist)")
        if not memory and Path(path).is_dir():
            raise NotAJournalError(f"{path}: is a directory, not a journal file")
        self._read_only: str | None = None
        """Why the journal was opened read-only (`journal._sqlite_read_only`), or None."""
        settings = (busy_timeout_ms, durability, create, hmac_key is not None)
        try:
            try:
                self._connect(path, *settings)
            except sqlite3.DatabaseError as e:
                if memory or not cannot_create_beside(e, path):
                    raise
                uri, self._read_only = read_only_target(path, e)
                self._connect(uri, *settings)
        except sqlite3.DatabaseError as e:
            raise self._translate(e, "open") from e
        if not memory and self._read_only is None and not os.access(path, os.W_OK):
            self._read_only = f"{Path(path).name} is not writable; opened read-only"
        self._watch = FileWatch(path) if not memory else None  # before the identity is taken
        self._identity = None if memory else _identity(path)

    # -- setup -----------------------------------------------------------------------

    def _connect(
        self, target: str, busy_timeout_ms: int, durability: Durability, create: bool, hmac: bool
    ) -> None:
        """Connect to ``target`` (a path or a ``file:`` URI) and check or set up the schema.

        The pragmas' errors are raised as SQLite's (the first read of a WAL journal whose
        folder refuses new files fails there, and the caller then retries read-only); the
        connection is closed on any failure.
        """
        try:
            self._conn = sqlite3.connect(
                target,
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
                uri=target.startswith("file:"),
            )
        except sqlite3.Error as e:
            raise StoreError(f"{self._path}: cannot open: {e}") from e
        self._tx = _SQLiteTx(self._conn)
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute(
                f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}"
            )
            self._prepare(self._reading, self._setup_write, create=create, hmac=hmac)
        except (sqlite3.DatabaseError, JournalError):
            self._conn.close()
            raise

    @contextmanager
    def _setup_write(self) -> Iterator[SqlTx]:
        """The exclusive transaction that creates or upgrades the schema."""
        if self._path != ":memory:":
            self._enable_wal()
        with self._transaction() as tx:
            yield tx

    def _table_names(self, tx: SqlTx) -> set[str]:
        return {name for (name,) in tx.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _foreign_tables(self, tables: set[str]) -> set[str]:
        return tables - {"sqlite_sequence"}

    def _missing_error(self) -> StoreError:
        return NotAJournalError(f"{self._path}: is an empty database, not a journal")

    def _enable_wal(self) -> None:
        """Switch to WAL; SQLite skips the busy handler when that could deadlock, so retry."""
        waited, timeout_ms = 0, int(self._conn.execute("PRAGMA busy_timeout").fetchone()[0])
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or waited >= timeout_ms:
                    raise
                time.sleep(0.005)
                waited += 5

    # -- plumbing --------------------------------------------------------------------

    def _translate(self, error: sqlite3.Error, action: str) -> StoreError:
        text = str(error)
        if "locked" in text or "busy" in text:
            try:
                waited = int(self._conn.execute("PRAGMA busy_timeout").fetchone()[0]) / 1000
            except sqlite3.Error:
                waited = 0.0
            return JournalBusyError(
                f"{self._path}: database is locked by another writer ({action}): waited "
                f"{waited:g} s (the busy timeout){describe_holders(self._path)}"
            )
        if "not a database" in text or "malformed" in text:
            return NotAJournalError(f"{self._path}: not a SQLite journal ({text})")
        if "full" in text:
            return StoreError(f"{self._path}: disk or database is full; {action} was not written")
        if "readonly" in text:
            why = "" if self._read_only is None else f" ({self._read_only})"
            return StoreError(
                f"{self._path}: the journal is read-only{why}; {action} was not written"
            )
        if "unable to open" in text and action == "open":
            name = Path(self._path).name
            return StoreError(
                f"{self._path}: cannot open: {text} (SQLite needs to create {name}-wal and "
                f"{name}-shm beside it: is the directory writable?)"
            )
        return StoreError(f"{self._path}: {action} failed: {text}")

    def _read_only_reason(self) -> str | None:
        return self._read_only

    def _transaction(self) -> _Transaction:
        return self._write_tx

    def _write_failure(self, error: BaseException) -> BaseException:
        """The error a write's ``error`` is to our callers (SQLite's errors translated)."""
        if isinstance(error, sqlite3.IntegrityError):
            refused = guard_refusal(self._path, str(error))
            if refused is not None:
                return refused
        if isinstance(error, sqlite3.Error) and "datatype mismatch" in str(error):
            return PositionError(  # the next position is past 2^63 - 1 (`schema.NEXT_POSITION`)
                f"{self._path}: the next global position is past the largest SQLite has "
                f"(2^63 - 1): {NO_POSITION}"
            )
        if isinstance(error, sqlite3.Error):
            return self._translate(error, "write")
        return error

    def _write_committed(
        self,
        write: Callable[[SqlTx], AppendPlan | None],
        committed: Callable[[AppendPlan | None], None],
    ) -> AppendPlan | None:
        """`SQLAppends._write_committed` in a group commit (`journal._group_commit`)."""
        if self._group is None:
            return super()._write_committed(write, committed)
        return self._group.run(write, committed)

    async def append_async(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: Stamps | None = None,
    ) -> int:
        """`Journal.append_async`, in batches when group commit is on.

        The appends of every coroutine waiting at once are written by one thread in one
        transaction (`journal._async_appends`), sharing commits with the appends of threads.
        """
        if self._async_appends is None:
            return await super().append_async(session_id, events, expected_seq=expected_seq, ts=ts)
        plans = self._append_plans(session_id, events, expected_seq, ts)
        plan = await self._async_appends.run(*self._write_of(session_id, *plans))
        assert plan is not None  # an append always plans rows
        return plan.rows[-1].seq

    def _check_still_there(self) -> None:
        """Refuse to commit into a file that was deleted or replaced since it was opened.

        SQLite goes on writing to the open file after it was unlinked (in WAL mode it does
        not notice), so every later append would report success and vanish with the process.
        The path is stat()ed only when the file's watch (`FileWatch`) saw something happen.
        """
        if (
            self._watch is not None
            and not self._watch.quiet()
            and _identity(self._path) != self._identity
        ):
            raise StoreError(
                f"{self._path}: the journal file was deleted or replaced while open; "
                "write was not written"
            )

    @contextmanager
    def _reading(self) -> Iterator[SqlTx]:
        with self._lock:
            try:
                yield self._tx
            except sqlite3.Error as e:
                raise self._translate(e, "read") from e

    @contextmanager
    def _snapshot(self) -> Iterator[SqlTx]:
        """A deferred read transaction: one snapshot from its first read to its end.

        Keep it short (verify takes one per session): a WAL checkpoint cannot pass it.
        """
        with self._reading() as tx:
            self._conn.execute("BEGIN")
            try:
                yield tx
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()
            if self._watch is not None:
                self._watch.close()

    @property
    def target(self) -> str:
        """The file path, or ``:memory:``."""
        return self._path

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> int:
        """`SQLAppends._insert_events`; the first row numbered past every position given.

        `schema.NEXT_POSITION` places it (an erase may have removed the rows at the top);
        the rest take SQLite's next rowid, past that one.
        """
        written = tx.changed(FIRST_INSERT, rows[0][:8])
        if len(rows) > 1:
            written += tx.changed_many(NEXT_INSERT, [row[:8] for row in rows[1:]])
        return written

    def _keep_positions(self, tx: SqlTx) -> None:
        tx.run(schema.KEEP_POSITIONS)

    def _project(
        self, tx: SqlTx, text: str, params: Sequence[Any], session_id: str, plan: AppendPlan
    ) -> bool:
        """`SQLAppends._project` by the row count alone.

        A SQLite trigger cannot change the values a statement writes (``NEW`` is read-only),
        only skip the row, which the count shows; ``RETURNING`` made a one-event append
        dearer.
        """
        changed = tx.changed(*without_nulls(text, params, null_places(text)))
        if changed > 1:
            raise self._unplanned(session_id, f"{changed} sessions projection rows were written")
        return changed == 1

    # -- verification ----------------------------------------------------------------

    def _trigger_states(self) -> dict[str, TriggerState]:
        found = dict(self._query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        return {
            name: "ok" if " ".join(found[name].split()) == " ".join(sql.split()) else "replaced"
            for name, sql in schema.TRIGGERS.items()
            if name in found
        }

    def _position_findings(self, tx: SqlTx, *, rows_missing: bool) -> list[str]:
        """The positions against the events ever written: they are dense.

        One writer numbers rows one past the highest given, which an erase keeps in
        ``meta.position_floor`` before it deletes rows, so the highest position given is
        the events ever written (in place, or erased as the audit records count them). Rows
        moved, or removed without an audit record, break that (rows the chains found
        removed or cut are not reported twice: the count is then left out).
        """
        found = tx.one(schema.POSITIONS_READ)
        assert found is not None
        count, low, high, floor, erased = found
        if not isinstance(floor, str) or not floor.isdigit() or int(floor) > schema.LAST_POSITION:
            return [f"meta {schema.POSITION_FLOOR} {floor!r:.30} is not a position"]
        if low is not None and low < 1:
            return [f"position {low} is below 1, where positions start"]
        given, written = max(high or 0, int(floor)), count + erased
        if given == written or (rows_missing and given > written):
            return []
        return [
            f"the positions run to {given}, but {written} events were ever written ({count} "
            f"in place, {erased} erased): positions were moved, or rows removed, outside "
            "agent-journal"
        ]

    def _foreign_objects(self, tables: frozenset[str]) -> list[tuple[str, str, str]]:
        return [
            ("trigger", name, table)
            for name, table in self._query(
                "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
            )
            if table in tables
        ]


class _SQLiteTx(SqlTx):
    """`SqlTx` whose statements that return no rows run on one cursor, kept.

    ``Connection.execute`` makes a cursor per statement, about a tenth of the cost of an
    append's short statements (BEGIN, the projection UPDATE, the INSERT, COMMIT). A
    statement that returns rows keeps its own cursor: one left unread here would hold its
    statement open until the next.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        super().__init__(connection)
        self._cursor = connection.cursor()

    def changed(self, text: str, params: Sequence[Any] = ()) -> int:
        """`SqlTx.changed` (an INSERT, UPDATE or DELETE without RETURNING)."""
        return int(self._cursor.execute(text, params).rowcount)

    def run_rowless(self, text: str) -> None:
        """Run a statement without parameters that returns no rows (BEGIN, COMMIT)."""
        self._cursor.execute(text)


class _Transaction:
    """`SQLiteJournal._transaction`: ``BEGIN IMMEDIATE`` under the journal's lock.

    ``COMMIT`` when the block ends (once the file is checked to be still there), or
    ``ROLLBACK`` and the error translated when it raises.

    A class rather than a generator context manager: one is entered per append, and this
    one, made once per journal, costs no generator and no new object per transaction.
    """

    __slots__ = ("_journal",)

    def __init__(self, journal: SQLiteJournal) -> None:
        self._journal = journal

    def __enter__(self) -> SqlTx:
        journal = self._journal
        journal._lock.acquire()
        try:
            journal._tx.run_rowless("BEGIN IMMEDIATE")
        except BaseException as e:
            journal._lock.release()
            if isinstance(e, sqlite3.Error):
                raise journal._translate(e, "begin") from e
            raise
        return journal._tx

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        journal = self._journal
        try:
            if error is None:
                try:
                    journal._check_still_there()
                    journal._tx.run_rowless("COMMIT")
                    return
                except BaseException as e:
                    error = e
                    kind = None  # raised here, not by the block
            if journal._conn.in_transaction:
                journal._conn.execute("ROLLBACK")
            failure = journal._write_failure(error)
            if failure is not error:
                raise failure from error
            if kind is None:
                raise error  # the COMMIT's or the check's (the block's goes on up by itself)
        finally:
            journal._lock.release()


def without_nulls(
    text: str, params: Sequence[Any], places: Sequence[int] | None = None
) -> tuple[str, Sequence[Any]]:
    """``text`` and ``params`` with each None parameter written into the SQL as ``NULL``.

    The same statement: CPython's sqlite3 binds a None only after a failed adapter lookup
    (an AttributeError raised and cleared, on 3.11 about as dear as binding ten values), and
    a projection row holds several (no halt rule, no fork, not ended). A placeholder is a
    ``?`` that is not inside a string literal; the statements given here have none.

    ``places``, when given, are the positions of the parameters that may be None
    (`journal._sql_append.null_places`): only those are looked at, a third of the cost of
    looking at all. A None elsewhere stays a parameter: the same statement, bound dearer.
    """
    if places is None:
        nulls = tuple(compress(count(), map(is_, params, repeat(None))))
    else:
        nulls = tuple([place for place in places if params[place] is None])
    if not nulls:
        return text, params
    kept = list(params)
    for place in reversed(nulls):
        del kept[place]
    return _nulls_written(text, nulls), kept


@functools.cache
def _nulls_written(text: str, nulls: tuple[int, ...]) -> str:
    """``text`` with its placeholders at the 0-based indexes ``nulls`` written as NULL."""
    parts = text.split("?")
    return "".join(
        part + ("" if index == len(parts) - 1 else "NULL" if index in nulls else "?")
        for index, part in enumerate(parts)
    )


def _identity(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (None: there is no file there)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
