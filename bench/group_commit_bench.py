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
  (d) S coroutines on one event loop, each awaiting `Journal.append_async` for its session
      (one pool thread at a time writes what they queued, in one transaction);
  (e) one writer alone, one session: latency per append with group commit;
  (f) (e) with group commit off ((e) and (f) take turns every 10 appends, each in its
      own file, so the load of a shared machine falls on both alike);
  (g) the bound of grouping: one thread writes each round of (a) (one event to each
      session) as one batch of the group commit, in one transaction (`GroupCommit.run_many`),
      no thread waiting or woken: what (b) would reach if handing appends between threads
      cost nothing.

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
Times = dict[str, list[float]]
"""Seconds of each case (by letter) in each round."""


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


def one_batch_per_round(journal: SQLiteJournal, work: Work) -> None:
    """(g): one thread, each round's appends (one event to every session) in one batch."""
    group = journal._group
    assert group is not None
    for index in range(1, len(work[0][1])):
        writes = [
            journal._write_of(
                session_id, *journal._append_plans(session_id, [events[index]], None, None)
            )
            for session_id, events in work
        ]
        for outcome in group.run_many(writes):
            if isinstance(outcome, BaseException):
                raise outcome


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


Case = tuple[Callable[[SQLiteJournal, Work], None], bool]
"""What a case runs, and whether group commit is on."""

CASES: dict[str, Case] = {
    "a": (one_thread, True),
    "b": (threads, True),
    "c": (threads, False),
    "d": (coroutines, True),
    "g": (one_batch_per_round, True),
}
LABELS = {
    "a": "(a) 1 thread, sessions in turn, 1 event/call",
    "b": "(b) a thread per session, group commit",
    "c": "(c) a thread per session, group commit off",
    "d": "(d) a coroutine per session, append_async",
    "e": "(e) one writer alone, group commit",
    "f": "(f) one writer alone, group commit off",
    "g": "(g) 1 thread, each round of (a) one batch",
}
BLOCK = 10
"""Appends (e) and (f) take in turn, so a load spike on a shared machine hits both."""


def measure(
    work: Work, durability: Durability, repeat: int, names: Sequence[str], folder: Path
) -> Times:
    """Seconds of each case in each round (the cases take turns), each in a fresh file."""
    times: Times = {name: [] for name in names}
    for round_ in range(repeat):
        for name in names:
            case, group = CASES[name]
            path = folder / f"{name}-{durability}-{round_}.db"
            with _opened(path, work, durability, group) as journal:
                began = time.perf_counter()
                case(journal, work)
                times[name].append(time.perf_counter() - began)
            _remove(path)
    return times


def alone(events: list[AgentEvent], durability: Durability, repeat: int, folder: Path) -> Times:
    """(e) and (f): seconds of a lone writer's one-event appends to one session in each
    round, group commit on and off, the two journals taking turns every `BLOCK` appends."""
    times: Times = {"e": [], "f": []}
    work = [("alone", events)]
    for round_ in range(repeat):
        paths = {name: folder / f"{name}-{durability}-{round_}.db" for name in times}
        spent = {name: 0.0 for name in times}
        with (
            _opened(paths["e"], work, durability, True) as grouped,
            _opened(paths["f"], work, durability, False) as ungrouped,
        ):
            for start in range(1, len(events), BLOCK):
                for name, journal in (("e", grouped), ("f", ungrouped)):
                    began = time.perf_counter()
                    for event in events[start : start + BLOCK]:
                        journal.append("alone", [event])
                    spent[name] += time.perf_counter() - began
        for name, path in paths.items():
            times[name].append(spent[name])
            _remove(path)
    return times


def _remove(path: Path) -> None:
    """Remove a journal file and its companions."""
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()


def run(work: Work, durability: Durability, repeat: int, names: Sequence[str]) -> Times:
    """The cases ``names`` over ``work``, then (e) and (f) on its first session."""
    with tempfile.TemporaryDirectory() as folder:
        times = measure(work, durability, repeat, names, Path(folder))
        times.update(alone(work[0][1], durability, repeat, Path(folder)))
    return times


def ratio(times: Times, ours: str, reference: str) -> float:
    """Median over rounds of ``ours / reference`` seconds (both from the same round)."""
    pairs = zip(times[ours], times[reference], strict=True)
    return statistics.median(x / y for x, y in pairs)


def table(times: Times, work: Work, title: str) -> Table:
    """Events/s and µs per append of each case; events/s against (a)'s, latency (e)/(f)."""
    rows = []
    for name, seconds in times.items():
        events = sum(len(items) - 1 for _, items in (work[:1] if name in "ef" else work))
        median = statistics.median(seconds)
        if name in "ef":
            versus = f"{ratio(times, 'e', 'f'):.2f}× (f) latency" if name == "e" else ""
        else:
            versus = f"{ratio(times, 'a', name):.2f}× (a)"
        rows.append(
            [LABELS[name], f"{events / median:,.0f}", f"{median / events * 1e6:.0f}", versus]
        )
    return Table([title, "events/s>", "µs/append>", "vs>"], rows)


def quick_ratios() -> list[Ratio]:
    """The two ratios of issue 21's table, and the coroutines' beside them, from a small
    run (seconds)."""
    times = run(work_of(8, 100), "normal", 5, ["a", "b", "d"])
    return [
        Ratio(
            "8 threads appending to 8 sessions, 1 event/call (events/s)",
            "the same 8 sessions appended from one thread",
            "wall",
            ratio(times, "a", "b"),
            "≥ 3×",
        ),
        Ratio(
            "8 coroutines awaiting append_async, 8 sessions, 1 event/call (events/s)",
            "the same 8 sessions appended from one thread",
            "wall",
            ratio(times, "a", "d"),
            "",
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
        times = run(work, durability, args.repeat, list(CASES))
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
