"""The capture bench still runs (``--quick``, in a subprocess); no timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "capture_bench.py"


def test_the_capture_bench_runs_and_prints_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = (
        "(a) bare loop",
        "(b) Capture",
        "(c) (b) + redaction",
        "(d) (b) + sampling",
        "(e) (b) + sampling",
        "(f) journal unreachable",
        "(g) Capture, fail closed",
        "(h) Journal.append",
        "(i) Spool.append",
    )
    for row in rows:
        assert row in done.stdout, done.stdout
