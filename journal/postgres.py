"""The PostgreSQL journal: the same contract as SQLite on a server many writers share.

Open it with ``Journal.open("postgresql://user@host:5432/db")``. The tables live in the
first schema of the connection's ``search_path`` (``?options=-csearch_path%3Djournal`` picks
one); use a dedicated database or schema. Connections come from a pool (psycopg_pool).

Guarantees, as on SQLite: append-only enforced by triggers against any connection;
optimistic concurrency through the primary key (a plain INSERT, never ``ON CONFLICT DO
NOTHING``); the sessions projection written in the append's transaction. Writers of one
session are serialised by a transaction-level advisory lock on the session id. Global
positions are assigned from a one-row counter whose row lock is held until commit, so they
become visible in the order they were assigned: a reader following positions never skips
an event that commits late. Each append sends a NOTIFY after commit, which
`PostgresJournal.wait_for_events` listens for (live tailing without polling).

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
from .records import StoredEvent
from .store import DEFAULT_MAX_EVENT_BYTES, Clock, Durability

__all__ = ["PostgresJournal", "describe_url"]

_PASSWORD = re.compile(r"(://[^:@/]*):[^@/]*@")
_EVENTS = "events(pos, session_id, seq, ts, type, v, body, hash, summary)"


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
    """A psycopg connection behind the ``?``-placeholder interface of `SqlTx`."""

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
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key, max_event_bytes=max_event_bytes)
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
                if write:
                    with conn.transaction():
                        yield _PgTx(conn)
                else:
                    yield _PgTx(conn)
        except PoolTimeout as e:
            raise JournalBusyError(f"{self._target}: no free connection for {action}") from e
        except psycopg.Error as e:
            raise self._translate(e, action) from e

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

    def _lock_session(self, tx: SqlTx, session_id: str) -> None:
        tx.run(
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
            (f"agent-journal {self._schema} {session_id}",),
        )

    def _insert_events(self, tx: SqlTx, rows: Sequence[StoredEvent]) -> None:
        # The NOTIFY (sent at commit) rides on the position update: one round trip less,
        # and the counter's row lock is held for one statement less. So does the flag that
        # lets these plain INSERTs past the per-row overwrite check (schema.APPEND_FLAG).
        found = tx.one(
            "UPDATE global_position SET pos = pos + ? "
            "RETURNING pos, pg_notify(?, pos::text), set_config(?, 'on', true)",
            (len(rows), self._channel, schema.APPEND_FLAG),
        )
        assert found is not None, "global_position has no row"
        first = int(found[0]) - len(rows) + 1
        params = [(first + index, *event_params(row)) for index, row in enumerate(rows)]
        if len(params) == 1:
            tx.run(f"INSERT INTO {_EVENTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", params[0])
        else:  # COPY fires the same triggers and checks the same keys, at half the cost per row
            assert isinstance(tx, _PgTx)
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

    def head_position(self) -> int:
        """The newest committed global position; see `Journal.head_position`."""
        return int(self._query("SELECT pos FROM global_position")[0][0])

    def wait_for_events(self, position: int, timeout: float) -> bool:
        """Wait for an event after ``position`` with LISTEN/NOTIFY; see `Journal`."""
        deadline = time.monotonic() + timeout
        with self._listen_lock:
            try:
                listener = self._listener()
                if self.head_position() > position:
                    return True
                while (remaining := deadline - time.monotonic()) > 0:
                    for note in listener.notifies(timeout=remaining, stop_after=1):
                        if note.payload.isdigit() and int(note.payload) > position:
                            return True
                return self.head_position() > position
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
