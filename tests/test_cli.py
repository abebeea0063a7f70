"""The command line: help, the public contract of each command, exit codes, and bad input."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from rich.cells import cell_len

from journal import (
    ActionCommitted,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    Journal,
    ModelCallFailed,
    SessionStarted,
    ToolCall,
    UserInput,
    export_session,
)
from journal.sqlite import SQLiteJournal
from tui.cli import cli
from tui.clikit import EXIT_CODES, EXIT_FINDING, counted
from tui.columns import COLUMNS

from .helpers import (
    REPO,
    TickingClock,
    drop_triggers,
    foreign,
    jsonl_lines,
    make_journal,
    one_error_line,
    restore_triggers,
    run_cli,
    run_process,
    sample_session,
    short_session,
    snapshot,
    write_lines,
)

SUMMARY_KEYS = {
    "session_id",
    "agent",
    "status",
    "events",
    "steps",
    "failures",
    "started",
    "ended",
    "replay_of",
    "forked_from",
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A journal with a failed session ``s`` (14 events) and a completed ``short`` (5)."""
    return make_journal(tmp_path / "j.db", {"short": short_session(), "s": sample_session()})


@pytest.fixture
def exported(db: Path, tmp_path: Path) -> Path:
    """Session ``s`` exported to a JSONL file."""
    with Journal.open(db) as journal:
        data = export_session(journal, "s")
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    return path


# -- help --------------------------------------------------------------------------------


def test_the_group_help_lists_every_command_with_its_summary() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: agent-journal [OPTIONS] COMMAND [ARGS]...")
    commands = result.stdout.split("Commands:\n")[1].split("\n\n")[0]
    listed = {line.split()[0]: line for line in commands.splitlines()}
    assert set(listed) == set(cli.commands)
    for name, command in cli.commands.items():
        assert listed[name].split(maxsplit=1)[1] == command.get_short_help_str(limit=200)


def test_the_help_fits_80_columns_and_cuts_no_summary() -> None:
    for name in ["", *sorted(cli.commands)]:
        result = run_cli(*[name] * bool(name), "--help", env={"COLUMNS": "80"})
        assert result.exit_code == 0
        assert "..." not in result.stdout.split("\n\n", 1)[1], name  # past the usage line
        assert max(len(line) for line in result.stdout.splitlines()) <= 80, name


def test_the_top_level_help_describes_the_whole_tool_and_its_exit_codes() -> None:
    text = " ".join(run_cli("--help").stdout.split())
    for what in ("record", "replay", "diff", "tui", "fixture", "export, import and copy"):
        assert what in text
    assert "Exit codes: 0 ok, or identical 1 a finding" in text
    for code, meaning in EXIT_CODES:
        assert f" {code} {meaning}" in text
    assert [code for code, _ in EXIT_CODES] == [0, 1, 2, 3]


def test_the_top_level_overview_keeps_its_lines() -> None:
    lines = run_cli("--help", env={"COLUMNS": "80"}).stdout.splitlines()
    record = "    record   Capture (your own loop), the Recorder or the agent loop write"
    assert record in lines
    assert "    compare  diff aligns two runs and shows the first divergence" in lines
    assert not any("\\b" in line for line in lines)


def test_replay_says_it_takes_a_session_or_a_file() -> None:
    usage = run_cli("replay", "--help").stdout.splitlines()[0]
    assert usage == "Usage: agent-journal replay [OPTIONS] SESSION|FILE.jsonl"


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_has_help_that_reads_well(name: str) -> None:
    command = cli.commands[name]
    for flag in ("--help", "-h"):
        result = run_cli(name, flag)
        assert result.exit_code == 0, result.stderr
        assert result.stderr == ""
        assert result.stdout.startswith(f"Usage: agent-journal {name} ")
    summary = " ".join((command.help or "").strip().split("\n\n")[0].split())
    assert summary and summary[0].isupper() and summary.endswith("."), summary
    assert summary in " ".join(result.stdout.split())
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help and param.help.strip(), f"{name} {param.opts} has no help"


# -- sessions ----------------------------------------------------------------------------


