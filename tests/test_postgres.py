"""What only the PostgreSQL journal has to prove: many writers, positions, NOTIFY, setup.

Runs against the run's server (tests/pg_server.py: by default the machine's), each test
in a fresh schema; an unreachable server fails these tests, it never skips them.

Positions: appends take them from a sequence and commit in any order; a follower
(``read_after``, ``follow``, ``head_position``) must never see a later position before an
earlier one that is still in flight, must pass a gap whose append rolled back or died, and
must not be held up by transactions of other programs (tests/pg_held.py holds an append
in flight).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from journal._pg_positions import ONE_STATEMENT_EVENTS
from journal._postgres_schema import SCHEMA_VERSION, SESSIONS_FILLFACTOR
from journal.canonical import loads_strict
from journal.postgres import PostgresJournal

from .helpers import TS0, run_cli, sample_session, short_session, worker
from .pg_held import Held
from .stores import (
    PgSchema,
    downgrade_pg_to_v3,
    eventually,
    fresh_schema,
    require_server,
    with_search_path,
)

WRITERS = 6
APPENDS = 25


def _events(journal: Journal, session_id: str) -> list[str]:
    return [e.event.text for e in journal.events(session_id, start=1)]


def _stored_positions(url: str) -> list[int]:
    """Every position in the events table, read directly, in order."""
    with psycopg.connect(url) as conn:
        return [int(pos) for (pos,) in conn.execute("SELECT pos FROM events ORDER BY pos")]


def _positions(journal: Journal, after: int = 0) -> list[int]:
    return [row.position or 0 for row in journal.read_after(after, limit=10_000)]


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
        positions = _positions(journal)
        assert positions == _stored_positions(pg_schema.url)  # taken from a sequence: gaps
        assert len(positions) == 91 + 4 * 31  # where a worker lost the race to start "shared"
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
    assert seen == _stored_positions(pg_schema.url), "a position was skipped or repeated"
    assert len(seen) == 1 + WRITERS * per_writer
    for n in range(WRITERS):
        assert per_session[f"s{n}"] == list(range(per_writer))


PATHS = {
    "one statement": lambda url, writer: nullcontext(writer),  # its head cached: one statement
    "transaction": lambda url, writer: Journal.open(url),  # nothing cached: a transaction
}
"""The two ways an append is written, each given the URL and a journal that wrote before."""


@contextmanager
def _writers_and_follower(url: str) -> Iterator[tuple[Journal, Journal, Journal]]:
    """A writer of session ``a``, another of ``b`` (each started: positions 1 and 2), and a
    follower, each its own journal object."""
    with Journal.open(url) as writer, Journal.open(url) as other, Journal.open(url) as follower:
        writer.append("a", [SessionStarted()])
        other.append("b", [SessionStarted()])
        yield writer, other, follower


@pytest.mark.parametrize("path", PATHS)
def test_an_append_in_flight_holds_followers_back_and_no_other_writer(
    pg_schema: PgSchema, path: str
) -> None:
    url = pg_schema.url
    with _writers_and_follower(url) as (writer, other, follower):
        with PATHS[path](url, writer) as slow, Held(url, slow, "a", [UserInput(text="s")]) as held:
            other.append("b", [UserInput(text="fast")])  # commits: writers do not queue
            assert _stored_positions(url) == [1, 2, 4]  # 3 is the slow append's, in flight
            assert held.positions == [3] and held.thread.is_alive()
            assert _positions(follower) == [1, 2]
            assert follower.head_position() == 2
            assert follower.wait_for_events(2, timeout=0.3) is False
            held.release()
        assert held.outcome == {"seq": 1}
        eventually(lambda: _positions(follower) == [1, 2, 3, 4])
        rows = follower.read_after(0)
        assert [(r.session_id, r.seq) for r in rows] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
        assert follower.wait_for_events(2, timeout=10) is True
        assert follower.head_position() == 4


@pytest.mark.parametrize("path", PATHS)
def test_a_follower_passes_the_gap_of_an_append_killed_in_flight(
    pg_schema: PgSchema, path: str
) -> None:
    url = pg_schema.url
    with _writers_and_follower(url) as (writer, other, follower):
        with PATHS[path](url, writer) as slow, Held(url, slow, "a", [UserInput(text="x")]) as held:
            other.append("b", [UserInput(text="lives")])
            # The follower waits while position 3 is in flight; the kill notifies nobody.
            timer = threading.Timer(0.5, held.kill)
            timer.start()
            assert follower.wait_for_events(2, timeout=30) is True
            timer.join()
        assert isinstance(held.outcome["error"], StoreError)
        assert _positions(follower) == [1, 2, 4]
        assert [r.seq for r in follower.read_after(0) if r.session_id == "a"] == [0]
        writer.append("a", [UserInput(text="again")])
        assert [e.event.text for e in writer.events("a", start=1)] == ["again"]
        assert writer.verify().ok


def test_transactions_of_other_programs_hold_no_follower(pg_schema: PgSchema) -> None:
    with (
        Journal.open(pg_schema.url) as journal,
        psycopg.connect(pg_schema.server) as unrelated,
    ):
        journal.append("a", [SessionStarted()])
        unrelated.execute("CREATE TEMPORARY TABLE scratch (x integer)")
        unrelated.execute("INSERT INTO scratch VALUES (1)")  # a write in flight, all along
        journal.append("b", short_session())
        journal.append("a", [UserInput(text="x")])
        stored = _stored_positions(pg_schema.url)
        assert _positions(journal) == stored
        assert journal.head_position() == stored[-1]
        assert journal.wait_for_events(stored[0], timeout=1) is True


def test_an_erased_beginning_holds_no_follower_behind_older_transactions(
    pg_schema: PgSchema,
) -> None:
    """Retention erases the oldest sessions: a follower from 0 starts at a gap with no row
    below it, bounded by the transaction that created the positions, so a transaction older
    than the journal holds nothing."""
    with psycopg.connect(pg_schema.server) as older:
        older.execute("SELECT pg_current_xact_id()")  # in flight from before the journal
        with Journal.open(pg_schema.url) as journal:
            journal.append("first", short_session())
            journal.append("second", short_session())
            journal.erase("first", reason="retention")
            second = [(r.session_id, r.position) for r in journal.stored_events("second")]
            # While the older transaction stays open: others' may hold the gap a moment.
            eventually(
                lambda: [(r.session_id, r.position) for r in journal.read_after(0)] == second
            )
            eventually(lambda: journal.head_position() == second[-1][1])


def test_a_gap_a_transaction_of_another_program_might_hold_waits_for_it(
    pg_schema: PgSchema,
) -> None:
    """The one case where another program's transaction holds followers: it started between
    the transaction ids on either side of a gap (here the gap of a rolled-back append), so
    nothing tells it from an append that took those positions."""
    with Journal.open(pg_schema.url) as journal, psycopg.connect(pg_schema.server) as other:
        journal.append("a", [SessionStarted()])
        with pytest.raises(ConflictError):
            journal.append("a", [UserInput(text="late")], expected_seq=7)  # took position 2
        other.execute("SELECT pg_current_xact_id()")  # a transaction id after that one
        journal.append("a", [UserInput(text="next")])
        assert _stored_positions(pg_schema.url) == [1, 3]
        assert _positions(journal) == [1] and journal.head_position() == 1
        other.rollback()
        eventually(lambda: _positions(journal) == [1, 3])
        eventually(lambda: journal.head_position() == 3)


@pytest.mark.parametrize("path", PATHS)
def test_the_positions_lock_is_released_when_taking_positions_fails(
    pg_schema: PgSchema, path: str
) -> None:
    url = pg_schema.url
    with Journal.open(url) as writer, psycopg.connect(url, autocommit=True) as conn:
        writer.append("a", [SessionStarted()])
        writer.append("b", [SessionStarted()])
        conn.execute("ALTER SEQUENCE event_positions MAXVALUE 2")  # the next nextval fails
        with PATHS[path](url, writer) as failing:
            with pytest.raises(StoreError, match="reached maximum value"):
                failing.append("a", [UserInput(text="x")])
        conn.execute("ALTER SEQUENCE event_positions NO MAXVALUE")
        impatient = url + "%20-clock_timeout%3D5000"  # a leaked lock: JournalBusyError, no hang
        with Journal.open(impatient) as other:
            other.append("c", [SessionStarted()])
        writer.append("a", [UserInput(text="y")])
        assert writer.last_seq("a") == 1 and writer.verify().ok


def test_positions_are_taken_before_a_transaction_writes(pg_schema: PgSchema) -> None:
    """Positions grow with transaction ids only if the id is assigned with the positions."""
    with Journal.open(pg_schema.url) as journal:
        with journal._transaction() as tx:  # type: ignore[attr-defined]
            tx.run("SELECT pg_current_xact_id()")
            with pytest.raises(AssertionError, match="before a transaction's first write"):
                journal._reserve_positions(tx, 1)  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [1, ONE_STATEMENT_EVENTS, ONE_STATEMENT_EVENTS + 1])
def test_appends_of_any_size_take_contiguous_positions(pg_schema: PgSchema, size: int) -> None:
    with Journal.open(pg_schema.url) as journal:
        journal.append("a", [SessionStarted()])
        journal.append("b", [SessionStarted()])
        for _ in range(2):  # the first on the stored head, the second on the cached one
            journal.append("a", [UserInput(text=str(n)) for n in range(size)])
            journal.append("b", [UserInput(text="between")])
        rows = journal.read_after(0, limit=10_000)
        assert [r.position for r in rows] == list(range(1, 3 + 2 * (size + 1)))
        assert [r.seq for r in rows if r.session_id == "a"] == list(range(1 + 2 * size))
        assert journal.verify().ok


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["append", "hold", "release", "kill", "conflict"]), st.integers(0, 2)
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=12)
@given(OPERATIONS)
def test_followers_read_a_prefix_of_the_committed_positions_and_never_pass_one_in_flight(
    operations: list[tuple[str, int]],
) -> None:
    """Appends commit, stay in flight, roll back or die, in any order, on three sessions;
    after each step a follower from 0 reads committed positions in order, none skipped,
    none at or past a position in flight, and everything before the first gap."""
    with fresh_schema(require_server()) as schema, Journal.open(schema.url) as follower:
        url = schema.url
        writers = [Journal.open(url) for _ in range(3)]
        held: dict[int, Held] = {}
        try:
            for k, writer in enumerate(writers):
                writer.append(f"s{k}", [SessionStarted()])
            for operation, k in operations:
                if operation == "append" and k not in held:
                    writers[k].append(f"s{k}", [UserInput(text="x")])
                elif operation == "hold" and k not in held:
                    held[k] = Held(url, writers[k], f"s{k}", [UserInput(text="held")])
                elif operation in ("release", "kill") and k in held:
                    getattr(held.pop(k), operation)()
                elif operation == "conflict" and k not in held:
                    with pytest.raises(ConflictError):
                        writers[k].append(f"s{k}", [UserInput(text="late")], expected_seq=99)
                committed = _stored_positions(url)
                first_in_flight = min((p for h in held.values() for p in h.positions), default=None)
                read = _positions(follower)
                head = follower.head_position()
                assert read == committed[: len(read)]
                if first_in_flight is not None:
                    assert all(p < first_in_flight for p in (head, *read))
                assert head in (0, *committed)
                no_gap = [p for n, p in enumerate(committed, 1) if p == n]
                assert read[: len(no_gap)] == no_gap and head >= len(no_gap)
        finally:
            for h in held.values():
                h.release()
            for writer in writers:
                writer.close()


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


def test_appends_share_the_notify_sent_after_them_and_closing_sends_the_last(
    pg_schema: PgSchema,
) -> None:
    """With an hour between two NOTIFYs, 21 appends send at most two: the first (of the
    newest position when the thread got to it) and, on close, the newest."""
    with (
        PostgresJournal(pg_schema.url, notify_interval=3600) as writer,
        psycopg.connect(pg_schema.url, autocommit=True) as listener,
    ):
        listener.execute(f"LISTEN {writer._channel}")  # type: ignore[attr-defined]
        writer.append("a", [SessionStarted()])
        for n in range(20):
            writer.append("a", [UserInput(text=str(n))])
        writer.close()
        notes = [int(note.payload) for note in listener.notifies(timeout=2, stop_after=3)]
    assert notes[-1] == 21 and len(notes) <= 2 and notes == sorted(set(notes))


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
    bad_schema = with_search_path(require_server(), "no_such_schema_here")
    with pytest.raises(StoreError, match="no schema to use") as caught:
        Journal.open(bad_schema)
    assert str(caught.value).endswith(
        "no schema to use: none of the search_path's schemas exists (search_path: "
        "no_such_schema_here); create the one it should use first (CREATE SCHEMA name)"
    )


def test_the_demo_prints_its_journal_without_the_password(pg_schema: PgSchema) -> None:
    scheme, rest = pg_schema.url.split("://", 1)
    user, _, host = rest.rpartition("@")  # the server trusts the test user: any password does
    url = f"{scheme}://{user.partition(':')[0]}:s3cret@{host}"
    result = run_cli("demo", "--db", url, "--sessions", "1", "--no-tui")
    assert result.exit_code == 0, result.stderr
    assert f"Journal: {scheme}://{user.partition(':')[0]}@{host}\n" in result.stdout  # options kept
    assert "s3cret" not in result.stdout + result.stderr


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
        assert journal.last_seq("s") == 0
        assert [(r.seq, r.position) for r in journal.stored_events("s")] == [(0, 1), (1, 99)]


def test_a_version_3_schema_is_upgraded_and_followers_keep_their_place(
    pg_schema: PgSchema,
) -> None:
    """A journal as version 3 left it (positions from a counter row) opens upgraded: rows keep
    their positions, followers resume from any of them, new appends come after the last
    position ever taken (an erased tail is not reused), and a transaction of another program
    open across the upgrade holds nothing."""
    url = pg_schema.url
    with Journal.open(url) as journal:
        for n in range(4):
            journal.append(f"s{n}", short_session())
        journal.erase("s1", reason="a gap among the old positions")
        journal.erase("s3", reason="the newest positions gone: the counter is past the rows")
        before = journal.read_after(0, limit=10_000)
    taken = 4 * len(short_session())
    downgrade_pg_to_v3(url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT pos FROM global_position").fetchone() == (taken,)
    with psycopg.connect(pg_schema.server) as unrelated:
        unrelated.execute("CREATE TEMPORARY TABLE scratch (x integer)")
        unrelated.execute("INSERT INTO scratch VALUES (1)")
        with Journal.open(url) as journal:
            assert journal.schema_setup.model_dump() == {
                "action": "upgraded",
                "version": SCHEMA_VERSION,
                "from_version": 3,
            }
            assert journal.read_after(0, limit=10_000) == before
            middle = before[len(before) // 2].position or 0
            assert journal.read_after(middle) == [r for r in before if (r.position or 0) > middle]
            assert journal.head_position() == before[-1].position
            journal.append("new", short_session())
            new = list(journal.stored_events("new"))
            assert [r.position for r in new] == list(range(taken + 1, taken + 1 + len(new)))
            eventually(lambda: journal.read_after(before[-1].position or 0) == new)
            report = journal.verify()
            assert report.ok, report.problems
    with psycopg.connect(url) as conn:
        options = conn.execute("SELECT reloptions FROM pg_class WHERE oid = 'sessions'::regclass")
        assert options.fetchone() == ([f"fillfactor={SESSIONS_FILLFACTOR}"],)


def test_a_session_named_twice_in_one_import_is_planned_on_its_first_part(
    any_journal: Journal, tmp_path: Path
) -> None:
    """`import_sessions` plans every session before it writes (positions are reserved before
    the first write, on PostgreSQL): a session given twice, a prefix then the whole, imports
    the rest the second time, as two imports one after the other would (both stores)."""
    with Journal.open(tmp_path / "source.db") as source:
        source.append("s", sample_session(), ts=TS0)
        source.append("t", short_session(), ts=TS0)
        records = {
            sid: [
                (f"row {row.seq}", {**loads_strict(row.body), "hash": row.hash})
                for row in source.stored_events(sid)
            ]
            for sid in ("s", "t")
        }
        expected = [row.line() for row in source.stored_events("s")]
    whole = records["s"]
    counts = any_journal.import_sessions([("s", whole[:4]), ("t", records["t"]), ("s", whole)])
    assert counts == [4, len(records["t"]), len(whole) - 4]
    assert [row.line() for row in any_journal.stored_events("s")] == expected
    assert any_journal.import_sessions([("s", whole), ("s", whole[:2])]) == [0, 0]
    assert any_journal.verify().ok
