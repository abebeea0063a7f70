"""How the TUI copes with a huge session: first paint and jump to the end, 1M next to 1k events.

    python bench/tui_bench.py [--quick] [--big N] [--small N] [--repeat R] [--cache DIR]

One journal holds two sessions of the same shape: ``bench-small`` (1,000 events) and
``bench-big`` (1,000,000; 100,000 with ``--quick``). It is built once with batched appends
of small events and cached under ``--cache`` (default: the temp directory), so later runs
start at once. Each measurement runs in a fresh child process, headless
(``App.run_test``, 120x40), and reports:

* first paint: from constructing `JournalApp` (journal opened, session checked) until the
  timeline has drawn its first rows;
* jump to end: from running the action ``G`` is bound to until the last event's row is
  drawn under the cursor;
* peak RSS of the child process (everything: Python, Textual, SQLite's page cache).

The timeline reads only the rows it draws (keyset pages by seq) and counts come from the
sessions projection, so both times should not depend on the session's length. Targets:
the big session within 1.5x of the small one; peak RSS under 200 MB. Times are the median
of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from _common import Report, Table, report

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentEvent,
    Journal,
    SessionStarted,
    ToolCall,
    UserInput,
)

BATCH = 5_000
SIZE = (120, 40)
TS = "2026-11-29T09:00:00.000000Z"


def turn(n: int) -> list[AgentEvent]:
    """One small turn: a question, a tool call, its result (every 7th fails), an answer."""
    call = ToolCall(call_id=f"c{n}", tool="lookup", args={"key": n % 10})
    outcome: AgentEvent = (
        ActionFailed(call_id=call.call_id, tool="lookup", kind="business", message="no such key")
        if n % 7 == 0
        else ActionCommitted(call_id=call.call_id, tool="lookup", args=call.args, result={"n": n})
    )
    return [
        UserInput(text=f"question {n}"),
        ActionProposed(calls=[call]),
        outcome,
        AgentCompleted(answer=f"answer {n}"),
    ]


def events(count: int) -> Iterator[list[AgentEvent]]:
    """``count`` events after session_started, in batches of `BATCH`."""
    batch: list[AgentEvent] = []
    n = 0
    remaining = count - 1
    while remaining > 0:
        for event in turn(n)[:remaining]:
            batch.append(event)
            remaining -= 1
        n += 1
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def build(path: Path, sizes: dict[str, int]) -> None:
    """Create the journal at ``path`` (or reuse it when its sessions are complete)."""
    if path.exists():
        with Journal.open(path) as journal:
            if all(journal.last_seq(name) == size - 1 for name, size in sizes.items()):
                return
        path.unlink()
    started = time.perf_counter()
    partial = path.with_suffix(".building")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    with Journal.open(partial) as journal:
        for name, size in sizes.items():
            journal.append(name, [SessionStarted(agent="bench:agent")], ts=TS)
            for batch in events(size):
                journal.append(name, batch, ts=TS)
    partial.rename(path)
    print(f"built {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


async def _until(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the timeline never drew what was asked")
        await asyncio.sleep(0.0005)


def child(db: str, session: str) -> None:
    """Measure one session in this (fresh) process and print the figures as JSON."""
    from tui.app import JournalApp
    from tui.widgets.timeline import TimelineView

    async def measure() -> dict[str, float]:
        started = time.perf_counter()
        app = JournalApp(db=db, session=session, follow=False)
        async with app.run_test(size=SIZE):

            def view() -> TimelineView:
                return app.screen.query_one(TimelineView)

            await _until(lambda: isinstance(app.screen.focused, TimelineView))
            await _until(lambda: view().painted >= 0)
            first_paint = time.perf_counter() - started
            last = view().line_count - 1
            pressed = time.perf_counter()
            await app.run_action("last", view())
            await _until(lambda: view().cursor == last and view().painted == last)
            jump = time.perf_counter() - pressed
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {"first_paint": first_paint, "jump_end": jump, "peak_mb": peak, "events": last + 1}

    figures = asyncio.run(measure())
    print(json.dumps(figures), flush=True)
    os._exit(0)  # do not wait for the state fold the jump started in a worker


def run_child(db: Path, session: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(db), session],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="100k events instead of 1M")
    parser.add_argument("--big", type=int, help="events in the big session")
    parser.add_argument("--small", type=int, default=1_000, help="events in the small session")
    parser.add_argument("--repeat", type=int, default=3, help="runs per session (median)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--child", nargs=2, metavar=("DB", "SESSION"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def measure_sessions(db: Path, names: Sequence[str], repeat: int) -> dict[str, dict[str, float]]:
    """Median first paint, jump to end and peak RSS of each session, runs interleaved."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(repeat):
        for name in names:  # interleaved, so drift in the machine's load hits both
            runs[name].append(run_child(db, name))
    return {
        name: {
            key: statistics.median(run[key] for run in found)
            for key in ("first_paint", "jump_end", "peak_mb")
        }
        for name, found in runs.items()
    }


def tui_report(sizes: dict[str, int], rows: dict[str, dict[str, float]], repeat: int) -> Report:
    """The table, the big/small ratios and the verdict on the targets."""
    small, large = rows["bench-small"], rows["bench-big"]
    paint = large["first_paint"] / small["first_paint"]
    jump = large["jump_end"] / small["jump_end"]
    met = paint <= 1.5 and jump <= 1.5 and large["peak_mb"] < 200
    table = Table(
        ["session", "events>", "first paint>", "jump to end>", "peak RSS>"],
        [
            [
                name,
                f"{size:,}",
                f"{rows[name]['first_paint'] * 1000:.0f} ms",
                f"{rows[name]['jump_end'] * 1000:.0f} ms",
                f"{rows[name]['peak_mb']:.0f} MB",
            ]
            for name, size in sizes.items()
        ]
        + [["big / small", "", f"{paint:.2f}x", f"{jump:.2f}x", ""]],
    )
    verdict = (
        f"targets (big within 1.5x of small, peak under 200 MB): {'met' if met else 'missed'}"
        f" (median of {repeat} run(s); machine load moves single runs)"
    )
    return Report([[table, verdict]])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        child(*args.child)
        return 0
    big = args.big or (100_000 if args.quick else 1_000_000)
    sizes = {"bench-small": args.small, "bench-big": big}
    args.cache.mkdir(parents=True, exist_ok=True)
    db = args.cache / f"agent-journal-tui-bench-{args.small}-{big}.db"
    build(db, sizes)
    return report(tui_report(sizes, measure_sessions(db, list(sizes), args.repeat), args.repeat))


if __name__ == "__main__":
    sys.exit(main())