def test_sessions_json_is_the_public_contract(db: Path) -> None:
    result = run_cli("sessions", "--db", db, "--json")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert [row["session_id"] for row in listed] == ["s", "short"]  # newest first
    for row in listed:
        assert SUMMARY_KEYS <= set(row)
    by_id = {row["session_id"]: row for row in listed}
    assert {k: by_id["s"][k] for k in SUMMARY_KEYS} == {
        "session_id": "s",
        "agent": "tests.agents:build",
        "status": "failed",
        "events": 14,
        "steps": 3,
        "failures": 2,
        "started": "2026-11-29T23:00:00.001000Z",
        "ended": "2026-11-29T23:00:00.001000Z",
        "replay_of": None,
        "forked_from": None,
    }
    assert (by_id["s"]["metadata"], by_id["s"]["halt_reason"]) == (
        {"user": "u1"},
        "ValueError: boom",
    )
    assert (by_id["short"]["metadata"], by_id["short"]["halt_reason"]) == ({}, None)
    with Journal.open(db) as journal:
        extra = ("metadata", "halt_reason")
        assert [{k: v for k, v in row.items() if k not in extra} for row in listed] == [
            s.model_dump(mode="json") for s in journal.sessions()
        ]


def test_sessions_filters_and_reads_the_db_from_the_environment(db: Path) -> None:
    env = {"AGENT_JOURNAL_DB": str(db)}
    for args, expected in [
        ((), ["s", "short"]),
        (("--status", "completed"), ["short"]),
        (("--agent", "tests.agents:build"), ["s"]),
        (("--limit", "1"), ["s"]),
        (("--status", "halted"), []),
    ]:
        result = run_cli("sessions", "--json", *args, env=env)
        assert result.exit_code == 0
        assert [row["session_id"] for row in json.loads(result.stdout)] == expected


def test_sessions_table(db: Path) -> None:
    result = run_cli("sessions", "--db", db)  # not a terminal: 400 columns, all but lineage
    assert result.exit_code == 0
    header, *rows = result.stdout.splitlines()
    assert header.replace("lat ms", "lat-ms").split() == [
        *("session", "agent", "status", "events", "steps", "fail", "ok%", "rep", "tokens"),
        *("cache%", "cost", "lat-ms", "started", "outcome", "meta"),
    ]
    assert rows[0].endswith("user=u1")
    assert [row.split()[:7] for row in rows] == [
        ["s", "tests.agents:build", "failed", "14", "3", "3", "25%"],
        ["short", "tests.agents:short", "completed", "5", "1", "0", "100%"],
    ]


def test_failed_model_calls_have_a_column_and_a_header_word(db: Path) -> None:
    """A 429 a retry absorbed is part of what happened: `mfail` in the listing, `show`'s
    header; not a tool failure (`fail`, `ok%` unchanged); the column only where one is."""
    failed = ModelCallFailed(message="RateLimitError: 429", status_code=429)
    with Journal.open(db) as journal:
        journal.append("retried", [SessionStarted(agent=None), failed, failed])
    header, *rows = run_cli("sessions", "--db", db).stdout.splitlines()
    names = header.replace("lat ms", "lat-ms").split()
    assert names.index("mfail") == names.index("ok%") + 1
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["retried"][names.index("mfail")] == "2"
    assert cells["retried"][names.index("fail")] == "0"
    assert cells["s"][names.index("mfail")] != "2"  # blank: the next column's cell
    by_id = {
        r["session_id"]: r for r in json.loads(run_cli("sessions", "--db", db, "--json").stdout)
    }
    assert (by_id["retried"]["model_failures"], by_id["s"]["model_failures"]) == (2, 0)
    shown = run_cli("show", "retried", "--db", db).stdout.splitlines()[0]
    assert "fail=0" in shown and "failed model calls=2" in shown
    with Journal.open(db) as journal:
        journal.erase("retried", reason="test")
    assert "mfail" not in run_cli("sessions", "--db", db).stdout.splitlines()[0]


@pytest.fixture
def story(tmp_path: Path) -> Path:
    """The refund story's sessions: over-refunded, crashed mid-turn, cut off, and a replay."""
    lookup = ToolCall(call_id="c1", tool="lookup_order", args={"order_id": "2210"})
    refund = ToolCall(call_id="c2", tool="issue_refund", args={"amount": 150.0, "order_id": "2210"})
    looked_up = ActionCommitted(
        call_id="c1", tool="lookup_order", args=lookup.args, result={"total": 100.0}
    )
    buggy = "agentloop.examples.refund:build_buggy"
    return make_journal(
        tmp_path / "story.db",
        {
            "refund-buggy": [
                SessionStarted(agent=buggy),
                UserInput(text="refund $150"),
                ActionProposed(calls=[lookup]),
                looked_up,
                ActionProposed(calls=[refund]),
                ActionCommitted(
                    call_id="c2", tool="issue_refund", args=refund.args, result={"id": "rf-1"}
                ),
                AgentCompleted(answer="Done: refunded $150.0 for order 2210."),
            ],
            "crashed": [
                SessionStarted(agent="agentloop.examples.crashy:build"),
                UserInput(text="go"),
                ActionProposed(calls=[lookup]),
                looked_up,
                ActionProposed(calls=[refund]),
                AgentHalted(rule="error", reason="the guard of issue_refund raised KeyError"),
            ],
            "cut-off": [
                SessionStarted(agent=buggy),
                UserInput(text="go"),
                ActionProposed(calls=[lookup]),
                looked_up,
            ],
            "refund-buggy.replay-1": [
                SessionStarted(
                    agent="agentloop.examples.refund:build_fixed", replay_of="refund-buggy"
                ),
                UserInput(text="refund $150"),
                AgentCompleted(answer="Refund of $100.0 issued."),
            ],
        },
    )


