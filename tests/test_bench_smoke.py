"""The speed bench still runs (smallest settings, in a subprocess); no timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "journal_bench.py"


def test_bench_runs_and_prints_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--events", "300", "--per-event", "60", "--repeat", "1"]
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
        "(c) Journal.append",
        "(d) Journal.append, 1 event/call",
        "(e) raw SELECT + orjson.loads",
        "(f) Journal.events (validated)",
        "(g) fold(Journal.events)",
    ):
        assert row in out, out
    assert "µs/event" in out and "ratio" in out
    assert "streamed + folded events" in out
    assert "memory flat (200 vs 400 events)" in out
