"""The PostgreSQL journal: the same contract as SQLite on a server many writers share.

Open it with ``Journal.open("postgresql://user@host:5432/db")``. The tables live in the
first schema of the connection's ``search_path`` (``?options=-csearch_path%3Djournal`` picks
one); use a dedicated database or schema. Connections come from a pool (psycopg_pool).

Guarantees, as on SQLite: append-only enforced by triggers against any connection;
optimistic concurrency through the primary key (a plain INSERT, never ``ON CONFLICT DO
NOTHING``); the sessions projection written in the append's transaction. Writers of one
session are serialised by a transaction-level advisory lock on the session id; writers of
different sessions are not serialised at all: nothing is held from a write to the commit.

Global positions, and why a follower never misses an event (docs/postgres.md has the whole
argument and the alternatives). Positions come from a sequence, so transactions commit out
of position order: a follower that read position 7 while 6 was still in flight would skip
6. So an append takes its transaction id (``pg_current_xact_id()``, stored in ``events.tx``)
and its positions in one short critical section (a session-level advisory lock taken and
released within one statement, before the transaction's first write): among appends,
positions grow with transaction ids, and the positions of an append still in flight lie in
a gap between the visible rows of lower and higher transaction ids. A read takes one
snapshot and returns rows in position order up to the first gap that could belong to a
transaction the snapshot sees in flight (one of ``pg_snapshot_xip`` strictly between the
transaction ids on either side of the gap). A gap whose transaction rolled back, or died
with its client, is passed once it is no longer in flight. Transactions of other programs
hold nothing up unless their ids fall inside such a gap.

Each append sends a NOTIFY after its commit, in a transaction of its own at
``synchronous_commit=off``: a NOTIFY inside the append would serialise every append's commit
(PostgreSQL holds a lock from queueing a notification to the end of the commit).
`PostgresJournal.wait_for_events` listens (live tailing without polling), and polls briefly
while a notified position waits behind a gap.

Durability: a commit is durable when the server says so (``synchronous_commit=on``, the
server default); ``durability="full"`` sets it on for our connections even where the server
default is weaker.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from . import _postgres_schema as schema
from ._sqlstore import SQLJournal
from ._sqltx import SqlTx, TriggerState, event_params
from .errors import (
    ConflictError,
    JournalBusyError,
    JournalError,
    JournalMissingError,
    StoreError,
)
from .records import StoredEvent, stored_row
from .store import Clock, Durability

__all__ = ["PostgresJournal", "describe_url"]

_PASSWORD = re.compile(r"(://[^:@/]*):[^@/]*@")
_EVENTS = "events(pos, session_id, seq, ts, type, v, body, hash, summary)"
_ROW_COLUMNS = "session_id, seq, ts, type, v, body, hash, summary, pos"

_SAFE_AFTER = f"""
WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s, ?::bigint AS after),
below AS MATERIALIZED (
    SELECT tx FROM events WHERE pos <= (SELECT after FROM snap) ORDER BY pos DESC LIMIT 1),
page AS MATERIALIZED (
    SELECT {_ROW_COLUMNS}, tx FROM events
    WHERE pos > (SELECT after FROM snap) ORDER BY pos LIMIT ?),
edges AS (
    SELECT *, coalesce(lag(pos) OVER w, (SELECT after FROM snap)) AS prev_pos,
           CASE WHEN lag(pos) OVER w IS NULL THEN (SELECT tx FROM below)
                ELSE lag(tx) OVER w END AS prev_tx
    FROM page WINDOW w AS (ORDER BY pos)),
held AS (
    SELECT min(pos) AS pos FROM edges, snap
    WHERE pos > prev_pos + 1 AND EXISTS (
        SELECT FROM pg_snapshot_xip(snap.s) AS x
        WHERE x < edges.tx AND (edges.prev_tx IS NULL OR x > edges.prev_tx)))
SELECT {{columns}} FROM edges
WHERE pos < coalesce((SELECT pos FROM held), 9223372036854775807) ORDER BY pos
"""
"""Rows after position ``after`` up to the first gap an in-flight transaction may hold.

The rows on either side of a gap (``prev_tx``, ``tx``; for the first row, the row at or
below ``after``) bound the transaction ids that can hold its positions; a gap is held when
the snapshot has a transaction in flight strictly between them (any below the first row,
when no row is at or below ``after``). Cost: the page, plus a scan of the in-flight list
per gap in it."""

_SAFE_HEAD = """
WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s)
SELECT coalesce(
    (SELECT min(coalesce(lo.pos, 0))
     FROM snap, pg_snapshot_xip(snap.s) AS x
     CROSS JOIN LATERAL (SELECT pos FROM events WHERE tx > x ORDER BY tx, pos LIMIT 1) AS hi
     LEFT JOIN LATERAL (
         SELECT pos FROM events WHERE tx < x ORDER BY tx DESC, pos DESC LIMIT 1) AS lo ON TRUE
     WHERE hi.pos > coalesce(lo.pos, 0) + 1),
    (SELECT max(pos) FROM events),
    0)
"""
"""The newest position no in-flight transaction can still write below.

