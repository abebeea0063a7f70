"""Instructions per operation, ours against the raw reference: a figure a loaded machine
cannot move.

    python bench/instructions.py [--short N] [--long N] [--case CASE ...]

Each case runs twice in a child process under valgrind's callgrind (``--tool=callgrind``,
which counts the instructions the process executes, kernel work excluded), once with
``--short`` operations and once with ``--long``; the difference over the extra operations
is the cost of one, with start-up, imports and the workload's construction gone. The same
binary, inputs and environment give the same count, whatever else the machine is doing,
so two trees compare run against run (``PYTHONPATH=TREE``), where CPU time spreads by ±20%
on a shared machine. Valgrind's CPU has no SHA extensions, so hashing counts more than it
costs on the real CPU, in ours and in the reference alike.

Cases (``--case``, repeatable; default all): a one-event ``Journal.append`` against a raw
BEGIN-INSERT-COMMIT of the same row (journal_bench's (d) and (b), the sessions
interleaved); ``Journal.append`` of 1000 events per call against a raw executemany of the
same rows ((c) and (a)), per event; a ``Recorder`` step (model_output + tool_result, and a
third of its turn's user input and final answer: journal_bench's (s), everything counted)
against two bare INSERT+COMMITs ((r)); a step of the agent loop (bench/loop_bench.py, its
turn's share included; ``--short`` and ``--long`` in steps, multiples of 50) against a bare
one-event append. Needs valgrind; without it, says so and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from _common import Report, Table, interleave, machine, report, workload
from journal_bench import (
    bare_steps,
    ours_batched,
    ours_per_event,
    recorder_case,
    recorder_steps,
    reference_batched,
    reference_per_event,
)
from loop_bench import bare_run, loop_run

BATCH = 1000
"""Events per call of the batched case."""
T = TypeVar("T")


def _one_event(ours: bool, count: int, total: int, path: Path) -> None:
    order = interleave(workload(total))
    if ours:
        ours_per_event(path, order[:count])
    else:  # every payload made, whatever ``count``: only the appends differ between runs
        payloads = [(s, q, e.model_dump(mode="json")) for s, q, e in order]
        reference_per_event(path, payloads[:count])


def _batched(ours: bool, count: int, total: int, path: Path) -> None:
    work = workload(total)
    payloads = [(sid, [e.model_dump(mode="json") for e in evs]) for sid, evs in work]
    if ours:
        ours_batched(path, _first(work, count), BATCH)
    else:
        reference_batched(path, _first(payloads, count))


def _recorder(ours: bool, count: int, total: int, path: Path) -> None:
    steps = recorder_steps(total)[:count]
    if ours:
        recorder_case(path, steps)
    else:
        bare_steps(path, steps)


LOOP_STEPS = 10
"""Tool calls per turn in the loop case (a session: 5 turns), as bench/loop_bench.py."""


def _loop(ours: bool, count: int, total: int, path: Path) -> None:
    if ours:  # count steps: sessions of 5 turns of LOOP_STEPS calls
        loop_run(path, count // (5 * LOOP_STEPS), 5, LOOP_STEPS)
    else:
        bare_run(path, count)


def _first(sessions: list[tuple[str, list[T]]], count: int) -> list[tuple[str, list[T]]]:
    """The first ``count`` items of ``sessions``, session by session."""
    taken: list[tuple[str, list[T]]] = []
    for session_id, items in sessions:
        if count <= 0:
            break
        taken.append((session_id, items[:count]))
        count -= len(items)
    return taken


CASES: dict[str, tuple[str, Callable[[bool, int, int, Path], None]]] = {
    "one-event": ("one-event append / raw BEGIN-INSERT-COMMIT", _one_event),
    "batched": (f"append, {BATCH} events per call / raw executemany, per event", _batched),
    "recorder": ("Recorder step (model_output + tool_result) / two bare INSERT+COMMITs", _recorder),
    "loop": ("agent loop step / bare one-event Journal.append", _loop),
}


def count_instructions(case: str, ours: bool, count: int, total: int) -> int:
    """Instructions of a child process running the first ``count`` operations of ``case``
    (its workload made for ``total``, so that only the operations differ between runs)."""
    side = "ours" if ours else "raw"
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        case,
        side,
        str(count),
        str(total),
    ]
    # One hash seed: the order of sets (and so a few instructions) no longer varies by run.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    found = re.search(r"Collected : ([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"instructions: {case} ({side}) failed: {done.stderr.strip()[-300:]}")
    return int(found.group(1).replace(",", ""))


def per_operation(case: str, ours: bool, short: int, long: int) -> float:
    """Instructions of one operation: the long run's extra over the short one's, averaged."""
    extra = count_instructions(case, ours, long, long) - count_instructions(case, ours, short, long)
    return extra / (long - short)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=1000, help="operations of the short run")
    parser.add_argument("--long", type=int, default=3000, help="operations of the long run")
    parser.add_argument(
        "--case", action="append", choices=sorted(CASES), help="only this case (repeatable)"
    )
    parser.add_argument(
        "--child", nargs=4, metavar=("CASE", "SIDE", "COUNT", "TOTAL"), help=argparse.SUPPRESS
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        case, side, count, total = args.child
        with tempfile.TemporaryDirectory(prefix="instructions-") as folder:
            CASES[case][1](side == "ours", int(count), int(total), Path(folder) / "bench.db")
        return 0
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    if not 0 < args.short < args.long:
        print("instructions: --short must be above 0 and below --long", file=sys.stderr)
        return 2
    rows = []
    for case, (what, _) in CASES.items():
        if args.case and case not in args.case:
            continue
        ours = per_operation(case, True, args.short, args.long)
        raw = per_operation(case, False, args.short, args.long)
        rows.append([what, f"{ours / 1000:,.1f}k", f"{raw / 1000:,.1f}k", f"{ours / raw:.2f}×"])
    heading = (
        f"instructions per operation (valgrind callgrind, the {args.long} - {args.short} "
        f"extra operations of two runs) on {machine()}"
    )
    table = Table(["what", "ours>", "raw>", "ratio>"], rows)
    return report(Report([[heading], [table]]))


if __name__ == "__main__":
    sys.exit(main())