TABLES = {
    80: [  # the outcome says why a session failed: it stays, the time gives way
        "session                status     fail   ok%     cost  outcome",
        "refund-buggy.replay-1  completed     0     -  $0.0000  Refund of $100.0 issued.",
        "cut-off                running       0     ?  $0.0000  action_committed: lookup…",
        "crashed                failed        1   50%  $0.0000  error: the guard of issu…",
        "refund-buggy           completed     0  100%  $0.0000  Done: refunded $150.0 fo…",
    ],
    120: [
        "session                status     steps  fail   ok%  rep     cost  started"
        "              outcome",
        "refund-buggy.replay-1  completed      0     0     -    0  $0.0000  2026-11-29 23:00:00"
        "  Refund of $100.0 issued.",
        "cut-off                running        1     0     ?    0  $0.0000  2026-11-29 23:00:00"
        "  action_committed: lookup_order …",
        "crashed                failed         1     1   50%    0  $0.0000  2026-11-29 23:00:00"
        "  error: the guard of issue_refun…",
        "refund-buggy           completed      2     0  100%    0  $0.0000  2026-11-29 23:00:00"
        "  Done: refunded $150.0 for order…",
    ],
    160: [
        "session                status     events  steps  fail   ok%  rep  tokens     cost"
        "  started              outcome                           lineage",
        "refund-buggy.replay-1  completed       3      0     0     -    0       0  $0.0000"
        "  2026-11-29 23:00:00  Refund of $100.0 issued.          replay of refund-buggy",
        "cut-off                running         4      1     0     ?    0       0  $0.0000"
        "  2026-11-29 23:00:00  action_committed: lookup_order …",
        "crashed                failed          6      1     1   50%    0       0  $0.0000"
        "  2026-11-29 23:00:00  error: the guard of issue_refun…",
        "refund-buggy           completed       7      2     0  100%    0       0  $0.0000"
        "  2026-11-29 23:00:00  Done: refunded $150.0 for order…",
    ],
}


@pytest.mark.parametrize("width", sorted(TABLES))
def test_the_sessions_table_gives_way_by_priority_at_each_width(story: Path, width: int) -> None:
    result = run_cli("sessions", "--db", story, env={"COLUMNS": str(width)})
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == TABLES[width]


def test_the_docs_show_the_table_as_the_cli_prints_it() -> None:
    docs = (REPO / "docs" / "sessions.md").read_text()
    shown = docs.split("```text\n")[1].split("```")[0].splitlines()
    assert shown == TABLES[120]
    for name in COLUMNS:  # every column is explained there
        assert f"| `{name}` |" in docs


def test_wide_characters_take_two_cells_and_the_columns_still_line_up(tmp_path: Path) -> None:
    db = make_journal(
        tmp_path / "wide.db",
        {
            "narrow": short_session(),
            "wide": [
                SessionStarted(agent="代理:构建"),
                AgentCompleted(answer="日本語の回答です" * 8),
            ],
        },
    )
    for width in (60, 120, 400):
        lines = run_cli("sessions", "--db", db, env={"COLUMNS": str(width)}).stdout.splitlines()
        assert all(cell_len(line) <= width for line in lines)
        cost = {cell_len(line[: line.index("$")]) for line in lines[1:]}
        assert len(cost) == 1, lines  # the same cell on every row, past the wide agent
    assert "代理:构建" in lines[1] and lines[1].endswith("日本語の回答です" * 8)


