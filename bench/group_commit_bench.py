"""Group commit: many sessions appending at once from one process, against one at a time.

    python bench/group_commit_bench.py [--sessions 8] [--appends 200] [--repeat 5]
                                       [--durability normal|full|both]

Wall time, each case in a fresh SQLite file (WAL), the cases taking turns, medians of
per-round ratios. Every append is one event (realistic ~300-byte events, prebuilt; each
session's ``session_started`` is written before the clock starts):

  (a) reference: one thread appends to the S sessions in turn (round robin), one event
      per call: a lone writer, each append its own commit;
  (b) S threads sharing one `Journal`, each appending its own session: the appends that
      arrive while a commit is in progress share the next one (group commit);
  (c) (b) with group commit off (``SQLiteJournal(group_commit=False)``): the threads take
      turns, each append its own commit;
  (d) S coroutines on one event loop, each awaiting `Journal.append_async` for its session;
  (e) one writer alone, one session: latency per append with group commit;
  (f) (e) with group commit off.

Targets (issue 21): (b) events/s ≥ 3× (a)'s at ``synchronous=NORMAL`` (``--durability
full`` is reported too); (e) ≤ 1.05× (f).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _common import Ratio, Report, Table, machine, report, session_events

from journal import AgentEvent
from journal.sqlite import SQLiteJournal
from journal.store import Durability

Work = list[tuple[str, list[AgentEvent]]]
"""Each session's id and the events appended to it one per call (its start excluded)."""


def work_of(sessions: int, appends: int) -> Work:
    """``sessions`` sessions of ``appends`` events each, after their ``session_started``."""
    return [(f"gc-{i:03d}", list(session_events(i, appends + 1))) for i in range(sessions)]


def _opened(path: Path, work: Work, durability: Durability, group: bool) -> SQLiteJournal:
    """A fresh journal at ``path`` holding each session's start (written untimed)."""
    journal = SQLiteJournal(str(path), durability=durability, group_commit=group)
    for session_id, events in work:
        journal.append(session_id, events[:1])
    return journal


def one_thread(journal: SQLiteJournal, work: Work) -> None:
    """(a): one thread, the sessions in turn, one event per call."""
    for index in range(1, len(work[0][1])):
        for session_id, events in work:
            journal.append(session_id, [events[index]])


def threads(journal: SQLiteJournal, work: Work) -> None:
    """(b), (c): a thread per session, started together; returns when all are done."""
    start = threading.Barrier(len(work) + 1)
    failures: list[BaseException] = []

    def run(session_id: str, events: list[AgentEvent]) -> None:
        start.wait()
        try:
            for event in events[1:]:
                journal.append(session_id, [event])
        except BaseException as e:  # reported after the join, not lost in the thread
            failures.append(e)

    workers = [threading.Thread(target=run, args=item) for item in work]
    for worker in workers:
        worker.start()
    start.wait()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]


def coroutines(journal: SQLiteJournal, work: Work) -> None:
    """(d): a coroutine per session, each awaiting `append_async` one event at a time."""

    async def run(session_id: str, events: list[AgentEvent]) -> None:
        for event in events[1:]:
            await journal.append_async(session_id, [event])

    async def main() -> None:
        await asyncio.gather(*(run(session_id, events) for session_id, events in work))

    asyncio.run(main())


Case = tuple[Callable[[SQLiteJournal, Work], None], bool, bool]
"""What a case runs, whether group commit is on, and whether it writes one session alone."""

CASES: dict[str, Case] = {
    "a": (one_thread, True, False),
    "b": (threads, True, False),
    "c": (threads, False, False),
    "d": (coroutines, True, False),
    "e": (one_thread, True, True),
    "f": (one_thread, False, True),
}
LABELS = {
    "a": "(a) 1 thread, sessions in turn, 1 event/call",
    "b": "(b) a thread per session, group commit",
    "c": "(c) a thread per session, group commit off",
    "d": "(d) a coroutine per session, append_async",
    "e": "(e) one writer alone, group commit",
    "f": "(f) one writer alone, group commit off",
}


