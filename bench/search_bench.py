"""Full-text search over a large journal: building the index, and the first results of a query,
against a plain ``LIKE`` scan of the same rows in the same run.

    python bench/search_bench.py [--events N] [--per-session N] [--repeat R] [--db TARGET]

The journal (SQLite by default, in a temporary directory; ``--db postgresql://...`` for a
PostgreSQL schema, which must be empty) gets ``--events`` realistic events (`_common`'s
support-agent sessions: user inputs, proposals, tool results, failures, answers), appended
one session per call. Then:

* index build: the first `Journal.refresh_search_index` over all of them (what the first
  ``agent-journal search`` of the journal pays), and the index's size on disk (SQLite);
* catch-up: another 1,000 events appended, then the next refresh (what a later search pays);
* first results: ``Journal.search(query, limit=20)``, ranked, on an up-to-date index, for a
  rare word (an id in a few events) and a common one (in most sessions);
* the reference: ``SELECT session_id, seq FROM events WHERE body LIKE '%word%'`` on the
  same rows, its first 20 rows (unranked: it stops at the 20th match) and all of them (what
  ranking or a rare word needs: every body read).

Query times are the median of ``--repeat`` runs, the cases taking turns.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import Report, Table, disk_bytes, machine, report, session_events

from journal import Journal, SearchFilters

CATCH_UP = 1_000
LIMIT = 20


def fill(journal: Journal, events: int, per: int, prefix: str) -> int:
    """Append ``events`` events in sessions of ``per`` (one append each); return sessions."""
    sessions = 0
    while events > 0:
        count = min(per, events)
        journal.append(f"{prefix}-{sessions:06d}", list(session_events(sessions, count)))
        events -= count
        sessions += 1
    return sessions


def rare_word(journal: Journal) -> str:
    """An id of the workload's tool arguments that occurs in a few events."""
    for row in journal.stored_events(journal.sessions(limit=1)[0].session_id):
        if '"id":"A-' in row.body:
            return row.body.split('"id":"', 1)[1].split('"', 1)[0]
    raise SystemExit("the workload has no tool call ids")


def like_scan(target: str) -> Callable[[str, int | None], int]:
    """A raw connection's ``LIKE`` over the events' bodies: (word, limit) -> rows found."""
    if target.startswith("postgresql://"):
        import psycopg

        conn: Any = psycopg.connect(target, autocommit=True)
        mark = "%s"
    else:
        conn = sqlite3.connect(target)
        mark = "?"

    def scan(word: str, limit: int | None) -> int:
        text = f"SELECT session_id, seq FROM events WHERE body LIKE {mark}"
        if limit is not None:
            text += f" LIMIT {limit}"
        return len(conn.execute(text, (f"%{word}%",)).fetchall())

    return scan


def timed(action: Callable[[], object]) -> tuple[float, object]:
    """Seconds ``action`` took, and what it returned."""
    start = time.perf_counter()
    found = action()
    return time.perf_counter() - start, found


def run(target: str, events: int, per: int, repeat: int) -> Report:
    """Fill the journal, build and catch up the index, and time the queries."""
    with Journal.open(target) as journal:
        where = journal.target
        fill_s, sessions = timed(lambda: fill(journal, events, per, "bench"))
        size_before = disk_bytes(Path(target)) if "://" not in target else 0
        build_s, indexed = timed(journal.refresh_search_index)
        size_after = disk_bytes(Path(target)) if "://" not in target else 0
        fill(journal, CATCH_UP, per, "late")
        catch_s, caught = timed(journal.refresh_search_index)
        rare, common = rare_word(journal), "refund"
        scan = like_scan(target)
        cases: dict[str, Callable[[], object]] = {
            f"search {rare!r} (rare), ranked": lambda: journal.search(rare, limit=LIMIT),
            f"search {common!r} (common), ranked": lambda: journal.search(common, limit=LIMIT),
            f"search {common!r}, --type user_input": lambda: journal.search(
                common, SearchFilters(type="user_input"), limit=LIMIT
            ),
            f"LIKE '%{rare}%', first {LIMIT} rows": lambda: scan(rare, LIMIT),
            f"LIKE '%{rare}%', every row": lambda: scan(rare, None),
            f"LIKE '%{common}%', first {LIMIT} rows": lambda: scan(common, LIMIT),
            f"LIKE '%{common}%', every row": lambda: scan(common, None),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        counts: dict[str, int] = {}
        for _ in range(repeat):
            for name, case in cases.items():
                seconds, found = timed(case)
                times[name].append(seconds)
                counts[name] = found if isinstance(found, int) else len(found)  # type: ignore[arg-type]
    median = {name: statistics.median(values) * 1000 for name, values in times.items()}
    reference = f"LIKE '%{rare}%', every row"
    rows = [
        [name, f"{counts[name]:,}", f"{ms:,.1f}", f"{ms / median[reference]:.3f}×"]
        for name, ms in median.items()
    ]
    build = [
        [
            "fill: Journal.append, one session per call",
            f"{events:,}",
            f"{fill_s:,.1f}",
            f"{fill_s / events * 1e6:,.0f}",
        ],  # fmt: skip
        [
            "index build: first refresh_search_index",
            f"{indexed:,}",
            f"{build_s:,.1f}",
            f"{build_s / max(indexed, 1) * 1e6:,.0f}",
        ],  # fmt: skip
        [
            f"catch-up: refresh after {CATCH_UP:,} more",
            f"{caught:,}",
            f"{catch_s:,.2f}",
            f"{catch_s / max(caught, 1) * 1e6:,.0f}",
        ],  # fmt: skip
    ]
    lines = [
        f"{events:,} events in {sessions:,} sessions ({per} per session) on {where}",
        machine(),
    ]
    if size_after:
        grown = (size_after - size_before) / 2**20
        lines.append(
            f"disk: {size_before / 2**20:,.0f} MiB journal, +{grown:,.0f} MiB search index"
        )
    return Report(
        [
            lines,
            [Table(["", "events>", "seconds>", "µs/event>"], build)],
            [
                f"first results (limit {LIMIT}), median of {repeat} runs; ratio to a full "
                "LIKE scan for the rare word:",
                Table(["query", "rows>", "ms>", "ratio>"], rows),
            ],
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--per-session", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", help="journal to fill (default: a new SQLite file)")
    args = parser.parse_args(argv)
    if args.db:
        return report(run(args.db, args.events, args.per_session, args.repeat))
    with tempfile.TemporaryDirectory(prefix="search-bench-") as folder:
        return report(
            run(str(Path(folder) / "bench.db"), args.events, args.per_session, args.repeat)
        )


if __name__ == "__main__":
    sys.exit(main())
