"""What a newcomer trips on in the first hour (issue 47): the command line at 80 columns,
reports where the commands print them, and errors that say what is wrong."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import orjson
import pytest

from capture import Destination, Recorder
from journal import Journal

from .helpers import make_journal, one_error_line, run_cli, sample_session, short_session

NARROW = {"COLUMNS": "80"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_journal(tmp_path / "j.db", {"short": short_session(), "s": sample_session()})


def test_the_demo_summary_at_80_columns_keeps_why_a_session_failed(tmp_path: Path) -> None:
    result = run_cli("demo", "--db", tmp_path / "demo.db", "--no-tui", env=NARROW)
    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.split("\n\n", 1)[0].splitlines()
    assert header.split() == ["session", "status", "fail", "ok%", "cost", "outcome"]
    crash = next(row for row in rows if row.startswith("demo-discount-crash-s0"))
    assert "error: the guard" in crash
    assert all(len(line) <= 80 for line in [header, *rows])


def test_export_import_copy_and_fixture_report_on_stdout(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    reports = {
        "export": run_cli("export", "s", "--db", db, "-o", out, env=NARROW),
        "import": run_cli("import", out, "--db", tmp_path / "new.db", env=NARROW),
        "copy": run_cli("copy", "--from", db, "--to", tmp_path / "copy.db", env=NARROW),
        "fixture": run_cli("fixture", "s", "--db", db, "-o", tmp_path / "f.jsonl", env=NARROW),
    }
    assert {name: (r.exit_code, r.stderr) for name, r in reports.items()} == {
        name: (0, "") for name in reports
    }
    assert reports["export"].stdout == f"exported s: 14 events to {out}\n"
    assert reports["import"].stdout == f"imported s: 14 events ({out})\n"
    assert reports["copy"].stdout.startswith("copied 2 sessions")
    assert reports["fixture"].stdout.startswith(f"wrote {tmp_path / 'f.jsonl'}: 14 events")


def test_an_openai_import_reports_on_stdout_and_its_json_alone_there(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(
        '{"messages": [{"role": "user", "content": "hi"}, '
        + '{"role": "assistant", "content": "hello"}]}'
    )
    result = run_cli("import", "--format", "openai", "--db", tmp_path / "j.db", path)
    assert (result.exit_code, result.stderr) == (0, "")
    assert "every message was mapped" in result.stdout
    as_json = run_cli("import", "--format", "openai", "--db", tmp_path / "k.db", "--json", path)
    assert as_json.exit_code == 0
    orjson.loads(as_json.stdout)  # nothing but the JSON on stdout
    assert f"imported {path}" in as_json.stderr


def test_a_header_without_format_version_says_it_is_missing(db: Path, tmp_path: Path) -> None:
    run_cli("export", "s", "--db", db, "-o", tmp_path / "s.jsonl")
    lines = (tmp_path / "s.jsonl").read_bytes().splitlines()
    header = orjson.loads(lines[0])
    del header["format_version"]
    broken = tmp_path / "old.jsonl"
    broken.write_bytes(b"\n".join([orjson.dumps(header), *lines[1:]]) + b"\n")
    for command in (["replay", broken], ["import", broken, "--db", tmp_path / "x.db"]):
        result = run_cli(*command)
        assert result.exit_code == 2
        assert one_error_line(result) == (
            f'agent-journal: {broken}:1: header has no "format_version" (an export writes '
            '"format_version": 1; this code reads up to 1)'
        )
        assert "None" not in result.stderr
    assert not (tmp_path / "x.db").exists() or not Journal.open(tmp_path / "x.db").sessions()


def test_the_spool_says_how_many_events_of_a_session_it_took(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "prod.db"
    Journal.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the journal
    caplog.set_level(logging.WARNING, logger="capture")
    recorder = Recorder(Destination(str(path), busy_timeout=0.05), "spooled")
    recorder.start(agent="app:run")
    recorder.user_input("go")
    for _ in range(5):
        recorder.user_input("and again")
    recorder.final("done")
    recorder.close()
    holder.rollback()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "session spooled goes to the spool" in messages[0]
    assert "from seq 0 on (1 session spooled by this process so far" in messages[0]
    assert "1 events" not in messages[0] and "1 sessions" not in messages[0]
    assert messages[1].startswith("agent-journal: session spooled ended with 8 events in the spool")


def test_sessions_show_and_the_tui_name_and_count_the_failures_alike(db: Path) -> None:
    header, *rows = run_cli("sessions", "--db", db, env=NARROW).stdout.splitlines()
    fail = header.split().index("fail")
    listed = {row.split()[0]: row.split()[fail] for row in rows}
    assert listed == {"s": "3", "short": "0"}  # s failed: its two failed calls and the crash
    for session, count in listed.items():
        shown = run_cli("show", session, "--db", db, env={"COLUMNS": "200"}).stdout
        assert f" fail={count} " in shown.splitlines()[0]
        assert "failures" not in shown.splitlines()[0]


def test_a_diff_of_one_metadata_key_shows_that_field_not_the_whole_configuration(
    tmp_path: Path,
) -> None:
    from journal import AgentCompleted, SessionStarted, UserInput

    sessions = {
        name: [
            SessionStarted(agent="m:f", model="gpt", metadata={"service": service, "k": 1}),
            UserInput(text="hi"),
            AgentCompleted(answer="ok"),
        ]
        for name, service in (("a", "x"), ("b", "y"))
    }
    db = make_journal(tmp_path / "d.db", sessions)
    result = run_cli("diff", "a", "b", "--db", db, env={"COLUMNS": "400"})
    assert result.exit_code == 1
    assert result.stdout.splitlines()[2:5] == [
        '-     0 session_started {"metadata":{"k":1,"service":"x"}}',
        '+     0 session_started {"metadata":{"k":1,"service":"y"}}',
        '        metadata.service: "x" -> "y"',
    ]
    assert "guardrails" not in result.stdout


def test_a_locked_write_says_how_long_it_waited_and_which_process_holds_the_lock(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from journal import JournalBusyError, SessionStarted

    path = tmp_path / "locked.db"
    Journal.open(path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with Journal.open(path, busy_timeout=0.2) as journal:
            with pytest.raises(JournalBusyError) as raised:
                journal.append("s", [SessionStarted(agent="m:f")])
    finally:
        holder.communicate("")
    message = str(raised.value)
    assert message.startswith(f"{path}: database is locked by another writer (")
    assert ": waited 0.2 s (the busy timeout); held by pid " in message
    assert f"pid {holder.pid} (python" in message
