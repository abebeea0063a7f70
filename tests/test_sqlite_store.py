"""The SQLite journal on real files: seqs, conflicts, append-only, verify, streaming, processes."""

from __future__ import annotations

import gc
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import (
    AgentCompleted,
    ConflictError,
    InvalidEventError,
    Journal,
    JournalBusyError,
    JournalMissingError,
    NotAJournalError,
    SchemaVersionError,
    SessionNotFoundError,
    SessionStarted,
    StoreError,
    UserInput,
    chain_hash,
    fold,
)
from journal._file_watch import MAX_WATCHES, FileWatch
from journal._sqlite_schema import TRIGGERS
from journal.events import EventModel
from journal.sqlite import SQLiteJournal, without_nulls

from .drill_helpers import drill_size
from .helpers import (
    TickingClock,
    drop_triggers,
    dump_tables,
    foreign,
    make_journal,
    rechain,
    restore_triggers,
    sample_session,
    short_session,
    worker,
)
from .strategies import sessions

START = SessionStarted(agent="app:build")


def texts_of(journal: Journal, session_id: str) -> list[str]:
    return [e.event.text for e in journal.events(session_id) if isinstance(e.event, UserInput)]


# -- seqs and conflicts ------------------------------------------------------------------


def test_seqs_are_dense_from_zero_and_append_returns_the_last(journal: Journal) -> None:
    assert journal.append("s", [START]) == 0
    assert journal.append("s", [UserInput(text=str(n)) for n in range(3)]) == 3
    assert journal.append("s", [AgentCompleted(answer="a")], expected_seq=4) == 4
    assert [(e.seq, e.type) for e in journal.events("s")] == [
        (0, "session_started"),
        (1, "user_input"),
        (2, "user_input"),
        (3, "user_input"),
        (4, "agent_completed"),
    ]
    assert journal.last_seq("s") == 4
    assert journal.last_seq("nope") is None


@pytest.mark.parametrize(
    ("batches", "error"),
    [
        ([[UserInput(text="x")]], "session s seq 0: a session must begin with session_started"),
        ([[START], [START]], "session s seq 1: session_started is only allowed at seq 0"),
        ([[START, UserInput(text="x"), START]], "session s seq 2: session_started is only"),
    ],
)
def test_session_started_is_seq_zero_and_only_there(
    journal: Journal, db_path: Path, batches: list[list[EventModel]], error: str
) -> None:
    *ok, bad = batches
    for batch in ok:
        journal.append("s", batch)
    before = dump_tables(db_path)
    with pytest.raises(InvalidEventError, match=error):
        journal.append("s", bad)
    assert dump_tables(db_path) == before


@pytest.mark.parametrize("session_id", ["", "has space", "x" * 129, "é", "a/b", "a\nb"])
def test_invalid_session_ids_are_rejected(journal: Journal, session_id: str) -> None:
    with pytest.raises(InvalidEventError, match="must be 1-128 characters"):
        journal.append(session_id, [START])
    assert journal.sessions() == []


def test_the_longest_and_oddest_valid_session_ids_work(journal: Journal) -> None:
    for session_id in ("x" * 128, "A-z_0.9:1"):
        journal.append(session_id, [START])
        assert journal.require(session_id).session_id == session_id


def test_append_of_nothing_is_an_error(journal: Journal) -> None:
    with pytest.raises(ValueError, match="at least one event"):
        journal.append("s", [])


@pytest.mark.parametrize(("expected", "next_seq"), [(1, 0), (0, 2), (1, 2), (3, 2), (-1, 2)])
def test_a_wrong_expected_seq_is_a_conflict_that_writes_nothing(
    journal: Journal, db_path: Path, expected: int, next_seq: int
) -> None:
    if next_seq:
        journal.append("s", [START, UserInput(text="x")])
    before = dump_tables(db_path)
    with pytest.raises(ConflictError) as caught:
        journal.append("s", [UserInput(text="late")], expected_seq=expected)
    assert str(caught.value) == (
        f"session s seq {expected}: expected to append at seq {expected} but the session's "
        f"next seq is {next_seq} (another writer got there first)"
    )
    assert dump_tables(db_path) == before


