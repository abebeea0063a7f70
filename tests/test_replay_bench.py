"""A smoke run of bench/replay_bench.py at tiny sizes (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys

from .helpers import REPO


def test_replay_bench_runs_and_prints_every_row() -> None:
    done = subprocess.run(
        [sys.executable, "bench/replay_bench.py", "--steps", "20", "--events", "700"]
        + ["--loop", "300", "--repeat", "1", "--queries", "5"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: a target was missed on this machine
    lines = done.stdout.splitlines()
    assert "median of 1 runs" in lines[0]
    rows = {line.split("|")[1].strip(): line for line in lines[3:] if line.startswith("| (")}
    assert list(rows) == [f"({key})" for key in "abcdefghijk"]
    assert "original run, 20 steps (47 events)" in rows["(a)"]
    assert "≤ 2× (a)" in rows["(b)"]
    assert "refold from 0 (700 events)" in rows["(d)"]
    assert "< 1 s" in rows["(h)"]
    assert "two 300-event loops" in rows["(j)"]