For each transaction in flight, the visible rows with the next lower and higher ids (two
probes of the ``(tx, pos)`` index) show whether it sits in a gap; the head is the last row
below the lowest such gap, or the newest row. Cost: two index probes per transaction the
server has in flight."""

_RESERVE = (
    "SELECT {lock}pg_current_xact_id_if_assigned() IS NULL, pg_advisory_lock(?), "
    "pg_current_xact_id(), {take}, pg_advisory_unlock(?), set_config(?, 'on', true)"
)
"""Take the transaction id and positions under a lock released in the same statement.

The lock covers the id and the positions only, for microseconds; the advisory xact lock on
the session (for an append) comes first, so waiting for it holds no position. The target
list is evaluated in order. The transaction must not have an id yet (the first item)."""
_TAKE_ONE = f"nextval('{schema.POSITIONS}')"
_TAKE_MANY = f"setval('{schema.POSITIONS}', nextval('{schema.POSITIONS}') + ? - 1)"
_LOCK_SESSION = "pg_advisory_xact_lock(hashtextextended(?, 0)), "
_NOTIFY = "SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)"
_GAP_POLL = (0.01, 0.25)
"""Polling while a notified position waits behind a gap: first and longest delay (s)."""


def describe_url(url: str) -> str:
    """Return ``postgresql://user@host:port/db`` for a URL, never with its password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return _PASSWORD.sub(r"\1@", url)
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    user = params.get("user")
    database = params.get("dbname") or user or ""
    return f"postgresql://{f'{user}@' if user else ''}{host}:{port}/{database}"


def _lock_key(text: str) -> int:
    """A signed 64-bit advisory lock key for ``text`` (the same in every process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


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

    def run(self, text: str, params: Sequence[Any] = ()) -> None:
        """Run a statement (text without parameters is sent as is: DDL holds ``%``)."""
        self.connection.execute(self.sql(text) if params else text, params or None)

    def run_many(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row, pipelined."""
        with self.connection.cursor() as cursor:
            cursor.executemany(self.sql(text), rows)

    def copy(self, target: str, rows: Sequence[Sequence[Any]]) -> None:
        """Load rows into ``target`` (``table(columns)``) with COPY; triggers fire as on INSERT."""
        with self.connection.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


