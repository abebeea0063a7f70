"""`agent-journal import` and `copy` against a raw streaming import: wall time and peak memory.

Writes JSONL exports of one session of N events (the realistic workload of `_common`, each
event at its type's current version, as an export writes them), then runs, each in a child
process whose wall time and peak RSS (``os.wait4``) are read:

- ``agent-journal import`` of the file into a new SQLite journal (the whole process: start,
  parse, checks, fold, writes, commit);
- ``agent-journal copy`` of that journal's session into another new SQLite journal;
- the raw reference, ``bench/raw_import.py``: a streaming orjson parse of each line, the
  sha256 chain and an ``executemany`` of the same rows into a bare table, in batches, one
  transaction.

Targets (issue 21): import wall ≤ 3× the raw script's at 200k events; peak RSS under 100 MB
at 1M events and less than 10 MB more than at 100k, for import and copy alike.

Then one row per format the import reads (jsonl, openai, otlp, atif: `bench/format_import.py`),
each file's import against ``orjson.loads`` of the same file (``--formats-only``: that alone).

    python bench/import_bench.py [--quick] [--wall-events N] [--rounds N]
        [--formats-events N] [--formats-only]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from _common import GENESIS, TS, Ratio, Report, Table, machine, report, session_events
from format_import import format_rows

from journal.canonical import dumps_canonical
from journal.fold import fold

RAW_IMPORT = Path(__file__).resolve().with_name("raw_import.py")
"""The raw reference script."""
CLI = Path(sys.executable).with_name("agent-journal")
RSS_BUDGET = (10.0, 900_000)
"""Target: at most 10 MB more peak RSS over 900k more events (100k to 1M)."""


def write_export(path: Path, events: int) -> None:
    """Write a JSONL export of one session of ``events`` realistic events to ``path``."""
    session_id = "bench-import"
    status = fold(session_events(0, events)).status
    header = {"format": "agent-journal", "format_version": 1, "session_id": session_id}
    header["status"] = status
    chain = GENESIS
    with path.open("wb") as out:
        out.write(dumps_canonical(header) + b"\n")
        for seq, event in enumerate(session_events(0, events)):
            record = dict(event.model_dump(mode="json"), session_id=session_id, seq=seq)
            record.update(ts=TS, v=type(event).VERSION)
            body = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
            digest = hashlib.sha256(chain.encode("ascii"))
            digest.update(body)
            chain = digest.hexdigest()
            out.write(dumps_canonical({**record, "hash": chain}) + b"\n")


def peak_rss(command: list[str]) -> tuple[float, float]:
    """Run ``command``; return its peak RSS in MB and its wall time in seconds."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    assert child.stderr is not None
    errors = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({child.returncode}): {errors[-2000:]}")
    return usage.ru_maxrss / 1024, wall


def ours(export: Path, db: Path) -> tuple[float, float]:
    """Peak RSS (MB) and wall time (s) of ``agent-journal import`` of ``export`` into ``db``."""
    return peak_rss([str(CLI), "import", str(export), "--db", str(db)])


def raw(export: Path, db: Path) -> tuple[float, float]:
    """Peak RSS (MB) and wall time (s) of the raw reference importing ``export`` into ``db``."""
    return peak_rss([sys.executable, str(RAW_IMPORT), str(export), str(db)])


def export_of(folder: Path, events: int) -> Path:
    """The export of ``events`` events in ``folder``, written once."""
    path = folder / f"export-{events}.jsonl"
    if not path.exists():
        write_export(path, events)
    return path


def wall_ratios(folder: Path, events: int, rounds: int) -> list[tuple[float, float]]:
    """Per round, the wall times of our import and of the raw script, taking turns."""
    export = export_of(folder, events)
    times = []
    for run in range(rounds):
        _, mine = ours(export, folder / f"wall-ours-{events}-{run}.db")
        _, theirs = raw(export, folder / f"wall-raw-{events}-{run}.db")
        times.append((mine, theirs))
    return times


def memory_row(events: int, folder: Path) -> list[str]:
    """One row of the memory table: the file's size and each child's peak RSS and wall time."""
    export = export_of(folder, events)
    mine, mine_wall = ours(export, folder / f"ours-{events}.db")
    copy = [str(CLI), "copy", "--from", str(folder / f"ours-{events}.db")]
    copied, _ = peak_rss([*copy, "--to", str(folder / f"copy-{events}.db")])
    theirs, theirs_wall = raw(export, folder / f"raw-{events}.db")
    size = export.stat().st_size / 2**20
    return [
        f"{events:,}",
        f"{size:.0f}",
        f"{mine:.0f}",
        f"{theirs:.0f}",
        f"{copied:.0f}",
        f"{mine_wall:.1f} / {theirs_wall:.1f}",
    ]


