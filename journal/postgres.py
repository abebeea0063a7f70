"""The PostgreSQL journal: the same contract as SQLite on a server many writers share.

Open it with ``Journal.open("postgresql://user@host:5432/db")``. The tables live in the
first schema of the connection's ``search_path`` (``?options=-csearch_path%3Djournal`` picks
one); use a dedicated database or schema. Connections come from a pool (psycopg_pool).

Guarantees, as on SQLite: append-only enforced by triggers against any connection;
optimistic concurrency through the primary key (a plain INSERT, never ``ON CONFLICT DO
NOTHING``); the sessions projection written in the append's transaction. Writers of one
session are serialised by a transaction-level advisory lock on the session id; writers of
different sessions are not serialised at all: nothing is held from a write to the commit
(`journal._pg_appends`).

Global positions come from a sequence and followers read them up to a safe horizon:
`journal._pg_positions` has how and why (docs/postgres.md, the whole argument). Each
append's NOTIFY follows its commit, from a thread; `PostgresJournal.wait_for_events`
listens (live tailing without polling, `journal._pg_tailing`).

Here: the connections (a pool, the settings, errors translated to ours), the schema's
setup, and what verify and erase need of the server; the roles themselves are the SQL
stores' (`journal._sql_journal`).

Durability: a commit is durable when the server says so (``synchronous_commit=on``, the
server default); ``durability="full"`` sets it on for our connections even where the server
default is weaker.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from . import _postgres_schema as schema
from ._pg_appends import PgAppends
from ._pg_positions import NOTIFY_INTERVAL, UNPLANNED, Notifier
from ._pg_tailing import Listener, PgTailing
from ._pg_tx import PgTx
from ._search_pg import PostgresSearchIndex
from ._sql_append import NO_POSITION
from ._sql_journal import SQLJournal
from ._sqltx import SqlTx, TriggerState, guard_refusal
from .clock import Now
from .errors import (
    ConflictError,
    JournalBusyError,
    JournalError,
    JournalMissingError,
    PositionError,
    StoreError,
    UnplannedWriteError,
)
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


_POS_KEY = "events_pos_key"
"""The unique constraint on ``events.pos`` (PostgreSQL's name for ``pos ... UNIQUE``)."""


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


class PostgresJournal(PgAppends, PgTailing, SQLJournal):
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
        self._listener = Listener(self._listening_connection)
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
            yield PgTx(conn)

    def _translate(self, error: psycopg.Error, action: str) -> JournalError:
        """One line for a server error: where (the target and its schema), what, why."""
        text = _server_message(error)
        where = self._where
        if isinstance(error, errors.UniqueViolation) and error.diag.constraint_name == _POS_KEY:
            return PositionError(
                f"{where}: a position the sequence {schema.POSITIONS} gave is taken already "
                f"(it was set back): {NO_POSITION}"
            )
        if isinstance(error, errors.UniqueViolation):
            return ConflictError(f"{where}: events are append-only (a taken key): {text}")
        if UNPLANNED in text:
            written = text.split(UNPLANNED, 1)[1].strip(" '\"")
            return UnplannedWriteError(
                f"{where}: {written}; a trigger or rule "
                "that is not agent-journal's changed the write (verify names it); nothing was "
                "written"
            )
        refused = guard_refusal(where, text)
        if refused is not None:
            return refused
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
        tx = PgTx(conn)
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

    def _listening_connection(self) -> psycopg.Connection[Any]:
        """A connection of its own that listens for this journal's NOTIFYs (`Listener`)."""
        conn = psycopg.connect(self._url, autocommit=True, **self._kwargs)
        self._apply_settings(conn)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        return conn

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

    def close(self) -> None:
        """Send the last NOTIFY, close the pool and the listening connection (idempotent)."""
        self._notifier.close()
        self._pool.close()
        self._listener.close()

    @property
    def target(self) -> str:
        """The URL without its password: ``postgresql://user@host:port/db``."""
        return self._target

    @property
    def schema_name(self) -> str:
        """The schema the journal's tables are in."""
        return self._schema

    # -- verification and erasure ----------------------------------------------------

    def _lock_erasures(self, tx: SqlTx) -> None:
        tx.run(
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
            (f"agent-journal erasures {self._schema}",),
        )

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

    def _position_findings(self, tx: SqlTx, *, rows_missing: bool) -> list[str]:
        """The positions against the sequence and the transaction ids.

        Positions come from the sequence, under a lock with the transaction id (see
        `journal._pg_positions`): none is past the last value it handed out (read after the
        rows: it only grows), and in position order the rows' transaction ids never go back.
        Cost: a scan of the events in position order (the ``pos`` index).
        """
        found = tx.one("SELECT min(pos), max(pos) FROM events")
        assert found is not None
        low, high = found
        last = tx.one(f"SELECT last_value, is_called FROM {schema.POSITIONS}")
        assert last is not None
        given = int(last[0]) if last[1] else int(last[0]) - 1
        findings = []
        if low is not None and low < 1:
            findings.append(f"position {low} is below 1, where positions start")
        if high is not None and high > given:
            findings.append(
                f"position {high} is past the last one the sequence {schema.POSITIONS} handed "
                f"out ({given}): positions were moved, or the sequence set back, outside "
                "agent-journal"
            )
        back = tx.one(schema.POSITIONS_OUT_OF_ORDER)
        if back is not None:
            findings.append(
                f"position {back[0]} was written by an older transaction than position "
                f"{back[1]} below it, or given twice: positions were moved outside agent-journal"
            )
        return findings

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