def test_a_crash_counts_as_a_failure_and_a_session_without_an_ending_has_no_rate(
    story: Path,
) -> None:
    rows = {
        line.split()[0]: line.split()
        for line in run_cli("sessions", "--db", story).stdout.splitlines()[1:]
    }
    fail, ok = 5, 6  # session agent status events steps fail ok% ...
    assert (rows["crashed"][fail], rows["crashed"][ok]) == ("1", "50%")  # 1 committed, then raised
    assert (rows["cut-off"][2], rows["cut-off"][ok]) == ("running", "?")
    listed = {
        s["session_id"]: s for s in json.loads(run_cli("sessions", "--db", story, "--json").stdout)
    }
    assert listed["crashed"]["failures"] == 0  # --json keeps the fold's own count


def test_the_over_refund_reads_as_what_the_agent_did_not_as_a_clean_success(story: Path) -> None:
    rows = run_cli("sessions", "--db", story).stdout.splitlines()
    [buggy] = [row for row in rows if row.startswith("refund-buggy ")]
    assert buggy.rstrip().endswith("  Done: refunded $150.0 for order 2210.")


@pytest.fixture
def dated(tmp_path: Path) -> Path:
    """Sessions started in 2020 (``old``), on 2026-11-29 (``s``, ``short``) and now (``new``)."""
    path = make_journal(tmp_path / "dated.db", {"short": short_session(), "s": sample_session()})
    with Journal.open(path) as journal:
        journal.append("old", [SessionStarted(agent="x:y")], ts="2020-01-01T00:00:00.000000Z")
        journal.append("new", [SessionStarted(agent="x:y")])  # the system clock
    return path


def listed_ids(*args: object) -> list[str]:
    result = run_cli("sessions", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [row["session_id"] for row in json.loads(result.stdout)]


def test_since_and_until_take_rfc_3339_or_a_duration_ago(dated: Path) -> None:
    for args, expected in [
        (["--since", "2026-11-29T23:00:00Z"], ["new", "s", "short"]),
        (["--since", "2026-11-29t23:00:00.001+00:00"], ["new", "s"]),
        (["--since", "2026-11-30T00:00:00.001+01:00"], ["new", "s"]),  # 23:00:00.001 UTC
        (["--since", "2020-01-01", "--until", "2026-11-29"], ["old"]),
    ]:
        assert listed_ids("--db", dated, *args) == expected, args
    for args, expected in [  # durations: only "old" and "new" are far enough from any today
        (["--since", "1h"], ["new"]),
        (["--since", "1h30m", "--until", "1w"], []),  # since is after until
        (["--until", "2d"], ["old"]),
        (["--until", "90m", "--since", "100000d"], ["old"]),
        (["--since", "3600s", "--until", "0m"], ["new"]),  # 0m: now, after "new" started
    ]:
        found = listed_ids("--db", dated, *args)
        assert [x for x in found if x in ("old", "new")] == expected, args


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yesterday", "'yesterday' is not a time: give RFC 3339"),
        ("2026-11-29T23:00:00", "'2026-11-29T23:00:00' has no time zone: add Z (UTC)"),
        ("2026-13-01", "'2026-13-01': month must be in 1..12"),
        ("90", "'90' is not a time"),
        ("2d ago", "'2d ago' is not a time"),
        ("9999999d", "'9999999d': a duration that reaches before year 1"),
    ],
)
def test_a_time_that_is_neither_is_exit_2_with_one_line(
    dated: Path, value: str, message: str
) -> None:
    copy = ["copy", "--from", dated, "--to", dated.parent / "x.db"]
    for args in (
        ["sessions", "--db", dated, "--since"],
        ["sessions", "--until"],
        [*copy, "--since"],
    ):
        line = one_error_line(run_cli(*args, value, env={"AGENT_JOURNAL_DB": str(dated)}))
        assert f"Invalid value for '{args[-1]}': {message}" in line
    assert not (dated.parent / "x.db").exists()


def test_show_with_from_after_to_is_exit_2(db: Path) -> None:
    line = one_error_line(run_cli("show", "s", "--db", db, "--from", "5", "--to", "2"))
    assert line == (
        "agent-journal: Invalid value for '--to': 2 is before --from 5 "
        "(see agent-journal show --help)"
    )
    assert run_cli("show", "s", "--db", db, "--from", "2", "--to", "2").stdout.count("\n") == 2


def test_show_from_a_seq_after_the_session_names_its_range(db: Path) -> None:
    line = one_error_line(run_cli("show", "s", "--db", db, "--from", "14"))
    assert line == "agent-journal: session s: --from 14: no such seq (it has seqs 0..13)"
    assert run_cli("show", "s", "--db", db, "--from", "13", "--to", "99").stdout.count("\n") == 2