def rss_budget_used(small: int, large: int, folder: Path) -> tuple[float, float, float]:
    """Our import's peak RSS at ``small`` and ``large`` events, and the share of the budget.

    The budget (`RSS_BUDGET`: 10 MB over the 900k events from 100k to 1M) scaled to the
    events between the two sizes; 1.0 uses all of it.
    """
    low, _ = ours(export_of(folder, small), folder / f"rss-{small}.db")
    high, _ = ours(export_of(folder, large), folder / f"rss-{large}.db")
    megabytes, per = RSS_BUDGET
    return low, high, (high - low) / (megabytes * (large - small) / per)


def quick_ratios() -> list[Ratio]:
    """The import's two lines of `bench/run_all.py`: wall against the raw script, RSS growth.

    Wall: 100k events, the median of two rounds. RSS: our import at 10k and 100k events,
    its growth as a share of the target's budget (10 MB per 900k events) scaled to 90k.
    """
    with tempfile.TemporaryDirectory(prefix="import-bench-") as temp:
        folder = Path(temp)
        times = wall_ratios(folder, 100_000, 2)
        _, _, used = rss_budget_used(10_000, 100_000, folder)
    return [
        Ratio(
            what="`agent-journal import` of 100k events (whole process)",
            reference="bench/raw_import.py on the same file",
            clock="wall",
            ratio=statistics.median(mine / theirs for mine, theirs in times),
            target="≤ 3×",
        ),
        Ratio(
            what="import peak RSS growth, 10k to 100k events",
            reference="the target's budget (1M - 100k < 10 MB) scaled to 90k events",
            clock="rss",
            ratio=used,
            target="≤ 1×",
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k and 100k events")
    parser.add_argument("--wall-events", type=int, default=200_000, help="for the wall ratio")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the wall ratio")
    parser.add_argument(
        "--formats-events", type=int, default=20_000, help="events of the per-format rows"
    )
    parser.add_argument("--formats-only", action="store_true", help="the per-format rows alone")
    args = parser.parse_args()
    sizes = (20_000, 100_000) if args.quick else (100_000, 1_000_000)
    wall_events = 20_000 if args.quick else args.wall_events
    formats_events = min(args.formats_events, 5_000) if args.quick else args.formats_events
    with tempfile.TemporaryDirectory(prefix="import-bench-") as temp:
        folder = Path(temp)
        formats = format_rows(folder, formats_events, peak_rss, CLI)
        if args.formats_only:
            return report(Report([[machine()], [formats]]))
        times = wall_ratios(folder, wall_events, args.rounds)
        rows = [memory_row(events, folder) for events in sizes]
    ratios = [mine / theirs for mine, theirs in times]
    ratio = statistics.median(ratios)
    wall = Table(
        ["what", "wall s (median)>", "ratio (median of rounds)>", "target", "met"],
        [
            [
                f"`agent-journal import` of {wall_events:,} events / bench/raw_import.py",
                f"{statistics.median(t[0] for t in times):.2f} / "
                f"{statistics.median(t[1] for t in times):.2f}",
                f"{ratio:.2f}×",
                "≤ 3×",
                "yes" if ratio <= 3 else "no",
            ]
        ],
    )
    growth = (
        f"peak RSS growth {sizes[0]:,} -> {sizes[-1]:,} events: "
        f"import {float(rows[-1][2]) - float(rows[0][2]):.0f} MB, "
        f"copy {float(rows[-1][4]) - float(rows[0][4]):.0f} MB, "
        f"raw {float(rows[-1][3]) - float(rows[0][3]):.0f} MB"
    )
    memory = Table(
        [
            "events>",
            "file MB>",
            "import peak MB>",
            "raw peak MB>",
            "copy peak MB>",
            "wall s: import / raw>",
        ],
        rows,
    )
    rounds = f"rounds: {', '.join(f'{r:.2f}×' for r in ratios)}"
    return report(Report([[machine()], [wall, rounds], [memory], [growth], [formats]]))


if __name__ == "__main__":
    raise SystemExit(main())