class PostgresJournal(SQLJournal):
    """A journal in a PostgreSQL schema. Use `Journal.open` rather than this class directly."""

    SCHEMA = schema.SPEC
    KIND = "PostgreSQL schema"
    NULL_SAFE_EQUAL = "IS NOT DISTINCT FROM"

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        durability: Durability = "normal",
        clock: Clock | None = None,
        hmac_key: bytes | None = None,
        pool_size: int = 4,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key)
        self._url = url
        self._target = describe_url(url)
        self._kwargs: dict[str, Any] = {"application_name": "agent-journal"}
        try:
            if "connect_timeout" not in conninfo_to_dict(url):
                self._kwargs["connect_timeout"] = max(1, round(connect_timeout))
        except psycopg.Error as e:
            raise StoreError(f"{self._target}: not a valid PostgreSQL URL: {_one_line(e)}") from e
        self._durability = durability
        self._listen: psycopg.Connection[Any] | None = None
        self._listen_lock = threading.Lock()
        try:
            setup = psycopg.connect(url, **self._kwargs)
        except psycopg.Error as e:
            raise StoreError(f"{self._target}: cannot connect: {_one_line(e)}") from e
        try:
            with setup:
                self._schema = self._current_schema(setup)
                self._prepare(
                    lambda: self._setup_tx(setup, exclusive=False),
                    lambda: self._setup_tx(setup, exclusive=True),
                    create=create,
                    hmac=hmac_key is not None,
                )
        except psycopg.Error as e:
            raise self._translate(e, "open") from e
        self._channel = "agent_journal_" + hashlib.sha1(self._schema.encode()).hexdigest()[:16]
        self._positions_lock = _lock_key(f"agent-journal positions {self._schema}")
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
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

    # -- plumbing --------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self._durability == "full":
            conn.execute("SET synchronous_commit = on")
            conn.commit()

    def _current_schema(self, conn: psycopg.Connection[Any]) -> str:
        row = conn.execute("SELECT current_schema()").fetchone()
        conn.rollback()
        if row is None or row[0] is None:
            raise StoreError(
                f"{self._target}: no schema to use: none of the search_path's schemas exists"
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
        text = _server_message(error)
        if isinstance(error, errors.UniqueViolation):
            return ConflictError(f"{self._target}: events are append-only (a taken key): {text}")
        if "append-only" in text:
            return ConflictError(f"{self._target}: {text}")
        if isinstance(error, errors.LockNotAvailable | errors.QueryCanceled):
            return JournalBusyError(f"{self._target}: {action} timed out waiting: {text}")
        if isinstance(error, errors.InsufficientPrivilege):
            return StoreError(f"{self._target}: permission denied ({action}): {text}")
        if isinstance(error, psycopg.OperationalError):
            return StoreError(f"{self._target}: connection failed during {action}: {text}")
        return StoreError(f"{self._target}: {action} failed: {text}")

    @contextmanager
    def _pooled(self, action: str, *, write: bool) -> Iterator[SqlTx]:
        try:
            with self._pool.connection() as conn:
                if not write:
                    yield _PgTx(conn)
                    return
                tx = _PgTx(conn)
                try:
                    with conn.transaction():
                        yield tx
                finally:
                    if tx.reserving:  # failed between taking the positions lock and its release
                        conn.execute("SELECT pg_advisory_unlock_all()")
                        conn.rollback()
                if tx.next_position:
                    self._notify(conn, tx.next_position - 1)
        except PoolTimeout as e:
            raise JournalBusyError(f"{self._target}: no free connection for {action}") from e
        except psycopg.Error as e:
            raise self._translate(e, action) from e

    def _notify(self, conn: psycopg.Connection[Any], position: int) -> None:
        """Tell listeners that ``position`` committed.

        A wake-up only, so a failure is ignored (followers re-read when their wait times
        out): the append has committed already.
        """
        conn.autocommit = True
        try:
            conn.execute(_NOTIFY, (self._channel, str(position)))
        except psycopg.Error:
            pass
        finally:
            if not conn.closed:
                conn.autocommit = False

    def _reading(self) -> AbstractContextManager[SqlTx]:
        return self._pooled("read", write=False)

    def _transaction(self) -> AbstractContextManager[SqlTx]:
        return self._pooled("write", write=True)

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

    def _reserve_positions(self, tx: SqlTx, count: int) -> None:
        self._reserve(tx, count, None)

    def _begin_append(self, tx: SqlTx, session_id: str, count: int) -> None:
        self._reserve(tx, count, session_id)

    def _reserve(self, tx: SqlTx, count: int, session_id: str | None) -> None:
        """Take ``count`` positions (see `_RESERVE`), after locking ``session_id`` if given.

        The flag that lets our plain INSERTs past the per-row overwrite check rides along
        (schema.APPEND_FLAG).
        """
        assert isinstance(tx, _PgTx) and count > 0 and not tx.end_position
        text = _RESERVE.format(
            lock=_LOCK_SESSION if session_id is not None else "",
            take=_TAKE_ONE if count == 1 else _TAKE_MANY,
        )
        params: list[Any] = [] if session_id is None else [self._session_key(session_id)]
        params.append(self._positions_lock)
        params += [] if count == 1 else [count]
        params += [self._positions_lock, schema.APPEND_FLAG]
        tx.reserving = True
        found = tx.one(text, params)
        tx.reserving = False
        assert found is not None
        fresh, last = found[-6], int(found[-3])
        if not fresh:
            raise AssertionError("positions are taken before a transaction's first write")
        tx.next_position, tx.end_position = last - count + 1, last + 1

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> None:
        assert isinstance(tx, _PgTx)
        first = tx.use_positions(len(rows))
        params = [(first + index, *event_params(row)) for index, row in enumerate(rows)]
        if len(params) == 1:
            tx.run(f"INSERT INTO {_EVENTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", params[0])
        else:  # COPY fires the same triggers and checks the same keys, at half the cost per row
            tx.copy(_EVENTS, params)

    def close(self) -> None:
        """Close the pool and the listening connection (idempotent)."""
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
        """Rows after ``position`` that no in-flight append can precede (`_SAFE_AFTER`)."""
        rows = self._query(_SAFE_AFTER.format(columns=_ROW_COLUMNS), (position, limit))
        return [stored_row(row) for row in rows]

    def head_position(self) -> int:
        """The newest position a follower can start from; see `Journal.head_position`.

        No event still being committed can take a position at or below it (`_SAFE_HEAD`).
        """
        return int(self._query(_SAFE_HEAD)[0][0])

    def _has_after(self, position: int) -> bool:
        return bool(self._query(_SAFE_AFTER.format(columns="pos"), (position, 1)))

    def wait_for_events(self, position: int, timeout: float) -> bool:
        """Wait for an event after ``position`` with LISTEN/NOTIFY; see `Journal`.

        A notification of a later position may come while an earlier one is still in
        flight (or was rolled back, which notifies nobody): the wait then polls, from 10 ms
        up to 250 ms apart, until the event can be read.
        """
        deadline = time.monotonic() + timeout
        delay: float | None = None  # polling: a notified position is not readable yet
        with self._listen_lock:
            try:
                listener = self._listener()
                if self._has_after(position):
                    return True
                while (remaining := deadline - time.monotonic()) > 0:
                    wait = remaining if delay is None else min(remaining, delay)
                    for note in listener.notifies(timeout=wait, stop_after=1):
                        if note.payload.isdigit() and int(note.payload) > position:
                            delay = delay or _GAP_POLL[0]
                    if delay is not None:
                        if self._has_after(position):
                            return True
                        delay = min(delay * 2, _GAP_POLL[1])
                return self._has_after(position)
            except psycopg.Error as e:
                if self._listen is not None:
                    self._listen.close()
                    self._listen = None
                raise self._translate(e, "listen") from e

    def _listener(self) -> psycopg.Connection[Any]:
        if self._listen is None or self._listen.closed:
            conn = psycopg.connect(self._url, autocommit=True, **self._kwargs)
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