def test_state_at_a_seq_outside_the_session_names_its_range(db: Path) -> None:
    line = one_error_line(run_cli("state", "s", "--db", db, "--at", "-1"))
    assert line == "agent-journal: session s: --at -1: no such seq (it has seqs 0..13)"


def test_real_processes_exit_2_with_one_line_on_each_cli_edge(dated: Path) -> None:
    for args, message in [
        (["sessions", "--since", "yesterday"], "'yesterday' is not a time"),
        (["show", "s", "--from", "5", "--to", "2"], "2 is before --from 5"),
        (["state", "s", "--at", "-1"], "--at -1: no such seq (it has seqs 0..13)"),
        (["tui", "--diff", "s", "--db", dated], "--db is an option, not a session"),
    ]:
        done = run_process(*args, "--db", dated)
        assert (done.returncode, done.stdout) == (2, ""), args
        [line] = done.stderr.splitlines()
        assert line.startswith("agent-journal: ") and message in line


def test_the_default_db_is_in_the_working_directory(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(db.parent)
    db.rename("agent-journal.db")
    assert json.loads(run_cli("sessions", "--json").stdout)[0]["session_id"] == "s"


# -- show --------------------------------------------------------------------------------


def test_show_prints_one_line_per_event(db: Path) -> None:
    result = run_cli("show", "s", "--db", db)
    assert result.exit_code == 0
    header, *lines = result.stdout.splitlines()
    assert header.split()[:3] == ["s", "tests.agents:build", "failed"]
    assert "events=14 steps=3 fail=3" in header and "halt=error" in header  # as `sessions`
    assert [line.split()[0] for line in lines] == [str(seq) for seq in range(14)]
    assert [line.split()[2] for line in lines] == [e.type for e in sample_session()]
    assert lines[1].endswith("user_input          refund order 7")
    assert lines[4].endswith(
        "guard refund: amount ($150) exceeds the order total ($100); propose a refund of at "
        "most $100"
    )


def test_show_json_holds_the_summary_and_the_records(db: Path, exported: Path) -> None:
    result = run_cli("show", "s", "--db", db, "--json", "--from", "2", "--to", "4")
    assert result.exit_code == 0
    shown = json.loads(result.stdout)
    assert set(shown) == {"session", "events"}
    assert shown["session"]["session_id"] == "s"
    assert SUMMARY_KEYS <= set(shown["session"])
    assert shown["events"] == jsonl_lines(exported.read_bytes())[3:6]


# -- verify ------------------------------------------------------------------------------


def test_verify_of_an_intact_journal(db: Path) -> None:
    result = run_cli("verify", "--db", db)
    assert (result.exit_code, result.stdout) == (0, "ok: 2 session(s), 19 event(s) checked\n")
    result = run_cli("verify", "--db", db, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"ok": True, "problems": [], "sessions": 2, "events": 19}


@pytest.fixture
def tampered(db: Path) -> Path:
    """The journal with seq 5 of ``s`` removed behind its back."""
    with foreign(db) as conn:
        drop_triggers(conn)
        conn.execute("DELETE FROM events WHERE session_id = 's' AND seq = 5")
        restore_triggers(conn)
    return db


def test_verify_reports_findings_with_exit_1(tampered: Path) -> None:
    result = run_cli("verify", "--db", tampered, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False,
        "problems": [
            {
                "session_id": "s",
                "seq": 5,
                "kind": "removed",
                "message": "seq 5 missing before seq 6",
            }
        ],
        "sessions": 2,
        "events": 18,
    }
    result = run_cli("verify", "--db", tampered)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "session s seq 5: removed: seq 5 missing before seq 6",
        "1 problem(s): 2 session(s), 18 event(s) checked",
    ]
    assert run_cli("verify", "--db", tampered, "--session", "short").exit_code == 0
    assert (
        run_cli("verify", "--db", tampered, "--session", "short", "--session", "s").exit_code == 1
    )


# -- export and import -------------------------------------------------------------------


def test_export_to_a_file_and_to_stdout_give_the_same_bytes(
    db: Path, exported: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    result = run_cli("export", "s", "--db", db, "-o", out)
    assert result.exit_code == 0
    assert result.stdout == f"exported s: 14 events to {out}\n"
    assert out.read_bytes() == exported.read_bytes()
    result = run_cli("export", "s", "--db", db)
    assert result.stdout_bytes == exported.read_bytes()


@pytest.mark.parametrize("command", ["export", "fixture", "share"])
def test_an_output_that_names_a_folder_is_refused_not_written_as_a_file(
    db: Path, tmp_path: Path, command: str
) -> None:
    """`-o fixtures/` where no such folder is: one line, exit 2, no file called fixtures."""
    result = run_cli(command, "s", "--db", db, "-o", f"{tmp_path}/fixtures/")
    assert result.exit_code == 2
    assert "names a folder (it ends with a slash): give a file" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "fixtures").exists()