def test_two_writers_race_for_the_same_seq_and_one_loses(db_path: Path) -> None:
    with Journal.open(db_path) as first, Journal.open(db_path) as second:
        first.append("s", [START])
        seen = second.last_seq("s")
        assert seen == 0
        first.append("s", [UserInput(text="first")], expected_seq=seen + 1)
        with pytest.raises(ConflictError):
            second.append("s", [UserInput(text="second")], expected_seq=seen + 1)
        assert second.append("s", [UserInput(text="second")], expected_seq=2) == 2
        assert texts_of(first, "s") == ["first", "second"]


# -- append-only, against a connection that is not ours ----------------------------------

ROW = "session_id, seq, ts, type, v, body, hash, summary"


@pytest.mark.parametrize(
    "attack",
    [
        "UPDATE events SET body = '{}' WHERE seq = 1",
        "UPDATE events SET seq = seq + 100",
        "UPDATE OR REPLACE events SET seq = 1 WHERE seq = 2",
        "DELETE FROM events WHERE seq = 1",
        "DELETE FROM events",
        f"INSERT OR REPLACE INTO events({ROW}) SELECT session_id, seq, ts, type, v, 'forged', "
        "hash, summary FROM events WHERE seq = 1",
        f"REPLACE INTO events(pos, {ROW}) SELECT pos, session_id, 99, ts, type, v, body, hash, "
        "summary FROM events WHERE seq = 1",
        f"INSERT INTO events({ROW}) SELECT {ROW} FROM events WHERE seq = 1",
        f"INSERT OR IGNORE INTO events({ROW}) SELECT session_id, seq, ts, type, v, 'forged', "
        "hash, summary FROM events WHERE seq = 1",
    ],
)
def test_a_foreign_connection_cannot_change_or_remove_events(db_path: Path, attack: str) -> None:
    make_journal(db_path, {"s": sample_session()})
    before = dump_tables(db_path)
    with foreign(db_path) as conn:
        assert conn.execute("PRAGMA recursive_triggers").fetchone() == (0,)
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(attack)
    assert dump_tables(db_path) == before
    with Journal.open(db_path) as journal:
        assert journal.verify().ok


@pytest.mark.parametrize("pos", ["pos", "NULL"], ids=["same-position", "next-position"])
def test_a_forged_projection_does_not_let_a_foreign_connection_replace_an_event(
    db_path: Path, pos: str
) -> None:
    make_journal(db_path, {"s": sample_session()})
    with foreign(db_path) as conn:  # the projection claims seq 3 onwards were never written
        conn.execute("UPDATE sessions SET last_seq = 2, events = 3 WHERE session_id = 's'")
        before = dump_tables(db_path)
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(
                f"INSERT OR REPLACE INTO events(pos, {ROW}) SELECT {pos}, session_id, seq, ts, "
                "type, v, 'forged', hash, summary FROM events WHERE seq = 3"
            )
    assert dump_tables(db_path) == before


def test_update_delete_and_replace_are_rejected_with_our_message(db_path: Path) -> None:
    make_journal(db_path, {"s": sample_session()})
    with foreign(db_path) as conn:
        for attack, message in [
            ("UPDATE events SET body = '{}'", "(UPDATE rejected)"),
            ("DELETE FROM events WHERE seq = 3", "(DELETE rejected)"),
            (
                f"INSERT OR REPLACE INTO events({ROW}) SELECT {ROW} FROM events WHERE seq = 3",
                "(INSERT over a taken seq)",
            ),
        ]:
            with pytest.raises(sqlite3.IntegrityError, match=re.escape(f"append-only {message}")):
                conn.execute(attack)


# -- tampering and verify ----------------------------------------------------------------


def _set_body(conn: sqlite3.Connection, seq: int, body: str, *, rehash: str = "") -> None:
    """Replace a body; ``rehash`` "event" fixes its hash, "head" its projection's head too."""
    conn.execute("UPDATE events SET body = ? WHERE session_id = 's' AND seq = ?", (body, seq))
    if rehash:
        (previous,) = conn.execute(
            "SELECT hash FROM events WHERE session_id = 's' AND seq = ?", (seq - 1,)
        ).fetchone()
        new = chain_hash(previous, body.encode())
        conn.execute("UPDATE events SET hash = ? WHERE session_id = 's' AND seq = ?", (new, seq))
    if rehash == "head":
        conn.execute("UPDATE sessions SET head_hash = ? WHERE session_id = 's'", (new,))


