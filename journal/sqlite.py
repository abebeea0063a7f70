"""The SQLite journal: one file (or ``:memory:``), WAL, append-only enforced by triggers.

Durability: every `append` is one ``BEGIN IMMEDIATE`` transaction and one commit. With
``durability="normal"`` (``PRAGMA synchronous=NORMAL`` in WAL mode) a committed append
survives a crash of the process, but the last commits before a power loss or an OS crash
may be rolled back (never half-applied: the file stays consistent). ``"full"`` fsyncs the
WAL on every commit, so a committed append also survives a power loss, at a cost in speed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import sqlite_utils

from . import _sqlite_schema as schema
from .errors import (
    ConflictError,
    JournalBusyError,
    JournalError,
    JournalMissingError,
    NotAJournalError,
    SchemaVersionError,
    SessionNotFoundError,
    StoreError,
)
from .events import AgentEvent
from .fold import FOLD_VERSION, SessionState, fold
from .records import StoredEvent
from .sessions import (
    PROJECTION_COLUMNS,
    AppendPlan,
    SessionHead,
    SessionSummary,
    plan_append,
    plan_import,
    projection_row,
)
from .store import Clock, Durability, Journal
from .verify import Problem, VerifyReport, check_session

__all__ = ["SQLiteJournal"]

_STATE_CACHE_SIZE = 256
_ROW_COLUMNS = "session_id, seq, ts, type, v, body, hash, summary, pos"


def _row_to_stored(row: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(*row)


class SQLiteJournal(Journal):
    """A journal in one SQLite file. Use `Journal.open` rather than this class directly."""

    def __init__(
        self,
        path: str,
        *,
        create: bool = True,
        durability: Durability = "normal",
        clock: Clock | None = None,
        hmac_key: bytes | None = None,
        busy_timeout_ms: int = 5000,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key)
        self._path = path
        self._lock = threading.RLock()
        self._states: dict[str, SessionState] = {}
        memory = path == ":memory:"
        if not memory and not create and not Path(path).exists():
            raise JournalMissingError(f"{path}: no journal here (the file does not exist)")
        if not memory and Path(path).is_dir():
            raise NotAJournalError(f"{path}: is a directory, not a journal file")
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
        except sqlite3.Error as e:
            raise StoreError(f"{path}: cannot open: {e}") from e
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute(
                f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}"
            )
            self._prepare(create=create, hmac=hmac_key is not None)
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise self._translate(e, "open") from e
        except JournalError:
            self._conn.close()
            raise

    # -- setup -----------------------------------------------------------------------

    def _prepare(self, *, create: bool, hmac: bool) -> None:
        db = sqlite_utils.Database(self._conn)
        tables = set(db.table_names())
        if "meta" not in tables:
            if tables - {"sqlite_sequence"}:
                raise NotAJournalError(
                    f"{self._path}: is a SQLite database but not an agent-journal journal "
                    f"(tables: {', '.join(sorted(tables)[:5])})"
                )
            if not create:
                raise NotAJournalError(f"{self._path}: is an empty database, not a journal")
            self._create_schema(hmac=hmac)
            return
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != schema.FORMAT:
            raise NotAJournalError(
                f"{self._path}: has a meta table but is not an agent-journal journal"
            )
        version = int(meta.get("schema_version", "0"))
        if version > schema.SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self._path}: schema version {version} is newer than this code "
                f"({schema.SCHEMA_VERSION}); upgrade agent-journal"
            )
        chain = meta.get("chain", "sha256")
        if chain != ("hmac-sha256" if hmac else "sha256"):
            need = "an HMAC key" if chain == "hmac-sha256" else "no HMAC key"
            raise StoreError(f"{self._path}: this journal's chain is {chain}; open it with {need}")

    def _create_schema(self, *, hmac: bool) -> None:
        if self._path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
        with self._transaction():
            for statement in schema.statements():
                self._conn.execute(statement)
            self._conn.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [
                    ("format", schema.FORMAT),
                    ("schema_version", str(schema.SCHEMA_VERSION)),
                    ("chain", "hmac-sha256" if hmac else "sha256"),
                ],
            )

    # -- plumbing --------------------------------------------------------------------

    def _translate(self, error: sqlite3.Error, action: str) -> StoreError:
        text = str(error)
        if "locked" in text or "busy" in text:
            return JournalBusyError(
                f"{self._path}: database is locked by another writer ({action})"
            )
        if "not a database" in text or "malformed" in text:
            return NotAJournalError(f"{self._path}: not a SQLite journal ({text})")
        if "full" in text:
            return StoreError(f"{self._path}: disk or database is full; {action} was not written")
        if "readonly" in text:
            return StoreError(f"{self._path}: the journal is read-only; {action} was not written")
        return StoreError(f"{self._path}: {action} failed: {text}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise self._translate(e, "begin") from e
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as e:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.IntegrityError) and "append-only" in str(e):
                    raise ConflictError(f"{self._path}: {e}") from e
                if isinstance(e, sqlite3.Error):
                    raise self._translate(e, "write") from e
                raise

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                raise self._translate(e, "read") from e

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    @property
    def target(self) -> str:
        """The file path, or ``:memory:``."""
        return self._path

    # -- writing ---------------------------------------------------------------------

    def _head(self, session_id: str) -> SessionHead | None:
        row = self._conn.execute(
            "SELECT last_seq, head_hash, fold_version, state FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        last_seq, head_hash, fold_version, state_json = row
        cached = self._states.get(session_id)
        if cached is not None and cached.last_seq == last_seq and fold_version == FOLD_VERSION:
            return SessionHead(last_seq, head_hash, cached)
        if fold_version == FOLD_VERSION:
            state = SessionState.model_validate(orjson.loads(state_json))
        else:
            state = fold(self.events(session_id))
        return SessionHead(last_seq, head_hash, state)

    def _write(self, session_id: str, plan: AppendPlan) -> None:
        self._conn.executemany(
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (r.session_id, r.seq, r.ts, r.type, r.v, r.body, r.hash, r.summary)
                for r in plan.rows
            ],
        )
        row = projection_row(plan.state, plan.head_hash)
        row["session_id"] = session_id
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        updates = ", ".join(f"{name} = excluded.{name}" for name in row if name != "session_id")
        self._conn.execute(
            f"INSERT INTO sessions({names}) VALUES ({marks}) "
            f"ON CONFLICT(session_id) DO UPDATE SET {updates}",
            list(row.values()),
        )
        if len(self._states) >= _STATE_CACHE_SIZE:
            self._states.pop(next(iter(self._states)))
        self._states[session_id] = plan.state

    def append(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: datetime | str | None = None,
    ) -> int:
        """Append events in one transaction; see `Journal.append`."""
        if not events:
            raise ValueError("append needs at least one event")
        stamp = ts if ts is not None else self._clock()
        with self._transaction():
            plan = plan_append(
                session_id,
                self._head(session_id),
                events,
                expected_seq=expected_seq,
                ts=stamp,
                hasher=self.hasher,
            )
            self._write(session_id, plan)
        return plan.rows[-1].seq

    def import_records(self, session_id: str, records: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Import one session's records, all or nothing; see `Journal.import_records`."""
        with self._transaction():
            plan = plan_import(
                session_id,
                self._head(session_id),
                records,
                hasher=self.hasher,
                stored_hash_at=lambda seq: self._hash_at(session_id, seq),
            )
            if plan is None:
                return 0
            self._write(session_id, plan)
            return len(plan.rows)

    def _hash_at(self, session_id: str, seq: int) -> str | None:
        row = self._conn.execute(
            "SELECT hash FROM events WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()
        return None if row is None else str(row[0])

    # -- reading ---------------------------------------------------------------------

    def stored_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[StoredEvent]:
        """Stream stored rows in pages of `PAGE_SIZE`; see `Journal.stored_events`."""
        upper = stop if stop is not None else 2**63 - 1
        cursor = start
        while True:
            rows = self._query(
                f"SELECT {_ROW_COLUMNS} FROM events WHERE session_id = ? AND seq >= ? AND seq < ? "
                "ORDER BY seq LIMIT ?",
                (session_id, cursor, upper, self.PAGE_SIZE),
            )
            for row in rows:
                yield _row_to_stored(row)
            if len(rows) < self.PAGE_SIZE:
                return
            cursor = rows[-1][1] + 1

    def read_after(self, position: int, *, limit: int = 500) -> list[StoredEvent]:
        """Rows appended after a global position; see `Journal.read_after`."""
        return [
            _row_to_stored(row)
            for row in self._query(
                f"SELECT {_ROW_COLUMNS} FROM events WHERE pos > ? ORDER BY pos LIMIT ?",
                (position, limit),
            )
        ]

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
    ) -> list[SessionSummary]:
        """List summaries, newest first; see `Journal.sessions`."""
        clauses, params = [], []
        for clause, value in (
            ("status = ?", status),
            ("agent = ?", agent),
            ("started >= ?", since),
            ("started < ?", until),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        sql = f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM sessions"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY started DESC, session_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [
            SessionSummary.model_validate(dict(zip(PROJECTION_COLUMNS, row, strict=True)))
            for row in self._query(sql, params)
        ]

    def summary(self, session_id: str) -> SessionSummary | None:
        """One session's summary; see `Journal.summary`."""
        rows = self._query(
            f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        return SessionSummary.model_validate(dict(zip(PROJECTION_COLUMNS, rows[0], strict=True)))

    def state(self, session_id: str) -> SessionState:
        """The state after the last event; see `Journal.state`."""
        with self._lock:
            head = self._head(session_id)
        if head is None:
            raise SessionNotFoundError(f"session {session_id}: not in {self._path}")
        return head.state

    # -- verification ----------------------------------------------------------------

    def _trigger_problems(self) -> list[Problem]:
        found = dict(self._query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        problems = []
        for name, sql in schema.TRIGGERS.items():
            if name not in found:
                message = (
                    f"trigger {name} is missing: {schema.TRIGGER_PURPOSE[name]} is not enforced"
                )
            elif " ".join(found[name].split()) != " ".join(sql.split()):
                message = (
                    f"trigger {name} was replaced: {schema.TRIGGER_PURPOSE[name]} may not hold"
                )
            else:
                continue
            problems.append(
                Problem(session_id=None, seq=None, kind="missing_trigger", message=message)
            )
        return problems

    def verify(self, session_ids: Sequence[str] | None = None) -> VerifyReport:
        """Check chains, projection, decoding and triggers; see `Journal.verify`."""
        problems = self._trigger_problems()
        projected = {
            sid: (last_seq, head)
            for sid, last_seq, head in self._query(
                "SELECT session_id, last_seq, head_hash FROM sessions"
            )
        }
        if session_ids is None:
            with_events = {sid for (sid,) in self._query("SELECT DISTINCT session_id FROM events")}
            targets = sorted(with_events | set(projected))
        else:
            targets = list(session_ids)
        total = 0
        for session_id in targets:
            last_seq, head = projected.get(session_id, (None, None))
            found, count = check_session(
                session_id,
                self.stored_events(session_id),
                projected_last_seq=last_seq,
                projected_head=head,
                hasher=self.hasher,
            )
            if session_id not in projected and count == 0:
                raise SessionNotFoundError(f"session {session_id}: not in {self._path}")
            problems.extend(found)
            total += count
        return VerifyReport(ok=not problems, problems=problems, sessions=len(targets), events=total)