def test_import_reports_each_file_and_is_idempotent(exported: Path, tmp_path: Path) -> None:
    target = tmp_path / "new.db"
    result = run_cli("import", exported, "--db", target)
    assert (result.exit_code, result.stdout) == (0, f"imported s: 14 events ({exported})\n")
    result = run_cli("import", exported, "--db", target)
    assert (result.exit_code, result.stdout) == (0, f"imported s: already present ({exported})\n")
    with Journal.open(target) as journal:
        assert export_session(journal, "s") == exported.read_bytes()


def test_import_leaves_the_garbage_collector_as_it_found_it(exported: Path, tmp_path: Path) -> None:
    """The import command collects rarely while it runs (`_rare_collections`), then not."""
    before = (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled())
    bad = write_lines(tmp_path / "bad.jsonl", [b"not json"])
    assert run_cli("import", exported, bad, "--db", tmp_path / "new.db").exit_code == 2
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == before


def test_one_bad_file_fails_alone_and_the_exit_is_2(exported: Path, tmp_path: Path) -> None:
    bad = write_lines(tmp_path / "bad.jsonl", [b"not json"])
    target = tmp_path / "new.db"
    result = run_cli("import", bad, exported, "--db", target)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"agent-journal: {bad}:1: not valid JSON: Expecting value: line 1 column 1 (char 0)",
    ]
    assert result.stdout.splitlines() == [f"imported s: 14 events ({exported})"]
    with Journal.open(target) as journal:
        assert [s.session_id for s in journal.sessions()] == ["s"]


# -- exit codes and bad input ------------------------------------------------------------


