"""The PostgreSQL journal: the same contract as SQLite on a server many writers share.

Open it with ``Journal.open("postgresql://user@host:5432/db")``. The tables live in the
first schema of the connection's ``search_path`` (``?options=-csearch_path%3Djournal`` picks
one); use a dedicated database or schema. Connections come from a pool (psycopg_pool).

Guarantees, as on SQLite: append-only enforced by triggers against any connection;
optimistic concurrency through the primary key (a plain INSERT, never ``ON CONFLICT DO
NOTHING``); the sessions projection written in the append's transaction. Writers of one
session are serialised by a transaction-level advisory lock on the session id; writers of
different sessions are not serialised at all: nothing is held from a write to the commit.

Global positions come from a sequence and followers read them up to a safe horizon:
`journal._pg_positions` has how and why (docs/postgres.md, the whole argument). Each
append's NOTIFY follows its commit, from a thread; `PostgresJournal.wait_for_events`
listens (live tailing without polling).

Durability: a commit is durable when the server says so (``synchronous_commit=on``, the
server default); ``durability="full"`` sets it on for our connections even where the server
default is weaker.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, cast

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from . import _postgres_schema as schema
from ._pg_positions import (
    GAP_POLL,
    LOCK_SESSION,
    NOTIFY_INTERVAL,
    ONE_STATEMENT_EVENTS,
    PEEK,
    READ_AFTER,
    RESERVE,
    SAFE_HEAD,
    TAKE_MANY,
    TAKE_ONE,
    UNPLANNED,
    Notifier,
    one_statement,
)
from ._planner import AppendPlan, SessionHead
from ._search_pg import PostgresSearchIndex
from ._sql_import import ImportRows
from ._sql_journal import SQLJournal
from ._sqltx import SqlTx, TriggerState, event_params
from .clock import Now
from .errors import (
    ConflictError,
    JournalBusyError,
    JournalError,
    JournalMissingError,
    StoreError,
    UnplannedWriteError,
)
from .records import StoredEvent, stored_row
from .store import DEFAULT_MAX_EVENT_BYTES, Durability, without_password

__all__ = ["DEFAULT_LOCK_TIMEOUT", "PostgresJournal", "describe_url"]

DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds a statement of ours waits for a lock another client holds (a ``LOCK TABLE``, a
row it updates, a writer of the same session) before it gives up with `JournalBusyError`.
A ``lock_timeout`` in the URL's ``options`` wins (``0``: wait as long as it takes)."""

_HOLDERS = (
    "SELECT c.relname, l.mode, l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE l.granted AND l.pid <> pg_backend_pid() AND n.nspname = %s "
    "AND c.relkind IN ('r', 'p') AND l.mode IN "
    "('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock') "
    "ORDER BY 1, 3"
)
"""The tables of a schema that other clients hold locks on that block a read or a write."""

_EVENTS = "events(pos, session_id, seq, ts, type, v, body, hash, summary)"


