"""The speed bench still runs (smallest settings, in a subprocess); no timing is asserted."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "journal_bench.py"


def test_bench_runs_and_prints_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--events", "300", "--per-event", "60", "--repeat", "1"]
        + ["--steps", "20"]
        + ["--memory", "200", "400"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for row in (
        "(a) raw executemany, one transaction",
        "(b) raw commit per event",
        "(b+) (b) + our triggers + projection row",
        "(c) Journal.append",
        "(d) Journal.append, 1 event/call",
        "(r) raw: two bare INSERT+COMMITs",
        "(s) Recorder model_output + tool_result",
        "(e) raw SELECT + orjson.loads",
        "(f) Journal.events (validated)",
        "(g) fold(Journal.events)",
    ):
        assert row in out, out
    assert "µs/event" in out and "ratio" in out
    assert "streamed + folded events" in out and "WAL pages per one-event commit: ours" in out
    assert "memory flat (200 vs 400 events)" in out


def _tables(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with closing(sqlite3.connect(path)) as conn:
        events = conn.execute("SELECT * FROM events ORDER BY pos").fetchall()
        sessions = conn.execute("SELECT * FROM sessions ORDER BY session_id").fetchall()
    return events, sessions


def test_the_per_event_floor_writes_what_a_one_event_append_writes(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import journal_bench as bench
        from _common import interleave, workload
    finally:
        sys.path.remove(str(BENCH.parent))
    order = interleave(workload(120))
    bench.ours_per_event(tmp_path / "ours.db", order)
    bench.floor_per_event(tmp_path / "floor.db", bench.floor_steps(order))
    ours, floor = _tables(tmp_path / "ours.db"), _tables(tmp_path / "floor.db")
    assert len(ours[0]) == 120 and len(ours[1]) > 1
    assert floor == ours


def test_quick_ratios_give_the_journal_lines_of_run_all() -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import journal_bench as bench
    finally:
        sys.path.remove(str(BENCH.parent))
    found = bench.quick_ratios()
    assert [(r.what, r.clock, r.target) for r in found] == [
        ("one-event Journal.append", "cpu", "≤ 2×"),
        ("Journal.append, 1000 events/call", "cpu", "≤ 1.8×"),
        ("Recorder step (model_output + tool_result)", "cpu", "≤ 3×"),
        ("WAL pages per one-event commit", "pages", "≤ 1.05×"),
    ]
    assert all(r.ratio > 0 and r.met in ("yes", "NO") for r in found)


def test_the_import_bench_prints_a_row_per_format_against_the_raw_parse() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH.parent / "import_bench.py"), "--formats-only"]
        + ["--formats-events", "200"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {
        line.split("|")[1].strip(): line
        for line in done.stdout.splitlines()
        if line.startswith("| ") and "format" not in line
    }
    assert sorted(rows) == ["atif", "jsonl", "openai", "otlp"], done.stdout
    assert "wall s: import / orjson.loads" in done.stdout
    assert "peak MB: import / orjson.loads" in done.stdout
    written = [int(line.split("|")[3].replace(",", "")) for line in rows.values()]
    assert all(count > 0 for count in written), done.stdout  # every file imported something


def test_the_user_code_bench_runs_and_prints_every_row() -> None:
    bench = BENCH.parent / "user_code_bench.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--sessions", "2", "--steps", "20", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for row in (
        "(a) | the loop, bare client",
        "(c) | replay of every session",
        "(e) | the same step",
    ):
        assert row in done.stdout, done.stdout


def test_the_long_session_bench_runs_both_sides_and_restores_the_setting() -> None:
    bench = BENCH.parent / "long_session_bench.py"
    code = (
        f"import sys; sys.path.insert(0, {str(bench.parent)!r}); import long_session_bench as b; "
        "import journal._sqlstore as s; b.main(['--lengths', '60', '--appends', '40', "
        "'--repeat', '1']); print('after', s.STATE_EVERY)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "(b) every append, µs/append" in done.stdout
    assert "|             60 |" in done.stdout
    assert done.stdout.rstrip().endswith("after 32"), done.stdout


def test_the_search_bench_runs_and_prints_its_reference() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH.parent / "search_bench.py"), "--events", "1500"]
        + ["--per-session", "50", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for row in ("index build: first refresh_search_index", "catch-up: refresh after 1,000 more"):
        assert row in done.stdout
    assert "(rare), ranked" in done.stdout and "every row" in done.stdout


INSTRUCTIONS = BENCH.with_name("instructions.py")


@pytest.mark.parametrize("case", ["one-event", "batched"])
@pytest.mark.parametrize("side", ["ours", "raw"])
def test_each_case_of_the_instruction_bench_runs_as_its_child(case: str, side: str) -> None:
    """What valgrind runs, run without it (valgrind itself makes each run ~15 s)."""
    command = [sys.executable, str(INSTRUCTIONS), "--child", case, side, "3", "6"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_instruction_bench_without_valgrind_says_so(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # no valgrind on it
    done = subprocess.run(
        [sys.executable, str(INSTRUCTIONS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "instructions: valgrind is not installed (apt install valgrind)\n"


def test_the_langgraph_bench_runs_quick() -> None:
    out = _quick("langgraph_bench.py", "--quick")
    for row in ("(a) SqliteSaver alone", "(b) SqliteSaver + the journal's capture", "(c) the"):
        assert row in out


def _quick(script: str, *args: str) -> str:
    """Run bench ``script`` at its smallest settings; its stdout (the run must succeed)."""
    done = subprocess.run(
        [sys.executable, str(BENCH.parent / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_anthropic_bench_runs_quick() -> None:
    out = _quick("anthropic_bench.py", "--calls", "3", "--repeat", "1")
    assert "bare client" in out and "captured client" in out and "ratio" in out


def test_the_genai_bench_runs_quick() -> None:
    out = _quick("genai_bench.py", "--calls", "3", "--repeat", "1")
    assert "bare client" in out and "captured client" in out and "ratio" in out


def test_the_share_bench_runs_quick() -> None:
    out = _quick("share_bench.py", "--repeat", "1", "--small", "10", "--big", "200")
    for row in ("| 10 events", "| 200 events", "| big / small"):
        assert row in out, out