def test_schema_prints_json_and_exits_0() -> None:
    result = run_cli("schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "agent-journal event record"


def _lines(exported: Path, index: int, **changes: Any) -> list[dict[str, Any] | bytes]:
    lines: list[dict[str, Any] | bytes] = list(jsonl_lines(exported.read_bytes()))
    edited = {k: v for k, v in lines[index].items() if k != "hash"}  # type: ignore[union-attr]
    lines[index] = {**edited, **changes}
    return lines


def _garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    return path


def _foreign_db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with foreign(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users(name) VALUES ('ada')")
    return path


def _lying_meta(tmp_path: Path) -> Path:
    path = tmp_path / "lying.db"
    with foreign(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('format', 'agent-journal'), ('schema_version', 'x')")
    return path


Case = Callable[[Path, Path, Path], tuple[list[object], Path, str]]
"""(db, exported file, tmp dir) -> (arguments, the file that must not change, error text)."""

BAD_INPUT: dict[str, Case] = {
    "malformed line": lambda db, f, tmp: (
        ["import", write_lines(tmp / "x.jsonl", [*_lines(f, 0)[:2], b'{"seq": 1,']), "--db", db],
        db,
        "x.jsonl:3: not valid JSON",
    ),
    "wrong hash": lambda db, f, tmp: (
        ["import", write_lines(tmp / "x.jsonl", _lines(f, 3, hash="a" * 64)), "--db", db],
        db,
        "x.jsonl:4: hash aaaaaaaaaaaa… does not match the chain",
    ),
    "unknown event type": lambda db, f, tmp: (
        ["import", write_lines(tmp / "x.jsonl", _lines(f, 2, type="tool_called")), "--db", db],
        db,
        "x.jsonl:3: unknown event type 'tool_called'",
    ),
    "newer event version": lambda db, f, tmp: (
        ["import", write_lines(tmp / "x.jsonl", _lines(f, 2, v=9)), "--db", db],
        db,
        "x.jsonl:3: event type 'user_input' v9 is newer than this code (v1)",
    ),
    "file that is not JSONL": lambda db, f, tmp: (
        ["import", _garbage(tmp), "--db", db],
        db,
        ":1: ",
    ),
    "SQLite file as JSONL": lambda db, f, tmp: (["import", db, "--db", db], db, "j.db:1: "),
    "missing file": lambda db, f, tmp: (
        ["import", tmp / "nope.jsonl", "--db", db],
        db,
        "nope.jsonl: no such file",
    ),
    "conflicting session": lambda db, f, tmp: (
        ["import", write_lines(tmp / "x.jsonl", _lines(f, 2, text="other")[:3]), "--db", db],
        db,
        "x.jsonl: session s: exists already with different content",
    ),
    "not a journal (sessions)": lambda db, f, tmp: (
        ["sessions", "--db", _foreign_db(tmp)],
        tmp / "app.db",
        "app.db: is a SQLite database but not an agent-journal journal (tables: users)",
    ),
    "not a journal (import)": lambda db, f, tmp: (
        ["import", f, "--db", _foreign_db(tmp)],
        tmp / "app.db",
        "app.db: is a SQLite database but not an agent-journal journal (tables: users)",
    ),
    "a meta table that lies": lambda db, f, tmp: (
        ["sessions", "--db", _lying_meta(tmp)],
        tmp / "lying.db",
        "lying.db: has a meta table but its schema_version 'x' is not a number",
    ),
    "garbage --db (verify)": lambda db, f, tmp: (
        ["verify", "--db", _garbage(tmp)],
        tmp / "garbage.db",
        "garbage.db: not a SQLite journal (file is not a database)",
    ),
    "garbage --db (import)": lambda db, f, tmp: (
        ["import", f, "--db", _garbage(tmp)],
        tmp / "garbage.db",
        "garbage.db: not a SQLite journal (file is not a database)",
    ),
    "missing journal (sessions)": lambda db, f, tmp: (
        ["sessions", "--db", tmp / "none.db"],
        tmp / "none.db",
        "none.db: no journal here (the file does not exist)",
    ),
    "missing journal (show)": lambda db, f, tmp: (
        ["show", "s", "--db", tmp / "none.db"],
        tmp / "none.db",
        "none.db: no journal here",
    ),
    "missing journal (export)": lambda db, f, tmp: (
        ["export", "s", "--db", tmp / "none.db", "-o", tmp / "out.jsonl"],
        tmp / "none.db",
        "none.db: no journal here",
    ),
    "a directory as --db": lambda db, f, tmp: (
        ["verify", "--db", tmp],
        db,
        "is a directory, not a journal file",
    ),
    "unknown session (show)": lambda db, f, tmp: (
        ["show", "nope", "--db", db],
        db,
        f"session nope: not in {db}",
    ),
    "unknown session (export)": lambda db, f, tmp: (
        ["export", "nope", "--db", db, "-o", tmp / "out.jsonl"],
        db,
        f"session nope: not in {db}",
    ),
    "unknown session (verify)": lambda db, f, tmp: (
        ["verify", "--session", "nope", "--db", db],
        db,
        f"session nope: not in {db}",
    ),
    "a URL of another database (sessions)": lambda db, f, tmp: (
        ["sessions", "--db", "mysql://app:s3cret@db.internal/journals"],
        db,
        "mysql:// is not a journal location: give a SQLite file path or a postgresql:// URL",
    ),
    "a SQLAlchemy URL (init)": lambda db, f, tmp: (
        ["init", "--db", "postgresql+psycopg://app@db.internal/journals"],
        db,
        "postgresql+psycopg:// is not a journal location: give a SQLite file path or a "
        "postgresql:// URL",
    ),
    "an empty --db (a shell variable that is not set)": lambda db, f, tmp: (
        ["sessions", "--db", ""],
        db,
        "Invalid value for '--db': empty: give a SQLite file path or a postgresql:// URL",
    ),
    "an empty --to (copy)": lambda db, f, tmp: (
        ["copy", "--from", db, "--to", ""],
        db,
        "Invalid value for '--to': empty: give a SQLite file path or a postgresql:// URL",
    ),
    "export into a missing directory": lambda db, f, tmp: (
        ["export", "s", "--db", db, "-o", tmp / "missing" / "s.jsonl"],
        db,
        "missing/s.jsonl: cannot write: No such file or directory",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    db: Path, exported: Path, tmp_path: Path, case: str
) -> None:
    args, watched, error = BAD_INPUT[case](db, exported, tmp_path)
    before = snapshot(watched)
    line = one_error_line(run_cli(*args))
    assert error in line
    assert snapshot(watched) == before
    assert not (tmp_path / "out.jsonl").exists()


@pytest.fixture
def locked(db: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[sqlite3.Connection]:
    """The journal write-locked by a foreign connection; our busy timeout cut to 0.1 s."""
    defaults = SQLiteJournal.__init__.__kwdefaults__
    assert defaults is not None
    monkeypatch.setitem(defaults, "busy_timeout_ms", 100)
    with foreign(db) as conn:
        conn.execute("BEGIN IMMEDIATE")
        yield conn
        conn.execute("ROLLBACK")


def test_a_locked_journal_refuses_an_import_and_keeps_readers_going(
    db: Path, exported: Path, tmp_path: Path, locked: sqlite3.Connection
) -> None:
    before = snapshot(db)
    line = one_error_line(run_cli("import", exported, "--db", db))
    assert line == (
        f"agent-journal: {db}: database is locked by another writer (begin): waited 0.1 s"
        f" (the busy timeout); held by pid {os.getpid()} (this process, another connection)"
    )
    assert snapshot(db) == before
    assert run_cli("sessions", "--db", db).exit_code == 0  # WAL: reads go on


# -- untrusted text is shown, never interpreted ------------------------------------------

HOSTILE = "[bold red]boom[/bold red] \x1b[31mred\x1b[0m \x07 \x1b]8;;http://x\x1b\\link [link=x]y"


def test_markup_and_escape_sequences_are_printed_literally(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    with Journal.open(db, clock=TickingClock()) as journal:
        journal.append(
            "s", [SessionStarted(agent=f"evil:{HOSTILE}"), UserInput(text=f"{HOSTILE}\nline 2")]
        )
    for args in (["show", "s"], ["sessions"], ["show", "\x1b[2Jnope"]):
        result = run_cli(*args, "--db", db)
        output = result.stdout + result.stderr
        for raw in ("\x1b", "\x07"):
            assert raw not in output
        if args[-1] != "\x1b[2Jnope":
            assert "[bold red]boom[/bold red] \\x1b[31mred\\x1b[0m \\x07" in output
            assert "[link=x]y" in output
    assert one_error_line(result) == f"agent-journal: session \\x1b[2Jnope: not in {db}"


def test_a_file_name_with_a_newline_still_gives_one_error_line(db: Path, tmp_path: Path) -> None:
    one_error_line(run_cli("import", tmp_path / "a\nb.jsonl", "--db", db))


# -- a real process ----------------------------------------------------------------------


def test_a_real_process_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    done = run_process("verify", "--db", _garbage(tmp_path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"agent-journal: {tmp_path / 'garbage.db'}: not a SQLite journal (file is not a database)\n"
    )


def test_a_real_process_reports_findings_with_exit_1(tampered: Path) -> None:
    done = run_process("verify", "--db", tampered, "--json")
    assert (done.returncode, json.loads(done.stdout)["ok"], done.stderr) == (1, False, "")


def test_ctrl_c_while_the_console_script_loads_is_one_line_and_exit_130() -> None:
    """The console script catches an interrupt in its imports (about 0.3 s of a start)."""
    import tomllib

    script = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = script["agent-journal"].split(":")
    code = f"""
import importlib, sys

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "journal":
            raise KeyboardInterrupt

sys.meta_path.insert(0, CtrlC())
sys.argv = ["agent-journal", "sessions"]
getattr(importlib.import_module({module!r}), {function!r})()
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert (done.returncode, done.stderr, done.stdout) == (130, "agent-journal: interrupted\n", "")


@pytest.mark.parametrize(
    ("command", "first_line", "code"),
    [
        (["show", "s"], b"s ", 0),
        (["export", "s"], b'{"agent":', 0),  # bytes written to stdout's buffer
        (["diff", "s", "t"], b"--- s", EXIT_FINDING),  # the verdict survives `| head -1`
    ],
)
def test_a_reader_that_goes_away_keeps_the_commands_exit_code(
    tmp_path: Path, command: list[str], first_line: bytes, code: int
) -> None:
    db = tmp_path / "j.db"
    with Journal.open(db) as journal:
        for session, letter in (("s", "x"), ("t", "y")):
            journal.append(
                session, [SessionStarted(), *(UserInput(text=letter * 200) for _ in range(3000))]
            )
    process = subprocess.Popen(
        [sys.executable, "-c", "from tui.cli import main; main()", *command, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith(first_line)
    process.stdout.close()  # like `| head -1`: the rest of the output (MBs) meets a closed pipe
    assert process.wait(timeout=60) == code
    assert process.stderr.read() == b""
    process.stderr.close()


def test_counts_in_messages_are_plural_but_for_one() -> None:
    assert [counted(n, "session") for n in (0, 1, 2, 1000)] == [
        "0 sessions",
        "1 session",
        "2 sessions",
        "1000 sessions",
    ]