def describe_url(url: str) -> str:
    """Return ``postgresql://user@host:port/db`` for a URL, never with its password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return without_password(url)
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    user = params.get("user")
    database = params.get("dbname") or user or ""
    return f"postgresql://{f'{user}@' if user else ''}{host}:{port}/{database}"


def _lock_key(text: str) -> int:
    """A signed 64-bit advisory lock key for ``text`` (the same in every process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def _unlock_all(conn: psycopg.Connection[Any]) -> None:
    """Release the session-level advisory locks of ``conn`` (a broken one holds none)."""
    try:
        conn.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        pass


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _server_message(error: psycopg.Error) -> str:
    """The server's message and detail on one line, without its context.

    The context of an error inside a COPY quotes the row being loaded (event data); the
    message and detail name the constraint and the key, which is what the user needs.
    """
    parts = (error.diag.message_primary, error.diag.message_detail)
    found = " ".join(" ".join(part.split()) for part in parts if part)
    return found or _one_line(error).removeprefix("ERROR: ")


def _session_settings(
    options: str, durability: Durability, lock_timeout: float | None
) -> dict[str, str]:
    """The settings our connections set, name to value.

    ``lock_timeout`` (unless the URL's ``options`` set it) and, for ``durability="full"``,
    ``synchronous_commit``.
    """
    settings: dict[str, str] = {}
    if lock_timeout and "lock_timeout" not in options:
        settings["lock_timeout"] = f"{max(1, round(lock_timeout * 1000))}ms"
    if durability == "full":
        settings["synchronous_commit"] = "on"
    return settings


class _PgTx(SqlTx):
    """A psycopg connection behind the ``?``-placeholder interface of `SqlTx`.

    It also holds the global positions reserved for the transaction: ``next_position`` up
    to ``end_position`` (exclusive) are still to be written.
    """

    next_position = 0
    end_position = 0
    reserving = False
    """True while the statement that takes the positions lock runs."""

    def use_positions(self, count: int) -> int:
        """Return the first of ``count`` reserved positions and mark them written."""
        first = self.next_position
        if first + count > self.end_position:
            raise AssertionError("positions are reserved before an append's first write")
        self.next_position = first + count
        return first

    def sql(self, text: str) -> str:
        """Rewrite ``?`` placeholders to psycopg's ``%s``."""
        return text.replace("?", "%s")

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query and return its rows (none for a statement without results)."""
        cursor = self.connection.execute(self.sql(text) if params else text, params or None)
        return list(cursor.fetchall()) if cursor.description else []

    def one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        cursor = self.connection.execute(self.sql(text) if params else text, params or None)
        return cast("tuple[Any, ...] | None", cursor.fetchone())

    def run(self, text: str, params: Sequence[Any] = ()) -> None:
        """Run a statement (text without parameters is sent as is: DDL holds ``%``)."""
        self.connection.execute(self.sql(text) if params else text, params or None)

    def run_many(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row, pipelined."""
        with self.connection.cursor() as cursor:
            cursor.executemany(self.sql(text), rows)

    def copy(self, target: str, rows: Sequence[Sequence[Any]]) -> int:
        """Load rows into ``target`` (``table(columns)``) with COPY; return the rows loaded.

        Triggers fire as on INSERT; rules do not.
        """
        with self.connection.cursor() as cursor:
            with cursor.copy(f"COPY {target} FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return int(cursor.rowcount)


class SpooledRows(ImportRows):
    """An import's planned rows spooled to a temporary file until its positions are taken.

    Positions are taken once per transaction, before its first write, for an exact count:
    the count of a streamed import is known only once every session is planned, so the
    rows wait on disk (not in memory) in between, then `finish` reserves and inserts them.
    """

    def __init__(self, journal: SQLJournal, tx: SqlTx) -> None:
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


class PostgresJournal(SQLJournal):
    """A journal in a PostgreSQL schema; `Journal.open` opens one with the defaults.

    Construct it directly for what `Journal.open` does not take: ``pool_size`` (connections
    of this object), ``connect_timeout`` (seconds), ``pool_timeout`` (seconds a call waits
    for a free connection, or for the pool to reconnect after the server went away, before
    `JournalBusyError`), ``lock_timeout`` (seconds a statement waits for a lock another
    client holds before `JournalBusyError`, `DEFAULT_LOCK_TIMEOUT`; None: no bound; a
    ``lock_timeout`` in the URL's ``options`` wins) and ``notify_interval`` (seconds between
    two NOTIFYs of this object, `NOTIFY_INTERVAL` by default).
    """

    SCHEMA = schema.SPEC
    KIND = "PostgreSQL schema"
    NULL_SAFE_EQUAL = "IS NOT DISTINCT FROM"
    INDEXED_COLUMNS = ("agent", "status", "started")
    SEARCH = PostgresSearchIndex()

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        durability: Durability = "normal",
        clock: Now | None = None,
        hmac_key: bytes | None = None,
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        pool_timeout: float = 30.0,
        lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
        notify_interval: float = NOTIFY_INTERVAL,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key, max_event_bytes=max_event_bytes)
        self._url = url
        self._target = describe_url(url)
        self._schema = ""
        self._kwargs: dict[str, Any] = {"application_name": "agent-journal"}
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as e:
            raise StoreError(f"{self._target}: not a valid PostgreSQL URL: {_one_line(e)}") from e
        if "connect_timeout" not in params:
            self._kwargs["connect_timeout"] = max(1, round(connect_timeout))
        self._settings = _session_settings(
            str(params.get("options") or ""), durability, lock_timeout
        )
        self._lock_wait = (
            f"{lock_timeout:g} s" if "lock_timeout" in self._settings else "the URL's lock_timeout"
        )
        self._listen: psycopg.Connection[Any] | None = None
        self._listen_lock = threading.Lock()
        try:
            setup = psycopg.connect(url, **self._kwargs)
        except psycopg.Error as e:
            raise StoreError(f"{self._target}: cannot connect: {_one_line(e)}") from e
        try:
            with setup:
                self._apply_settings(setup)
                setup.commit()  # (a rollback would undo the settings)
                self._schema = self._current_schema(setup)
                self._prepare(
                    lambda: self._setup_tx(setup, exclusive=False),
                    lambda: self._setup_tx(setup, exclusive=True),
                    create=create,
                    hmac=hmac_key is not None,
                )
        except psycopg.Error as e:
            raise self._translate(e, "open") from e
        except StoreError as e:  # what is (not) in the schema: say which schema
            named = self._naming_schema(e)
            if named is e:
                raise
            raise named from e
        self._channel = "agent_journal_" + hashlib.sha1(self._schema.encode()).hexdigest()[:16]
        self._positions_lock = _lock_key(f"agent-journal positions {self._schema}")
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            timeout=pool_timeout,
            kwargs=self._kwargs,
            configure=self._configure,
            open=False,
            name="agent-journal",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as e:
            self._pool.close()
            raise StoreError(f"{self._target}: cannot connect: the pool timed out") from e
        self._notifier = Notifier(self._pool, self._channel, notify_interval)

    # -- plumbing --------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.autocommit = True  # transactions are explicit (`_pooled`): no BEGIN for one statement
        self._apply_settings(conn)

    def _apply_settings(self, conn: psycopg.Connection[Any]) -> None:
        """Set the session settings of our connections (`_session_settings`) on ``conn``."""
        for name, value in self._settings.items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))

    @property
    def _where(self) -> str:
        """The target and its schema, as errors that name a table say where it is."""
        return f"{self._target} (schema {self._schema})" if self._schema else self._target

    def _current_schema(self, conn: psycopg.Connection[Any]) -> str:
        row = conn.execute("SELECT current_schema(), current_setting('search_path')").fetchone()
        conn.rollback()
        if row is None or row[0] is None:
            path = row[1] if row is not None else "?"
            raise StoreError(
                f"{self._target}: no schema to use: none of the search_path's schemas exists "
                f"(search_path: {path}); create the one it should use first (CREATE SCHEMA name)"
            )
        return str(row[0])

    @contextmanager
    def _setup_tx(self, conn: psycopg.Connection[Any], *, exclusive: bool) -> Iterator[SqlTx]:
        with conn.transaction():
            if exclusive:
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"agent-journal setup {self._schema}",),
                )
                conn.execute(
                    sql.SQL("SET LOCAL search_path = {}").format(sql.Identifier(self._schema))
                )
            yield _PgTx(conn)

    def _translate(self, error: psycopg.Error, action: str) -> JournalError:
        """One line for a server error: where (the target and its schema), what, why."""
        text = _server_message(error)
        where = self._where
        if isinstance(error, errors.UniqueViolation):
            return ConflictError(f"{where}: events are append-only (a taken key): {text}")
        if UNPLANNED in text:
            written = text.split(UNPLANNED, 1)[1].strip(" '\"")
            return UnplannedWriteError(
                f"{where}: {written}; a trigger or rule "
                "that is not agent-journal's changed the write (verify names it); nothing was "
                "written"
            )
        if "append-only" in text:
            return ConflictError(f"{where}: {text}")
        if isinstance(error, errors.LockNotAvailable):
            return JournalBusyError(
                f"{self._target}: {action} gave up after waiting {self._lock_wait} for "
                f"{self._lock_holders()}; try again once it is released"
            )
        if isinstance(error, errors.QueryCanceled):
            return JournalBusyError(f"{where}: {action} timed out waiting: {text}")
        if isinstance(error, errors.InsufficientPrivilege):
            return StoreError(f"{where}: permission denied ({action}): {text}")
        if isinstance(error, psycopg.OperationalError):
            return StoreError(f"{where}: connection failed during {action}: {text}")
        return StoreError(f"{where}: {action} failed: {text}")

    def _naming_schema(self, error: StoreError) -> StoreError:
        """``error`` (of opening: tables, meta, chain kind) with the schema after the target."""
        text = str(error)
        if self._where == self._target or not text.startswith(f"{self._target}:"):
            return error
        return type(error)(self._where + text.removeprefix(self._target))

    def _lock_holders(self) -> str:
        """What holds the lock a statement of ours gave up on, as far as the server says.

        The tables of our schema other clients hold blocking locks on (asked on a
        connection of its own, after the fact: a holder may be gone by then); else a row
        or advisory lock, which ``pg_locks`` cannot tie to a table.
        """
        schema = self._schema or "?"
        try:
            with psycopg.connect(self._url, autocommit=True, **self._kwargs) as conn:
                found = conn.execute(_HOLDERS, (self._schema,)).fetchall()
        except psycopg.Error:
            found = []
        if not found:
            return (
                f"a lock in schema {schema} held by another transaction (a row it changed, "
                "or a writer of the same session)"
            )
        table, mode, pid = found[0]
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        return f"table {schema}.{table}, locked by another client (pid {pid}, {mode}){more}"

    @contextmanager
    def _pooled(self, action: str, *, mode: str) -> Iterator[SqlTx]:
        """A pooled connection for ``statement``s, or in a ``read`` or ``write`` transaction.

        In ``statement`` mode each statement is its own transaction (autocommit). After a
        write that inserted events, the NOTIFY of their last position is queued.
        """
        try:  # getconn/putconn: the pool's context manager adds a commit check per use
            conn = self._pool.getconn()
        except PoolTimeout as e:
            raise JournalBusyError(f"{self._target}: no free connection for {action}") from e
        tx = _PgTx(conn)
        try:
            if mode == "statement":
                yield tx
            else:
                with conn.transaction():
                    yield tx
        except psycopg.Error as e:
            raise self._translate(e, action) from e
        finally:
            if tx.reserving:  # failed between taking the positions lock and its release
                _unlock_all(conn)
            self._pool.putconn(conn)
        if tx.next_position:
            self._notifier.post(tx.next_position - 1)

    def _query(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._pooled("read", mode="statement") as tx:
            return tx.rows(text, params)

    def _reading(self) -> AbstractContextManager[SqlTx]:
        return self._pooled("read", mode="read")

    def _transaction(self) -> AbstractContextManager[SqlTx]:
        return self._pooled("write", mode="write")

    @contextmanager
    def _snapshot(self) -> Iterator[SqlTx]:
        """A REPEATABLE READ, READ ONLY transaction: one snapshot from its first query on."""
        with self._pooled("read", mode="read") as tx:
            tx.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield tx

    def _table_names(self, tx: SqlTx) -> set[str]:
        return {
            name
            for (name,) in tx.rows(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        }

    def _foreign_tables(self, tables: set[str]) -> set[str]:
        return tables & schema.OUR_TABLES

    def _missing_error(self) -> StoreError:
        return JournalMissingError(
            f"{self._target}: no agent-journal schema here "
            "(create it with: agent-journal init --db URL)"
        )

    def _session_key(self, session_id: str) -> str:
        return f"agent-journal {self._schema} {session_id}"

    def _lock_session(self, tx: SqlTx, session_id: str) -> None:
        tx.run(
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (self._session_key(session_id),)
        )

    def _lock_erasures(self, tx: SqlTx) -> None:
        tx.run(
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
            (f"agent-journal erasures {self._schema}",),
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

    def _import_rows(self, tx: SqlTx) -> ImportRows:
        return SpooledRows(self, tx)

    def _reserve(self, tx: SqlTx, count: int, session_id: str | None) -> None:
        assert isinstance(tx, _PgTx) and count > 0 and not tx.end_position
        text, params = self._reservation(count, session_id)
        tx.reserving = True
        found = tx.one(text, params)
        tx.reserving = False
        assert found is not None
        fresh, last = found[-6], int(found[-3])
        if not fresh:
            raise AssertionError("positions are taken before a transaction's first write")
        tx.next_position, tx.end_position = last - count + 1, last + 1

    def _commit(
        self,
        session_id: str,
        make_plan: Callable[[SqlTx, SessionHead | None], AppendPlan | None],
        on_cached_head: Callable[[SessionHead], AppendPlan] | None = None,
        count: int | None = None,
    ) -> AppendPlan | None:
        """`SQLJournal._commit`, with a small append on a cached head in one statement."""
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
        with self._pooled("write", mode="statement") as tx:
            assert isinstance(tx, _PgTx)
            tx.reserving = True
            found = tx.one(text, params)
            tx.reserving = False
            assert found is not None
            if found[1] != count:
                return False  # the head moved on: nothing was written (`ONE_STATEMENT`)
            tx.next_position = int(found[0]) + 1  # what the NOTIFY tells
        return True

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> int:
        assert isinstance(tx, _PgTx)
        first = tx.use_positions(len(rows))
        params = [(first + index, *event_params(row)) for index, row in enumerate(rows)]
        if len(params) == 1:
            return tx.changed(
                f"INSERT INTO {_EVENTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", params[0]
            )
        # COPY fires the same triggers and checks the same keys, at half the cost per row
        return tx.copy(_EVENTS, params)

    def close(self) -> None:
        """Send the last NOTIFY, close the pool and the listening connection (idempotent)."""
        self._notifier.close()
        self._pool.close()
        with self._listen_lock:
            if self._listen is not None:
                self._listen.close()
                self._listen = None

    @property
    def target(self) -> str:
        """The URL without its password: ``postgresql://user@host:port/db``."""
        return self._target

    # -- positions and tailing -------------------------------------------------------

    def read_after(self, position: int, *, limit: int = 500) -> list[StoredEvent]:
        """Rows after ``position`` that no in-flight append can precede (`SAFE_AFTER`)."""
        rows = self._query(READ_AFTER, (position, limit))
        return [stored_row(row) for row in rows]

    def _rows_after(self, tx: SqlTx, position: int, limit: int) -> list[StoredEvent]:
        """Rows after ``position`` in ``tx``, up to the safe horizon (`SAFE_AFTER`)."""
        return [stored_row(row) for row in tx.rows(READ_AFTER, (position, limit))]

    def head_position(self) -> int:
        """The newest position a follower can start from; see `Journal.head_position`.

        No event still being committed can take a position at or below it (`SAFE_HEAD`).
        """
        return int(self._query(SAFE_HEAD)[0][0])

    def _peek(self, position: int) -> tuple[bool, bool]:
        """Whether an event after ``position`` can be read, and whether one has committed."""
        ready, committed = self._query(PEEK, (position, 1))[0]
        return bool(ready), bool(committed)

    def wait_for_events(self, position: int, timeout: float) -> bool:
        """Wait for an event after ``position`` with LISTEN/NOTIFY; see `Journal`.

        An event may have committed and still wait behind one in flight, whose rollback
        (or a killed client) notifies nobody: while one does, or a NOTIFY names a later
        position that cannot be read yet, the wait polls, from 10 ms up to 250 ms apart.
        """
        deadline = time.monotonic() + timeout
        with self._listen_lock:
            try:
                listener = self._listener()
                ready, committed = self._peek(position)
                delay = GAP_POLL[0] if committed else None  # None: sleep until notified
                while not ready and (remaining := deadline - time.monotonic()) > 0:
                    wait = remaining if delay is None else min(remaining, delay)
                    for note in listener.notifies(timeout=wait, stop_after=1):
                        if note.payload.isdigit() and int(note.payload) > position:
                            delay = delay or GAP_POLL[0]
                    if delay is not None:
                        ready, committed = self._peek(position)
                        delay = min(delay * 2, GAP_POLL[1])
                return ready or self._peek(position)[0]
            except psycopg.Error as e:
                if self._listen is not None:
                    self._listen.close()
                    self._listen = None
                raise self._translate(e, "listen") from e

    def _listener(self) -> psycopg.Connection[Any]:
        if self._listen is None or self._listen.closed:
            conn = psycopg.connect(self._url, autocommit=True, **self._kwargs)
            self._apply_settings(conn)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self._listen = conn
        return self._listen

    # -- verification ----------------------------------------------------------------

    def _trigger_states(self) -> dict[str, TriggerState]:
        found = self._query(
            "SELECT t.tgname, t.tgenabled, pg_get_triggerdef(t.oid), p.proname, p.prosrc, "
            "p.proconfig, 'search_path=' || quote_ident(current_schema()), n.nspname "
            "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE NOT t.tgisinternal AND c.relnamespace = "
            "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        )
        states: dict[str, TriggerState] = {}
        for name, enabled, definition, function, source, config, pinned, home in found:
            expected = schema.TRIGGERS.get(name)
            if expected is None:
                continue
            prefix = pinned.removeprefix("search_path=") + "."
            same = (
                definition.replace(" " + prefix, " ") == expected
                and home == self._schema
                and " ".join(source.split()) == " ".join(schema.FUNCTIONS.get(function, "").split())
                and list(config or []) == [pinned]
            )
            if not same:
                states[name] = "replaced"
            else:
                states[name] = "disabled" if enabled in ("D", "R") else "ok"
        return states

    def _foreign_objects(self, tables: frozenset[str]) -> list[tuple[str, str, str]]:
        found = self._query(
            "SELECT 'trigger', t.tgname, c.relname FROM pg_trigger t "
            "JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND c.relnamespace = "
            "(SELECT oid FROM pg_namespace WHERE nspname = current_schema()) "
            "UNION ALL SELECT 'rule', rulename, tablename FROM pg_rules "
            "WHERE schemaname = current_schema() ORDER BY 2"
        )
        return [(kind, name, table) for kind, name, table in found if table in tables]
