"""Administering stores: ``init``, ``copy`` between SQLite and PostgreSQL, ``erase``, upgrades."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from journal import Journal, ModelCallFailed, SessionConflictError, SessionStarted, UserInput
from journal._postgres_schema import SCHEMA_VERSION as POSTGRES_VERSION
from journal._sqlite_schema import (
    ENDED_BADLY_INDEX,
    ERASE_TABLES,
    EVENTS_TABLE,
    POSITION_FLOOR,
    TRIGGERS,
)
from journal._sqlite_schema import SCHEMA_VERSION as SQLITE_VERSION
from journal.formats.jsonl import export_session
from journal.formats.transfer import copy_session

from .helpers import REPO, TS0, TickingClock, run_cli, sample_session, short_session
from .stores import PgSchema, downgrade_pg_to_v3

V1_DELETE_TRIGGER = """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (DELETE rejected)');
END"""


def _fill(target: str | Path) -> None:
    with Journal.open(target, clock=TickingClock()) as journal:
        journal.append("failed-1", sample_session())
        journal.append("ok-1", short_session())
        journal.append("ok-2", short_session(), ts="2027-01-01T00:00:00.000000Z")


def _exports(target: str | Path) -> dict[str, bytes]:
    with Journal.open(target, create=False) as journal:
        return {s.session_id: export_session(journal, s.session_id) for s in journal.sessions()}


def test_init_creates_then_reports_up_to_date(tmp_path: Path, pg_schema: PgSchema) -> None:
    for target, version in (
        (tmp_path / "j.db", SQLITE_VERSION),
        (pg_schema.url, POSTGRES_VERSION),
    ):
        first = run_cli("init", "--db", target)
        assert first.exit_code == 0, first.stderr
        assert first.stdout.startswith("created a journal at ")
        assert f"(schema version {version})" in first.stdout
        again = run_cli("init", "--db", target)
        assert again.exit_code == 0 and "is up to date" in again.stdout
    assert "5432" in first.stdout and "@" not in first.stdout.split("at ")[1].split(" ")[0][:3]


def test_copy_sqlite_to_postgres_and_back_is_verified_and_idempotent(
    tmp_path: Path, pg_schema: PgSchema
) -> None:
    source, back = tmp_path / "laptop.db", tmp_path / "back.db"
    _fill(source)
    first = run_cli("copy", "--from", source, "--to", pg_schema.url)
    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith("copied 3 sessions from ")
    total = len(sample_session()) + 2 * len(short_session())
    assert f": {total} new events, 0 sessions already up to date" in first.stdout
    again = run_cli("copy", "--from", source, "--to", pg_schema.url)
    assert "0 new events, 3 sessions already up to date" in again.stdout
    assert _exports(pg_schema.url) == _exports(source)
    home = run_cli("copy", "--from", pg_schema.url, "--to", back)
    assert home.exit_code == 0 and f"{total} new events" in home.stdout
    assert _exports(back) == _exports(source)
    assert run_cli("verify", "--db", pg_schema.url).exit_code == 0


def test_copy_filters_by_session_status_and_time(tmp_path: Path, pg_schema: PgSchema) -> None:
    source = tmp_path / "src.db"
    _fill(source)
    failed = run_cli("copy", "--from", source, "--to", pg_schema.url, "--status", "failed")
    assert failed.exit_code == 0 and "copied 1 session " in failed.stdout
    recent = run_cli("copy", "--from", source, "--to", tmp_path / "r.db", "--since", "2027-01-01")
    assert recent.exit_code == 0 and set(_exports(tmp_path / "r.db")) == {"ok-2"}
    named = run_cli("copy", "ok-1", "--from", source, "--to", pg_schema.url)
    assert "copied 1 session " in named.stdout
    assert set(_exports(pg_schema.url)) == {"failed-1", "ok-1"}
    missing = run_cli("copy", "nope", "--from", source, "--to", pg_schema.url)
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1
    assert "session nope" in missing.stderr


def test_copy_extends_a_grown_session_and_reports_conflicts(
    tmp_path: Path, pg_schema: PgSchema
) -> None:
    source = tmp_path / "src.db"
    _fill(source)
    run_cli("copy", "--from", source, "--to", pg_schema.url)
    with Journal.open(source) as journal:
        journal.append("ok-1", [UserInput(text="more")], ts=TS0)
        journal.append("clash", [SessionStarted(agent="a:b")], ts=TS0)
    with Journal.open(pg_schema.url) as journal:
        journal.append("clash", [SessionStarted(agent="other:one")], ts=TS0)
        head = journal.head_position()
    result = run_cli("copy", "--from", source, "--to", pg_schema.url)
    assert result.exit_code == 2
    assert "1 new event," in result.stdout and "1 failed" in result.stdout
    assert result.stderr.startswith("agent-journal: session clash: exists already")
    assert result.stderr.count("\n") == 1
    with Journal.open(pg_schema.url) as journal:
        assert journal.head_position() == head + 1
        assert journal.require("clash").agent == "other:one"
        with Journal.open(source) as src, pytest.raises(SessionConflictError):
            copy_session(src, journal, "clash")


def test_copy_errors_are_one_line(tmp_path: Path) -> None:
    result = run_cli("copy", "--from", tmp_path / "none.db", "--to", tmp_path / "x.db")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "does not exist" in result.stderr and not (tmp_path / "x.db").exists()


def test_erase_command_on_both_stores(tmp_path: Path, pg_schema: PgSchema) -> None:
    for target in (tmp_path / "j.db", pg_schema.url):
        _fill(target)
        refused = run_cli("erase", "ok-1", "--db", target, "--reason", "retention")
        assert refused.exit_code == 2 and "--yes" in refused.stderr
        done = run_cli(
            "erase", "ok-1", "--db", target, "--reason", "retention", "--by", "ops", "--yes"
        )
        assert done.exit_code == 0, done.stderr
        assert done.stdout.startswith("erased ok-1: 5 events (head hash ")
        with Journal.open(target) as journal:
            assert journal.summary("ok-1") is None
            [erasure] = journal.erasures()
            assert (erasure.reason, erasure.erased_by, erasure.events) == ("retention", "ops", 5)
        assert run_cli("verify", "--db", target, "--session", "ok-1").exit_code == 0
        assert run_cli("verify", "--db", target).exit_code == 0
        again = run_cli("erase", "ok-1", "--db", target, "--reason", "x", "--yes")
        assert again.exit_code == 2 and "ok-1" in again.stderr


def _erase_at_a_terminal(db: Path, answer: bytes | None) -> tuple[int, str]:
    """Run erase with a terminal as stdin; answer its question, or press Ctrl-C (None)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    main, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", "from tui.cli import main; main()", "erase", "ok-1"]
        + ["--db", str(db), "--reason", "retention"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    os.close(terminal)
    assert process.stdout is not None
    asked = b""
    while b"for good?" not in asked:
        chunk = os.read(process.stdout.fileno(), 1024)
        assert chunk, (asked, process.communicate(timeout=60))  # it ended without asking
        asked += chunk
    if answer is None:
        time.sleep(0.2)  # inside input()
        process.send_signal(signal.SIGINT)
    else:
        os.write(main, answer)
    _, errors = process.communicate(timeout=60)
    os.close(main)
    return process.returncode, errors.decode()


def test_erase_asks_and_neither_no_nor_ctrl_c_reads_as_a_finding(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    _fill(db)
    assert _erase_at_a_terminal(db, b"n\n") == (2, "agent-journal: session ok-1 not erased\n")
    assert _erase_at_a_terminal(db, None) == (130, "agent-journal: interrupted\n")
    with Journal.open(db) as journal:
        assert journal.summary("ok-1") is not None and journal.erasures() == []
    assert _erase_at_a_terminal(db, b"y\n")[0] == 0


def test_copy_does_not_bring_back_an_erased_session(tmp_path: Path, pg_schema: PgSchema) -> None:
    source = tmp_path / "laptop.db"
    _fill(source)
    run_cli("copy", "--from", source, "--to", pg_schema.url)
    with Journal.open(pg_schema.url) as journal:
        journal.erase("ok-1", reason="user asked")
    again = run_cli("copy", "--from", source, "--to", pg_schema.url)
    assert again.exit_code == 0
    assert "0 new events, 2 sessions already up to date, 1 skipped (erased there)" in again.stdout
    with Journal.open(source) as journal:
        journal.erase("ok-2", reason="reuse the id")
        journal.append("ok-1", [UserInput(text="grown")])
        journal.append("ok-2", [SessionStarted(agent="a:new")])
    with Journal.open(pg_schema.url) as journal:
        journal.erase("ok-2", reason="retention")
    third = run_cli("copy", "ok-1", "ok-2", "--from", source, "--to", pg_schema.url)
    assert "copied 1 session " in third.stdout and "1 skipped (erased there)" in third.stdout
    with Journal.open(pg_schema.url) as journal:
        assert journal.summary("ok-1") is None
        assert journal.require("ok-2").agent == "a:new"


def test_import_does_not_bring_back_an_erased_session(tmp_path: Path, pg_schema: PgSchema) -> None:
    source = tmp_path / "laptop.db"
    _fill(source)
    exports = _exports(source)
    for name, data in exports.items():
        (tmp_path / f"{name}.jsonl").write_bytes(data)
    for target in (tmp_path / "j.db", pg_schema.url):
        run_cli("copy", "--from", source, "--to", target)
        with Journal.open(target) as journal:
            journal.erase("ok-1", reason="user asked")
        again = run_cli("import", tmp_path / "ok-1.jsonl", tmp_path / "ok-2.jsonl", "--db", target)
        assert again.exit_code == 0, again.stderr
        assert again.stdout.splitlines() == [
            f"skipped ok-1: erased from this journal ({tmp_path / 'ok-1.jsonl'})",
            f"imported ok-2: already present ({tmp_path / 'ok-2.jsonl'})",
        ]
        with Journal.open(target) as journal:
            assert journal.summary("ok-1") is None and journal.verify().ok
            journal.erase("ok-2", reason="reuse the id")
            journal.append("ok-2", [SessionStarted(agent="a:new")])  # another session, same id
        with Journal.open(source) as journal:
            assert journal.summary("ok-2") is not None
        other = run_cli("import", tmp_path / "ok-2.jsonl", "--db", target)
        assert other.exit_code == 2 and "exists already with different content" in other.stderr


ON_EVENTS = ("events_no_update", "events_no_delete", "events_no_overwrite", "erase_requires_audit")


def _downgrade_to_v4(path: Path) -> None:
    """Turn a current file into exactly what version 4 created: positions by AUTOINCREMENT
    (the highest ever given in ``sqlite_sequence``), an index on the sessions' status."""
    conn = sqlite3.connect(path, isolation_level=None)
    (floor,) = conn.execute(f"SELECT value FROM meta WHERE key = '{POSITION_FLOOR}'").fetchone()
    for name in ON_EVENTS:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("ALTER TABLE events RENAME TO events_v5")
    conn.execute(EVENTS_TABLE.replace("PRIMARY KEY", "PRIMARY KEY AUTOINCREMENT", 1))
    conn.execute("INSERT INTO events SELECT * FROM events_v5 ORDER BY pos")
    conn.execute("DROP TABLE events_v5")
    conn.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'events'", (int(floor),)
    )
    for name in ON_EVENTS:
        conn.execute(TRIGGERS[name])
    conn.execute("DROP INDEX sessions_ended_badly")
    conn.execute("CREATE INDEX sessions_status ON sessions(status, started)")
    conn.execute(f"DELETE FROM meta WHERE key = '{POSITION_FLOOR}'")
    conn.execute("ALTER TABLE sessions DROP COLUMN model_failures")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()


def _raw(target: str | Path) -> Any:
    """A plain connection to the store at ``target`` (a SQLite path, a PostgreSQL URL)."""
    return sqlite3.connect(target) if isinstance(target, Path) else psycopg.connect(target)


def _with_model_failures(target: str | Path) -> None:
    """A session whose model call failed twice before it answered (a retried 429)."""
    failed = ModelCallFailed(message="RateLimitError: 429", status_code=429)
    with Journal.open(target) as journal:
        journal.append("retried", [SessionStarted(agent=None), failed, failed])


def test_a_version_5_journal_gains_the_failed_model_calls_of_its_sessions(
    tmp_path: Path, pg_schema: PgSchema
) -> None:
    for target, version in (
        (tmp_path / "v5.db", SQLITE_VERSION),
        (pg_schema.url, POSTGRES_VERSION),
    ):
        _fill(target)
        _with_model_failures(target)
        with Journal.open(target, create=False) as journal:
            assert journal.require("retried").model_failures == 2
        with closing(_raw(target)) as raw:
            raw.execute("ALTER TABLE sessions DROP COLUMN model_failures")
            raw.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
            raw.commit()
        result = run_cli("init", "--db", target)
        assert result.exit_code == 0, result.stderr
        assert f"from schema version 5 to {version}" in result.stdout
        with Journal.open(target, create=False) as journal:
            assert journal.verify().ok
            assert {s.session_id: s.model_failures for s in journal.sessions()} == {
                "failed-1": 0,
                "ok-1": 0,
                "ok-2": 0,
                "retried": 2,
            }


def test_a_version_4_file_is_upgraded_and_never_gives_an_erased_position_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.db"
    _fill(path)
    with Journal.open(path) as journal:
        top = max(event.position or 0 for event in journal.events("ok-2"))  # the last written
        journal.erase("ok-2", reason="retention")
    before = _exports(path)
    _downgrade_to_v4(path)
    conn = sqlite3.connect(path)
    assert (
        "AUTOINCREMENT"
        in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
    )
    assert conn.execute("SELECT max(pos) FROM events").fetchone()[0] < top
    conn.close()
    with Journal.open(path, create=False) as journal:
        assert journal.schema_setup.model_dump() == {
            "action": "upgraded",
            "version": SQLITE_VERSION,
            "from_version": 4,
        }
        assert journal.verify().ok
        journal.append("after", short_session())
        assert min(event.position or 0 for event in journal.events("after")) == top + 1
    conn = sqlite3.connect(path)
    schema = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
    conn.close()
    assert "AUTOINCREMENT" not in schema["events"] and "sessions_status" not in schema
    assert schema["sessions_ended_badly"] == ENDED_BADLY_INDEX
    with Journal.open(path, create=False) as journal:
        assert [s.session_id for s in journal.sessions(status="failed")] == ["failed-1"]
    assert {name: schema[name] for name in TRIGGERS} == TRIGGERS
    assert {k: v for k, v in _exports(path).items() if k != "after"} == before


def _downgrade_to_v1(path: Path) -> None:
    """Turn a fresh current file into exactly what version 1 created."""
    _downgrade_to_v4(path)
    conn = sqlite3.connect(path, isolation_level=None)
    for column in ("repairs", "committed", "model_calls", "latency_ms"):
        conn.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
    for name in ("events_no_delete", "erasures_no_update", "erasures_no_delete"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TRIGGER erase_requires_audit")
    for statement in ERASE_TABLES:
        if statement.startswith("CREATE TABLE"):
            conn.execute(f"DROP TABLE {statement.split()[2]}")
    conn.execute(V1_DELETE_TRIGGER)
    conn.execute("DELETE FROM meta WHERE key = 'erasures_chained_after'")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()


def test_a_version_1_file_is_upgraded_in_place_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _fill(path)
    before = _exports(path)
    _downgrade_to_v1(path)
    with Journal.open(path, create=False) as journal:
        assert journal.schema_setup.model_dump() == {
            "action": "upgraded",
            "version": SQLITE_VERSION,
            "from_version": 1,
        }
        assert journal.verify().ok
        for summary in journal.sessions():  # the metrics added later are filled from the state
            state = journal.state(summary.session_id)
            assert (summary.model_calls, summary.committed) == (state.model_calls, state.committed)
    result = run_cli("init", "--db", path)
    assert result.exit_code == 0
    assert f"up to date (schema version {SQLITE_VERSION})" in result.stdout
    conn = sqlite3.connect(path)
    installed = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    conn.close()
    assert installed == TRIGGERS
    assert _exports(path) == before
    with Journal.open(path) as journal:
        journal.erase("ok-1", reason="upgrade works")
        assert journal.verify().ok


def test_init_reports_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _fill(path)
    _downgrade_to_v1(path)
    result = run_cli("init", "--db", path)
    assert result.exit_code == 0
    expected = f"upgraded the journal at {path} from schema version 1 to {SQLITE_VERSION}\n"
    assert result.stdout == expected


def test_a_version_1_postgres_schema_gains_the_metrics_columns(pg_schema: PgSchema) -> None:
    _fill(pg_schema.url)
    before = _exports(pg_schema.url)
    downgrade_pg_to_v3(pg_schema.url)
    with psycopg.connect(pg_schema.url, autocommit=True) as conn:
        for column in ("repairs", "committed", "model_calls", "latency_ms"):
            conn.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    result = run_cli("init", "--db", pg_schema.url)
    assert result.exit_code == 0, result.stderr
    assert f"from schema version 1 to {POSTGRES_VERSION}" in result.stdout
    with Journal.open(pg_schema.url, create=False) as journal:
        assert journal.verify().ok
        for summary in journal.sessions():
            state = journal.state(summary.session_id)
            assert (summary.model_calls, summary.committed) == (state.model_calls, state.committed)
    assert _exports(pg_schema.url) == before


def test_a_version_2_postgres_schema_gets_the_overwrite_check_our_appends_skip(
    pg_schema: PgSchema,
) -> None:
    _fill(pg_schema.url)
    before = _exports(pg_schema.url)
    downgrade_pg_to_v3(pg_schema.url)
    with psycopg.connect(pg_schema.url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER events_no_overwrite ON events")
        conn.execute(
            "CREATE TRIGGER events_no_overwrite BEFORE INSERT ON events FOR EACH ROW "
            "EXECUTE FUNCTION agent_journal_no_overwrite()"
        )
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with Journal.open(pg_schema.url) as journal:
        assert journal.schema_setup.from_version == 2
        assert journal.verify().ok  # the trigger is the current one again
        journal.append("more", short_session())
    assert {k: v for k, v in _exports(pg_schema.url).items() if k != "more"} == before