def measure(
    work: Work, durability: Durability, repeat: int, names: Sequence[str], folder: Path
) -> dict[str, list[float]]:
    """Seconds of each case in each round (the cases take turns), each in a fresh file."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeat):
        for name in names:
            case, group, alone = CASES[name]
            path = folder / f"{name}-{durability}-{round_}.db"
            load = work[:1] if alone else work
            with _opened(path, load, durability, group) as journal:
                began = time.perf_counter()
                case(journal, load)
                times[name].append(time.perf_counter() - began)
            for leftover in folder.glob(path.name + "*"):
                leftover.unlink()
    return times


def ratio(times: dict[str, list[float]], ours: str, reference: str, scale: float = 1.0) -> float:
    """Median over rounds of ``ours / reference`` seconds (both from the same round)."""
    pairs = zip(times[ours], times[reference], strict=True)
    return statistics.median(x / y * scale for x, y in pairs)


def table(times: dict[str, list[float]], work: Work, title: str) -> Table:
    """Events/s and µs per append of each case; the ratio of events/s to (a)'s."""
    rows = []
    for name, seconds in times.items():
        alone = CASES[name][2]
        events = sum(len(events) - 1 for _, events in (work[:1] if alone else work))
        median = statistics.median(seconds)
        if alone:
            versus = f"{ratio(times, name, 'f'):.2f}× (f) latency" if name == "e" else ""
        else:
            versus = f"{ratio(times, 'a', name):.2f}× (a)"
        rows.append(
            [LABELS[name], f"{events / median:,.0f}", f"{median / events * 1e6:.0f}", versus]
        )
    return Table([title, "events/s>", "µs/append>", "vs>"], rows)


def quick_ratios() -> list[Ratio]:
    """The two ratios of issue 21's table, from a small run (a few seconds)."""
    with tempfile.TemporaryDirectory() as folder:
        work = work_of(8, 60)
        times = measure(work, "normal", 3, ["a", "b", "e", "f"], Path(folder))
    return [
        Ratio(
            "8 threads appending to 8 sessions, 1 event/call (events/s)",
            "the same 8 sessions appended from one thread",
            "wall",
            ratio(times, "a", "b"),
            "≥ 3×",
        ),
        Ratio(
            "one writer alone, latency per 1-event append, group commit",
            "the same with group commit off",
            "wall",
            ratio(times, "e", "f"),
            "≤ 1.05×",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8, help="sessions (threads) at once")
    parser.add_argument("--appends", type=int, default=200, help="one-event appends per session")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (medians are shown)")
    parser.add_argument("--durability", choices=["normal", "full", "both"], default="both")
    args = parser.parse_args(argv)
    work = work_of(args.sessions, args.appends)
    chosen: list[Durability] = (
        ["normal", "full"] if args.durability == "both" else [args.durability]
    )
    blocks: list[list[str | Table]] = [
        [
            f"{args.sessions} sessions x {args.appends} one-event appends, wall time, "
            f"median of {args.repeat} rounds; {machine()}"
        ]
    ]
    code = 0
    for durability in chosen:
        with tempfile.TemporaryDirectory() as folder:
            times = measure(work, durability, args.repeat, list(CASES), Path(folder))
        throughput, latency = ratio(times, "a", "b"), ratio(times, "e", "f")
        ok = latency <= 1.05 and (throughput >= 3 or durability == "full")
        code |= not ok
        blocks.append(
            [
                table(times, work, f"durability={durability}"),
                "",
                f"(b) events/s / (a) events/s: {throughput:.2f}× (target ≥ 3× at normal); "
                f"(e) / (f) latency: {latency:.2f}× (target ≤ 1.05×)",
            ]
        )
    return report(Report(blocks, code))


if __name__ == "__main__":
    sys.exit(main())
