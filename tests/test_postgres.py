"""What only the PostgreSQL journal has to prove: many writers, positions, NOTIFY, setup.

Runs against the server of ``AGENT_JOURNAL_TEST_PG`` (default 127.0.0.1:5432/test), each
test in a fresh schema; an unreachable server fails these tests, it never skips them.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from journal import (
    ConflictError,
    Journal,
    JournalMissingError,
    NotAJournalError,
    SchemaVersionError,
    SessionStarted,
    StoreError,
    UserInput,
)

from .helpers import run_cli, short_session, worker
from .stores import PgSchema, with_search_path

WRITERS = 6
APPENDS = 25


def _events(journal: Journal, session_id: str) -> list[str]:
    return [e.event.text for e in journal.events(session_id, start=1)]


def test_writer_processes_on_one_session_and_many_lose_nothing(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as journal:  # create the schema before the race
        pass
    jobs = [("shared", f"w{n}") for n in range(3)] + [(f"own{n}", "solo") for n in range(4)]
    processes = [worker("append", pg_schema.url, session, name, 30) for session, name in jobs]
    assert [p.wait(timeout=120) for p in processes] == [0] * len(jobs)
    with Journal.open(pg_schema.url) as journal:
        texts = _events(journal, "shared")
        assert len(texts) == 90 and journal.last_seq("shared") == 90
        for name in ("w0", "w1", "w2"):
            assert [t for t in texts if t.startswith(f"{name}-")] == [
                f"{name}-{n}" for n in range(30)
            ]
        for n in range(4):
            assert _events(journal, f"own{n}") == [f"solo-{k}" for k in range(30)]
        positions = [row.position for row in journal.read_after(0, limit=10_000)]
        assert positions == list(range(1, 1 + 91 + 4 * 31))
        report = journal.verify()
        assert report.ok and report.events == 91 + 4 * 31


def test_optimistic_writers_conflict_and_retry_without_loss(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as journal:
        journal.append("s", [SessionStarted(agent="x:y")])
    conflicts = []

    def write(name: str) -> None:
        with Journal.open(pg_schema.url) as mine:
            for n in range(15):
                while True:
                    last = mine.last_seq("s")
                    assert last is not None
                    try:
                        mine.append("s", [UserInput(text=f"{name}-{n}")], expected_seq=last + 1)
                        break
                    except ConflictError:
                        conflicts.append(name)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, ["a", "b", "c", "d"]))
    with Journal.open(pg_schema.url) as journal:
        texts = _events(journal, "s")
        assert sorted(texts) == sorted(f"{w}-{n}" for w in "abcd" for n in range(15))
        assert [e.seq for e in journal.events("s")] == list(range(61))
        assert journal.verify().ok


def test_a_reader_following_positions_never_skips_an_event(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as journal:
        journal.append("warmup", [SessionStarted(agent="x:y")])
    done = threading.Event()
    seen: list[int] = []
    per_session: dict[str, list[int]] = defaultdict(list)

    def read() -> None:
        with Journal.open(pg_schema.url) as reader:
            position = 0
            while True:
                finished = done.is_set()
                rows = reader.read_after(position, limit=50)
                for row in rows:
                    assert row.position is not None
                    seen.append(row.position)
                    per_session[row.session_id].append(row.seq)
                    position = row.position
                if finished and not rows:
                    return

    def write(n: int) -> None:
        with Journal.open(pg_schema.url) as mine:
            mine.append(f"s{n}", [SessionStarted(agent="x:y")])
            for k in range(APPENDS):
                mine.append(f"s{n}", [UserInput(text=str(k))] * (1 + k % 3))

    reader = threading.Thread(target=read)
    reader.start()
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(write, range(WRITERS)))
    done.set()
    reader.join(timeout=60)
    per_writer = 1 + sum(1 + k % 3 for k in range(APPENDS))
    assert seen == list(range(1, 2 + WRITERS * per_writer)), "a position was skipped or repeated"
    for n in range(WRITERS):
        assert per_session[f"s{n}"] == list(range(per_writer))


def test_a_position_is_not_visible_before_an_earlier_one_commits(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as journal:
        journal.append("a", [SessionStarted(agent="x:y")])
        with psycopg.connect(pg_schema.url) as slow:  # an append still in flight
            slow.execute("UPDATE global_position SET pos = pos + 1")
            finished = threading.Event()
            thread = threading.Thread(
                target=lambda: (journal.append("b", [SessionStarted()]), finished.set())
            )
            thread.start()
            time.sleep(0.5)
            assert not finished.is_set(), "a later append committed while an earlier one was open"
            assert journal.head_position() == 1
            slow.rollback()
        thread.join(timeout=10)
        assert finished.is_set()
        assert [r.position for r in journal.read_after(0)] == [1, 2]


def test_wait_for_events_wakes_on_another_writers_notify(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as follower, Journal.open(pg_schema.url) as writer:
        writer.append("a", [SessionStarted()])
        head = follower.head_position()
        timer = threading.Timer(0.3, lambda: writer.append("a", [UserInput(text="x")]))
        timer.start()
        began = time.monotonic()
        assert follower.wait_for_events(head, timeout=20)
        assert time.monotonic() - began < 3
        timer.join()
        assert [r.seq for r in follower.read_after(head)] == [1]


def test_one_journal_shared_by_threads(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as journal:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: journal.append(f"s{n}", short_session()), range(16)))
        assert len(journal.sessions()) == 16 and journal.verify().ok


def test_guards_hold_for_a_connection_with_another_search_path(pg_schema: PgSchema) -> None:
    with Journal.open(pg_schema.url) as journal:
        journal.append("s1", short_session())
    events = f"{pg_schema.name}.events"
    with psycopg.connect(pg_schema.server, autocommit=True) as conn:
        for attack in (
            f"INSERT INTO {events} SELECT pos + 100, session_id, seq, ts, type, v, body, hash, "
            f"summary FROM {events} WHERE seq = 1 ON CONFLICT (session_id, seq) DO NOTHING",
            f"DELETE FROM {events}",
            f"UPDATE {events} SET hash = 'x'",
        ):
            with pytest.raises(psycopg.Error, match="agent-journal: events are append-only"):
                conn.execute(attack)


def test_the_flag_our_appends_set_lasts_only_their_transaction(pg_schema: PgSchema) -> None:
    """Our plain INSERTs skip the per-row overwrite check; the keys still refuse a taken seq,
    and no statement after our transaction skips it."""
    flag = "SELECT coalesce(current_setting('agent_journal.append', true), '')"
    taken = (
        "INSERT INTO events SELECT pos + 100, session_id, seq, ts, type, v, body, hash, summary "
        "FROM events WHERE seq = 1"
    )
    with Journal.open(pg_schema.url) as journal:
        journal.append("s1", short_session())
        journal.append("s1", [UserInput(text="again")])
        with journal._pool.connection() as pooled:
            assert pooled.execute(flag).fetchone() == ("",)
    with psycopg.connect(pg_schema.url) as conn:
        assert conn.execute(flag).fetchone() == ("",)
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute(taken + " ON CONFLICT DO NOTHING")
        conn.rollback()
        conn.execute("SELECT set_config('agent_journal.append', 'on', true)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(taken)
        conn.rollback()
        assert conn.execute(flag).fetchone() == ("",)


def test_verify_finds_disabled_triggers_and_replaced_functions(pg_schema: PgSchema) -> None:
    with (
        Journal.open(pg_schema.url) as journal,
        psycopg.connect(pg_schema.url, autocommit=True) as conn,
    ):
        journal.append("s1", short_session())
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_no_overwrite")
        conn.execute(
            "CREATE OR REPLACE FUNCTION agent_journal_no_delete() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$"
        )
        messages = [p.message.split(":")[0] for p in journal.verify().problems]
        assert messages == [
            "trigger events_no_delete was replaced",
            "trigger events_no_overwrite is disabled",
        ]


def test_schema_setup_is_explicit_and_checked(pg_schema: PgSchema) -> None:
    with pytest.raises(JournalMissingError, match="agent-journal init"):
        Journal.open(pg_schema.url, create=False)

    def open_it() -> str:
        with Journal.open(pg_schema.url) as journal:
            return journal.schema_setup.action

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(lambda _: open_it(), range(4))) == ["created"] + ["current"] * 3
    with psycopg.connect(pg_schema.url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="newer than this code"):
        Journal.open(pg_schema.url)


def test_a_schema_with_foreign_tables_is_not_a_journal(pg_schema: PgSchema) -> None:
    with psycopg.connect(pg_schema.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id int)")
    with pytest.raises(NotAJournalError, match="not an agent-journal journal"):
        Journal.open(pg_schema.url)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    url = "postgresql://alice:s3cret@127.0.0.1:1/journal"
    with pytest.raises(StoreError) as caught:
        Journal.open(url)
    message = str(caught.value)
    assert message.startswith("postgresql://alice@127.0.0.1:1/journal: cannot connect")
    assert "s3cret" not in message and "\n" not in message
    result = run_cli("sessions", "--db", url)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "s3cret" not in result.stderr
    bad_schema = with_search_path("postgresql://127.0.0.1:5432/test", "no_such_schema_here")
    with pytest.raises(StoreError, match="no schema to use"):
        Journal.open(bad_schema)


@pytest.mark.parametrize("size", [1, 3])
def test_an_append_over_a_taken_seq_is_a_conflict_that_quotes_no_event_data(
    pg_schema: PgSchema, size: int
) -> None:
    with Journal.open(pg_schema.url) as journal:
        journal.append("s", [SessionStarted(agent="x:y")])
        with psycopg.connect(pg_schema.url, autocommit=True) as conn:  # a foreign row at seq 1
            conn.execute(
                "INSERT INTO events SELECT 99, session_id, 1, ts, type, v, body, hash, summary "
                "FROM events WHERE seq = 0"
            )
        batch = [UserInput(text=f"secret-{n}") for n in range(size)]
        with pytest.raises(ConflictError, match="append-only") as caught:
            journal.append("s", batch)
        assert "secret" not in str(caught.value) and "\n" not in str(caught.value)
        assert journal.last_seq("s") == 0 and journal.head_position() == 1