def _edited(conn: sqlite3.Connection, seq: int, **changes: object) -> str:
    (body,) = conn.execute(
        "SELECT body FROM events WHERE session_id = 's' AND seq = ?", (seq,)
    ).fetchone()
    record = json.loads(body) | changes
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def alter(conn: sqlite3.Connection) -> None:
    _set_body(conn, 5, _edited(conn, 5, cost=0.01))


def alter_and_rehash(conn: sqlite3.Connection) -> None:
    _set_body(conn, 5, _edited(conn, 5, cost=0.01), rehash="event")


def remove(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM events WHERE session_id = 's' AND seq = 5")


def remove_two(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM events WHERE session_id = 's' AND seq IN (5, 6)")


def reorder(conn: sqlite3.Connection) -> None:
    for old, new in ((5, -1), (6, 5), (-1, 6)):
        conn.execute("UPDATE events SET seq = ? WHERE session_id = 's' AND seq = ?", (new, old))


def cut_tail(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM events WHERE session_id = 's' AND seq >= 10")


def rewrite_tail(conn: sqlite3.Connection) -> None:
    _set_body(conn, 13, _edited(conn, 13, reason="nothing to see"), rehash="event")


def undecodable(conn: sqlite3.Connection) -> None:
    _set_body(conn, 13, _edited(conn, 13, rule=42), rehash="head")


def not_json(conn: sqlite3.Connection) -> None:
    _set_body(conn, 13, "this is not json", rehash="head")


def lose_projection(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM sessions WHERE session_id = 's'")


TAMPERING: list[tuple[Callable[[sqlite3.Connection], None], list[tuple[int | None, str]]]] = [
    (alter, [(5, "altered")]),
    (alter_and_rehash, [(6, "altered")]),
    (remove, [(5, "removed")]),
    (remove_two, [(5, "removed")]),
    # the link from 6 to 7 is broken too: seq 7 chains to the hash that moved away
    (reorder, [(5, "reordered"), (6, "reordered"), (7, "altered")]),
    (cut_tail, [(10, "truncated")]),
    (rewrite_tail, [(13, "truncated")]),
    (undecodable, [(13, "undecodable")]),
    (not_json, [(13, "undecodable")]),
    (lose_projection, [(None, "projection")]),
]


@pytest.mark.parametrize(("tamper", "found"), TAMPERING, ids=[t.__name__ for t, _ in TAMPERING])
def test_verify_names_the_tampered_event(
    db_path: Path,
    tamper: Callable[[sqlite3.Connection], None],
    found: list[tuple[int | None, str]],
) -> None:
    make_journal(db_path, {"s": sample_session(), "other": short_session()})
    with Journal.open(db_path) as journal:
        assert journal.verify().ok
    with foreign(db_path) as conn:
        drop_triggers(conn)
        tamper(conn)
        restore_triggers(conn)
    with Journal.open(db_path) as journal:
        report = journal.verify()
        assert not report.ok
        assert [(p.session_id, p.seq, p.kind) for p in report.problems] == [
            ("s", seq, kind) for seq, kind in found
        ]
        assert journal.verify(["other"]).ok


def test_verify_messages_say_what_happened(db_path: Path) -> None:
    make_journal(db_path, {"s": sample_session()})
    with foreign(db_path) as conn:
        drop_triggers(conn)
        remove_two(conn)
        restore_triggers(conn)
    with Journal.open(db_path) as journal:
        [problem] = journal.verify().problems
    assert problem.message == "seqs 5..6 missing before seq 7"


@pytest.mark.parametrize("name", sorted(TRIGGERS))
def test_a_dropped_trigger_is_a_finding(db_path: Path, name: str) -> None:
    make_journal(db_path, {"s": short_session()})
    with foreign(db_path) as conn:
        conn.execute(f"DROP TRIGGER {name}")
    with Journal.open(db_path) as journal:
        report = journal.verify()
    assert [(p.session_id, p.seq, p.kind) for p in report.problems] == [
        (None, None, "missing_trigger")
    ]
    assert report.problems[0].message.startswith(f"trigger {name} is missing: ")


def test_a_trigger_replaced_by_a_no_op_is_a_finding(db_path: Path) -> None:
    make_journal(db_path, {"s": short_session()})
    with foreign(db_path) as conn:
        conn.execute("DROP TRIGGER events_no_delete")
        conn.execute("CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT 1; END")
        conn.execute("DELETE FROM events WHERE seq = 4")  # now possible ...
    with Journal.open(db_path) as journal:
        problems = [(p.session_id, p.seq, p.kind) for p in journal.verify().problems]
    assert problems == [(None, None, "missing_trigger"), ("s", 4, "truncated")]  # ... and seen


def test_a_rewritten_chain_needs_the_hmac_key_to_be_seen(tmp_path: Path) -> None:
    plain, keyed = tmp_path / "plain.db", tmp_path / "keyed.db"
    make_journal(plain, {"s": sample_session()})
    with Journal.open(keyed, hmac_key=b"k") as journal:
        journal.append("s", sample_session())
    for path in (plain, keyed):
        with foreign(path) as conn:
            drop_triggers(conn)
            _set_body(conn, 5, _edited(conn, 5, cost=0.01))
            rechain(conn, "s")  # the forger recomputes every hash after it with sha256
            restore_triggers(conn)
    with Journal.open(plain) as journal:  # only the projection, derived from the old body,
        problems = [(p.seq, p.kind) for p in journal.verify().problems]  # gives it away:
        assert problems == [(None, "projection")]  # refold it too and this is the blind spot
    with Journal.open(keyed, hmac_key=b"k") as journal:
        problems = [(p.seq, p.kind) for p in journal.verify().problems]
    assert problems == [(seq, "altered") for seq in range(14)]  # no link holds without the key


def test_verify_of_an_unknown_session_is_an_error(journal: Journal) -> None:
    journal.append("s", [START])
    with pytest.raises(SessionNotFoundError, match="session nope: not in"):
        journal.verify(["nope"])


# -- the projection ----------------------------------------------------------------------


def _check_projection(journal: Journal, session_id: str) -> None:
    state = fold(journal.events(session_id))
    assert journal.state(session_id) == state
    summary = journal.require(session_id)
    expected = {name: getattr(state, name, None) for name in type(summary).model_fields}
    expected["head_hash"] = list(journal.stored_events(session_id))[-1].hash
    assert summary.model_dump() == expected
    assert journal.sessions() == [summary]


@settings(max_examples=25, deadline=None)
@given(sessions(), st.lists(st.integers(1, 5), min_size=1))
def test_the_projection_is_the_fold_of_the_events(
    events: list[EventModel], sizes: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "j.db"
        with Journal.open(path, clock=TickingClock()) as journal:
            done = 0
            for size in sizes * len(events):
                if done >= len(events):
                    break
                journal.append("s", events[done : done + size], expected_seq=done)
                done += size
                _check_projection(journal, "s")
        with Journal.open(path) as reopened:  # no cached state: read from the projection
            _check_projection(reopened, "s")
            assert reopened.verify().ok


def test_sessions_filters_and_orders_newest_first(db_path: Path) -> None:
    make_journal(
        db_path,
        {
            "old": short_session(),
            "failed": sample_session(),
            "new": [SessionStarted(agent="other:agent"), UserInput(text="x")],
        },
    )
    with Journal.open(db_path) as journal:
        assert [s.session_id for s in journal.sessions()] == ["new", "failed", "old"]
        assert [s.session_id for s in journal.sessions(status="failed")] == ["failed"]
        assert [s.session_id for s in journal.sessions(status="running")] == ["new"]
        assert [s.session_id for s in journal.sessions(agent="other:agent")] == ["new"]
        started = journal.require("failed").started
        assert [s.session_id for s in journal.sessions(since=started)] == ["new", "failed"]
        assert [s.session_id for s in journal.sessions(until=started)] == ["old"]
        assert [s.session_id for s in journal.sessions(limit=1)] == ["new"]


# -- streaming ---------------------------------------------------------------------------


def test_events_are_read_lazily_in_pages(journal: Journal) -> None:
    journal.append("s", [START, *(UserInput(text=str(n)) for n in range(9))])
    journal.PAGE_SIZE = 4
    selects: list[str] = []
    journal._conn.set_trace_callback(  # type: ignore[attr-defined]
        lambda sql: selects.append(sql) if "FROM events" in sql else None
    )
    stream = journal.events("s")
    seen = [next(stream).seq for _ in range(4)]
    assert (seen, len(selects)) == ([0, 1, 2, 3], 1)
    seen.append(next(stream).seq)
    assert len(selects) == 2
    seen += [e.seq for e in stream]
    assert (seen, len(selects)) == (list(range(10)), 3)
    assert [e.seq for e in journal.events("s", start=3, stop=9)] == [3, 4, 5, 6, 7, 8]
    assert [e.seq for e in journal.events("s", start=8)] == [8, 9]


def test_positions_of_an_erased_session_are_never_given_again(db_path: Path) -> None:
    with Journal.open(db_path) as writer, Journal.open(db_path) as other:
        writer.append("low", short_session())
        writer.append("top", sample_session())
        given = writer.head_position()
        other.erase("top", reason="retention")  # the highest positions, from another connection
        writer.append("low", [UserInput(text="after")])  # on this connection's cached head
        writer.append("new", short_session())
        after = [e.position or 0 for e in writer.read_after(given)]
        assert len(after) == 1 + len(short_session()) and min(after) == given + 1
        given = writer.head_position()
        records = [(f"r{row.seq}", row.record()) for row in writer.stored_events("new")]
        writer.erase("new", reason="again")
        other.import_records("new", records)  # an import numbers its rows the same way
        assert min(e.position or 0 for e in other.events("new")) == given + 1
        given = other.head_position()
        other.erase("new", reason="once more")
    with Journal.open(db_path) as reopened:  # the floor is in the file, not in a connection
        reopened.append("last", short_session())
        assert min(e.position or 0 for e in reopened.events("last")) == given + 1
        assert reopened.verify().ok


@pytest.mark.parametrize("change", ["deleted", "moved away", "replaced", "chmod"])
def test_a_journal_file_deleted_or_replaced_while_open_takes_no_more_appends(
    db_path: Path, change: str
) -> None:
    other = db_path.with_name("other.db")
    make_journal(other, {"o": short_session()})
    with Journal.open(db_path) as journal:
        journal.append("s", short_session())
        journal.append("s", [UserInput(text="before")])  # many commits: none noticed a thing
        if change == "deleted":
            db_path.unlink()
        elif change == "moved away":
            db_path.rename(db_path.with_name("moved.db"))
        elif change == "replaced":
            other.rename(db_path)
        else:
            db_path.chmod(0o600)  # the file is still the journal's: appends go on
        if change == "chmod":
            journal.append("s", [UserInput(text="after")])
            assert texts_of(journal, "s")[-1] == "after"
        else:
            with pytest.raises(StoreError, match="deleted or replaced while open"):
                journal.append("s", [UserInput(text="after")])
            with pytest.raises(StoreError, match="deleted or replaced while open"):
                journal.append("s", [UserInput(text="again")])  # and none after it either


def test_journals_beyond_the_watches_a_process_holds_check_their_file_by_path(
    tmp_path: Path,
) -> None:
    paths = [tmp_path / f"j{index}.db" for index in range(MAX_WATCHES + 2)]
    journals = [Journal.open(path) for path in paths]
    try:
        for journal in journals:
            journal.append("s", short_session())
        for path in paths:
            path.unlink()
        for journal in journals:  # watched or not, each refuses to write into a deleted file
            with pytest.raises(StoreError, match="deleted or replaced while open"):
                journal.append("s", [UserInput(text="after")])
    finally:
        for journal in journals:
            journal.close()


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")
def test_a_process_holds_a_few_file_watches_and_gives_them_back(tmp_path: Path) -> None:
    path = tmp_path / "watched"
    path.touch()
    gc.collect()  # journals other tests left to the collector give their watches back
    watches: list[FileWatch] = []
    while (watch := FileWatch(str(path))).quiet():  # until one too many: "check the path"
        watches.append(watch)
        assert len(watches) <= MAX_WATCHES
    assert watches
    watches.pop().close()
    again = FileWatch(str(path))
    assert again.quiet()
    path.chmod(0o600)  # anything that happens to the file: check it, from now on
    assert not again.quiet() and not again.quiet()
    for watch in [*watches, again]:
        watch.close()


def test_a_reader_follows_appends_across_sessions_without_gaps_or_repeats(db_path: Path) -> None:
    with Journal.open(db_path) as writer, Journal.open(db_path) as reader:
        assert reader.head_position() == 0
        assert reader.read_after(0) == []
        written: list[tuple[str, int]] = []
        seen: list[tuple[str, int]] = []
        position = 0
        rng = random.Random(7)
        for round_ in range(30):
            session_id = rng.choice("abc")
            events = [] if writer.last_seq(session_id) is not None else [START]
            events += [UserInput(text=f"{round_}-{k}") for k in range(rng.randint(1, 3))]
            last = writer.append(session_id, events)
            written += [(session_id, seq) for seq in range(last - len(events) + 1, last + 1)]
            if rng.random() < 0.5:
                continue  # the reader falls behind, then catches up in pages of two
            while page := reader.read_after(position, limit=2):
                seen += [(row.session_id, row.seq) for row in page]
                assert page[-1].position is not None
                position = page[-1].position
        seen += [(row.session_id, row.seq) for row in reader.read_after(position, limit=1000)]
        assert seen == written
        assert reader.head_position() == reader.read_after(0, limit=1000)[-1].position


# -- several processes -------------------------------------------------------------------


@pytest.mark.parametrize("shared", [False, True], ids=["different-sessions", "same-session"])
def test_four_processes_append_at_once_and_nothing_is_lost(db_path: Path, shared: bool) -> None:
    per_worker = 150
    names = ["w0", "w1", "w2", "w3"]
    session_of = {name: "shared" if shared else name for name in names}
    barrier = db_path.with_suffix(".barrier")
    workers = [
        worker("append", db_path, session_of[name], name, per_worker, barrier) for name in names
    ]
    deadline = time.monotonic() + 30
    while not all(Path(f"{barrier}.ready.{name}").exists() for name in names):
        assert time.monotonic() < deadline and all(w.poll() is None for w in workers)
        time.sleep(0.005)
    Path(f"{barrier}.go").touch()  # every worker has opened the journal: now all write at once
    assert [w.wait(timeout=60) for w in workers] == [0, 0, 0, 0]
    with Journal.open(db_path) as journal:
        for session_id in sorted(set(session_of.values())):
            seqs = [e.seq for e in journal.events(session_id)]
            assert seqs == list(range(len(seqs)))
            texts = texts_of(journal, session_id)
            assert len(texts) == len(set(texts))
            for name in names:
                if session_of[name] == session_id:
                    mine = [t for t in texts if t.startswith(f"{name}-")]
                    assert mine == [f"{name}-{n}" for n in range(per_worker)]
        assert sum(s.events for s in journal.sessions()) == 4 * per_worker + len(
            set(session_of.values())
        )
        assert journal.verify().ok
        rows = [row for row in journal.read_after(0, limit=10_000) if row.type == "user_input"]
    writers = [row.summary.split("-")[0] for row in rows]  # in commit order
    assert sum(a != b for a, b in zip(writers, writers[1:], strict=False)) >= 10  # interleaved


def _kill_mid_stream(path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    confirmed = -1
    for _ in range(rounds):
        process = worker("stream", path, "s", stdout=subprocess.PIPE)
        assert process.stdout is not None
        for _ in range(rng.randint(1, 25)):
            line = process.stdout.readline()
            assert line, "the writer died before it was killed"
            confirmed = max(confirmed, int(line))
        os.kill(process.pid, signal.SIGKILL)
        confirmed = max([confirmed, *map(int, process.stdout.read().split())])
        process.stdout.close()
        assert process.wait() == -signal.SIGKILL
        with foreign(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        with Journal.open(path) as journal:
            last = journal.last_seq("s")
            assert last is not None and last >= confirmed
            assert journal.verify().ok


def test_a_writer_killed_mid_stream_loses_nothing_it_reported(db_path: Path) -> None:
    _kill_mid_stream(db_path, rounds=8, seed=1)


@pytest.mark.slow
def test_a_writer_killed_mid_stream_many_times(db_path: Path) -> None:
    _kill_mid_stream(db_path, rounds=drill_size(60, 200), seed=2)


# -- locks, durability, what is not a journal --------------------------------------------


def test_a_locked_database_makes_append_raise_busy_and_write_nothing(db_path: Path) -> None:
    make_journal(db_path, {"s": short_session()})
    with SQLiteJournal(str(db_path), busy_timeout_ms=100) as journal, foreign(db_path) as lock:
        before = dump_tables(db_path)
        lock.execute("BEGIN IMMEDIATE")
        began = time.monotonic()
        with pytest.raises(JournalBusyError, match="database is locked by another writer"):
            journal.append("s", [UserInput(text="blocked")])
        assert time.monotonic() - began < 2
        assert journal.verify().ok  # readers are not blocked by a writer in WAL mode
        lock.execute("ROLLBACK")
        assert dump_tables(db_path) == before
        assert journal.append("s", [UserInput(text="later")]) == 5


@pytest.mark.parametrize(("durability", "level"), [("normal", 1), ("full", 2)])
def test_files_use_wal_and_the_durability_asked_for(
    db_path: Path, durability: str, level: int
) -> None:
    with Journal.open(db_path, durability=durability) as journal:  # type: ignore[arg-type]
        conn = journal._conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (level,)
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (5000,)


def test_opening_what_is_not_a_journal(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(JournalMissingError, match="missing.db: no journal here"):
        Journal.open(missing, create=False)
    assert not missing.exists()
    with pytest.raises(NotAJournalError, match="is a directory"):
        Journal.open(tmp_path)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(NotAJournalError, match="garbage.db: not a SQLite journal"):
        Journal.open(garbage)
    other = tmp_path / "other.db"
    with foreign(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(NotAJournalError, match="not an agent-journal journal \\(tables: users\\)"):
        Journal.open(other)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(NotAJournalError, match="empty database"):
        Journal.open(empty, create=False)


def test_a_newer_schema_or_another_chain_is_refused(tmp_path: Path) -> None:
    newer = make_journal(tmp_path / "newer.db", {"s": short_session()})
    with foreign(newer) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="schema version 999 is newer"):
        Journal.open(newer)
    keyed = tmp_path / "keyed.db"
    Journal.open(keyed, hmac_key=b"k").close()
    with pytest.raises(StoreError, match="chain is hmac-sha256; open it with an HMAC key"):
        Journal.open(keyed)


@given(
    st.lists(
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(alphabet="ab?")), max_size=6
    )
)
def test_none_parameters_are_written_as_null_and_the_statement_means_the_same(
    values: list[object],
) -> None:
    conn = sqlite3.connect(":memory:")
    columns = [f"c{index}" for index in range(len(values))]
    conn.execute(f"CREATE TABLE t(k, {', '.join(columns)})" if columns else "CREATE TABLE t(k)")
    names = ", ".join(["k", *columns])
    marks = ", ".join("?" * (len(values) + 1))
    text, params = without_nulls(f"INSERT INTO t({names}) VALUES ({marks})", [1, *values])
    assert None not in params
    assert text.count("NULL") == values.count(None)
    conn.execute(text, params)
    matched = " AND ".join(["k = ?", *(f"{name} IS ?" for name in columns)])
    text, params = without_nulls(f"SELECT count(*) FROM t WHERE {matched}", [1, *values])
    assert conn.execute(text, params).fetchone() == (1,)
    assert conn.execute(f"SELECT {names} FROM t").fetchone() == (1, *values)
    # Told where Nones may be (every other parameter): those are written as NULL, a None
    # elsewhere stays a parameter, and the statement still means the same.
    places = range(1, len(values) + 1, 2)
    text, params = without_nulls(f"SELECT count(*) FROM t WHERE {matched}", [1, *values], places)
    assert text.count("NULL") == [values[place - 1] for place in places].count(None)
    assert params == [1, *(v for at, v in enumerate(values, 1) if v is not None or at % 2 == 0)]
    assert conn.execute(text, params).fetchone() == (1,)
