"""The TUI bench runs end to end (tiny sizes, one run; no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_bench_builds_its_journal_measures_both_sessions_and_prints_a_table(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "bench/tui_bench.py", "--small", "10", "--big", "300"]
    command += ["--repeat", "1", "--cache", str(tmp_path)]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[:5]]
    assert cells[0] == ["session", "events", "first paint", "jump to end", "peak RSS"]
    assert [row[:2] for row in (cells[2], cells[3])] == [
        ["bench-small", "10"],
        ["bench-big", "300"],
    ]
    assert cells[4][0] == "big / small"
    assert lines[5].startswith("targets (big within 1.5x of small, peak under 200 MB): ")
    assert [path.name for path in tmp_path.glob("*.db")] == ["agent-journal-tui-bench-10-300.db"]
