"""One-event appends late in a long session: the state JSON every 32 events, or every one.

    python bench/long_session_bench.py [--lengths 500 2000 10000] [--appends 200] [--repeat 3]

A session's folded state grows with it (its repeat counters), and the projection row holds
it as JSON. For each length L, a session of L - ``--appends`` events is written in one call
(untimed), then ``--appends`` one-event appends are timed (CPU), on two journals in turn:

  (a) ours: the state JSON written when the last seq reaches a multiple of `STATE_EVERY`;
  (b) reference: the same journal written with ``STATE_EVERY = 1``, the state JSON on every
      append (as every append wrote it before).

Medians of per-round ratios (a)/(b), the two taking turns every round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import CLOCK, MOMENT, Report, Table, machine, report, session_events

import journal._sqlstore as sqlstore
from journal import AgentEvent, Journal
from journal.projection import state_json

STATE_EVERY = sqlstore.STATE_EVERY


def appends_late(path: Path, events: list[AgentEvent], appends: int, every: int) -> float:
    """Seconds of the last ``appends`` one-event appends of ``events``, the state JSON
    written every ``every`` events."""
    sqlstore.STATE_EVERY = every
    try:
        with Journal.open(path) as journal:
            journal.append("long", events[:-appends], ts=MOMENT)
            start = CLOCK[0]()
            for event in events[-appends:]:
                journal.append("long", [event], ts=MOMENT)
            return CLOCK[0]() - start
    finally:
        sqlstore.STATE_EVERY = STATE_EVERY


def state_bytes(events: list[AgentEvent]) -> int:
    """Size of the state JSON after ``events``."""
    with tempfile.TemporaryDirectory() as folder, Journal.open(Path(folder) / "s.db") as j:
        j.append("long", events, ts=MOMENT)
        return len(state_json(j.state("long")))


def run(lengths: Sequence[int], appends: int, repeat: int) -> Report:
    """The table of µs per append at each length, ours against the state on every append."""
    rows = []
    for length in lengths:
        events = list(session_events(0, length))
        ours, reference, ratios = [], [], []
        for round_ in range(repeat):
            with tempfile.TemporaryDirectory() as folder:
                a = appends_late(Path(folder) / f"a{round_}.db", events, appends, STATE_EVERY)
                b = appends_late(Path(folder) / f"b{round_}.db", events, appends, 1)
            ours.append(a)
            reference.append(b)
            ratios.append(a / b)
        rows.append(
            [
                f"{length:,}",
                f"{state_bytes(events):,}",
                f"{statistics.median(ours) / appends * 1e6:.0f}",
                f"{statistics.median(reference) / appends * 1e6:.0f}",
                f"{statistics.median(ratios):.2f}×",
            ]
        )
    header = [
        "session length>",
        "state JSON bytes>",
        f"(a) every {STATE_EVERY}, µs/append>",
        "(b) every append, µs/append>",
        "(a)/(b)>",
    ]
    title = (
        f"one-event appends, the last {appends} of a session, cpu time, median of {repeat} "
        f"rounds; {machine()}"
    )
    return Report([[title], [Table(header, rows)]])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[500, 2000, 10000])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if min(args.lengths) <= args.appends:
        parser.error("every --lengths must be longer than --appends")
    return report(run(args.lengths, args.appends, args.repeat))


if __name__ == "__main__":
    sys.exit(main())
