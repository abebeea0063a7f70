"""PostgreSQL: our statements wait a bounded time for a lock another client holds.

A client holding ``LOCK TABLE events`` (or any lock our statements need) in an open
transaction made every command wait for as long as it held it. Our connections now set
``lock_timeout`` (`journal.postgres.DEFAULT_LOCK_TIMEOUT`, or the URL's own), and the
timeout is one line naming the database, the schema and the table, exit 2. Errors that
come from the server, and those about what the schema holds, name the schema as well.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from journal import (
    Journal,
    JournalBusyError,
    JournalMissingError,
    NotAJournalError,
    SessionStarted,
    StoreError,
    UserInput,
)
from journal.postgres import DEFAULT_LOCK_TIMEOUT, PostgresJournal, describe_url

from .helpers import run_process
from .stores import PgSchema

IMPATIENT = "%20-clock_timeout%3D700"
"""URL options that shorten the lock wait to 0.7 s (a URL's lock_timeout wins)."""


@contextmanager
def events_locked(url: str) -> Iterator[int]:
    """Another client's open transaction holding ``LOCK TABLE events``; yields its pid."""
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        try:
            yield holder.info.backend_pid
        finally:
            holder.rollback()


@pytest.fixture
def journal_url(pg_schema: PgSchema) -> str:
    with Journal.open(pg_schema.url) as journal:
        journal.append("s1", [SessionStarted(agent="a:b"), UserInput(text="hi")])
    return pg_schema.url


def _busy_line(stderr: str, schema: PgSchema, pid: int) -> str:
    assert "Traceback" not in stderr
    (line,) = stderr.splitlines()
    assert line.startswith(f"agent-journal: {describe_url(schema.url)}: read gave up after ")
    assert f"table {schema.name}.events, locked by another client (pid {pid}, " in line
    return line


@pytest.mark.parametrize("command", [["sessions"], ["verify"], ["replay", "s1"]])
def test_a_command_gives_up_on_a_locked_table_in_one_line(
    journal_url: str, pg_schema: PgSchema, command: list[str]
) -> None:
    with events_locked(journal_url) as pid:
        started = time.monotonic()
        done = run_process(*command, "--db", journal_url + IMPATIENT)
        took = time.monotonic() - started
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "waiting the URL's lock_timeout" in _busy_line(done.stderr, pg_schema, pid)
    assert took < 30


def test_the_default_wait_is_bounded(journal_url: str, pg_schema: PgSchema) -> None:
    """Without a lock_timeout of its own, a command waits `DEFAULT_LOCK_TIMEOUT`, not forever."""
    with events_locked(journal_url) as pid:
        started = time.monotonic()
        done = run_process("sessions", "--db", journal_url)
        took = time.monotonic() - started
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = _busy_line(done.stderr, pg_schema, pid)
    assert f"waiting {DEFAULT_LOCK_TIMEOUT:g} s for table" in line
    assert DEFAULT_LOCK_TIMEOUT <= took < DEFAULT_LOCK_TIMEOUT + 30


def test_the_wait_is_an_option_of_the_journal(journal_url: str, pg_schema: PgSchema) -> None:
    with PostgresJournal(journal_url, lock_timeout=0.5) as journal, events_locked(journal_url):
        with pytest.raises(JournalBusyError, match=rf"table {pg_schema.name}\.events"):
            list(journal.events("s1"))
        assert journal.sessions() != []  # the sessions table is not locked


def test_a_writer_waits_out_a_short_lock(journal_url: str) -> None:
    """A lock released within the wait delays an append; it does not fail it."""
    with PostgresJournal(journal_url, lock_timeout=10) as journal:
        with psycopg.connect(journal_url) as holder:
            holder.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
            release = threading.Timer(0.5, holder.rollback)
            release.start()
            try:
                assert journal.append("s1", [UserInput(text="after")]) == 2
            finally:
                release.join()


def test_a_server_error_names_the_schema(journal_url: str, pg_schema: PgSchema) -> None:
    with Journal.open(journal_url) as journal:
        with psycopg.connect(journal_url, autocommit=True) as foreign:
            foreign.execute("DROP TABLE erasures CASCADE")
        with pytest.raises(StoreError) as raised:
            journal.erasures()
    message = str(raised.value)
    assert message.startswith(f"{describe_url(journal_url)} (schema {pg_schema.name}): ")
    assert '"erasures" does not exist' in message


def test_a_schema_that_is_not_a_journal_is_named(pg_schema: PgSchema) -> None:
    with psycopg.connect(pg_schema.url, autocommit=True) as foreign:
        foreign.execute("CREATE TABLE events (id int)")
    with pytest.raises(NotAJournalError) as raised:
        Journal.open(pg_schema.url)
    assert str(raised.value) == (
        f"{describe_url(pg_schema.url)} (schema {pg_schema.name}): is a PostgreSQL schema but "
        "not an agent-journal journal (tables: events)"
    )


def test_a_missing_journal_names_the_schema(pg_schema: PgSchema) -> None:
    with pytest.raises(JournalMissingError) as raised:
        Journal.open(pg_schema.url, create=False)
    assert str(raised.value).startswith(
        f"{describe_url(pg_schema.url)} (schema {pg_schema.name}): no agent-journal schema here"
    )
