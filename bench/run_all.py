"""Every ratio of the speed targets in one table, each against its reference from one run.

    python bench/run_all.py [--quick] [--rounds N] [--only NAME ...] [--json] [--timeout S]

Runs ``quick_ratios()`` of each bench that has one (journal_bench, import_bench,
group_commit_bench, loop_bench, peers, user_code_bench, genai_bench: a bench whose file or
function is missing is named under the table and skipped), each bench in a child process of
its own so that one bench's crash, settings or memory cannot touch another's. Prints the
command, the machine and one Markdown table (what | reference | clock | ratio | target |
met): the block at the top of bench/README.md, ready to paste. ``--json`` prints the same
as JSON instead.

``--quick`` runs each bench once (under 3 minutes on 2 cores); without it each bench runs
``--rounds`` times and a row shows the median of its ratios. The full-size run of a bench,
with every row it has, is its own script (``python bench/journal_bench.py``). A missed
target is a ``NO`` in the table, not a failure: the exit code is 0 unless a bench crashed,
which is a row naming the error, and exit code 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import Ratio, Report, Table, machine, report

HERE = Path(__file__).resolve().parent
FEEDERS = (
    "journal_bench",
    "import_bench",
    "group_commit_bench",
    "loop_bench",
    "peers",
    "user_code_bench",
    "genai_bench",
)
"""The benches that feed the table, in the order of their rows."""
CHILD = (
    "import sys; sys.path[:0] = sys.argv[1:3]; import run_all; "
    "run_all.child(sys.argv[3], sys.argv[4])"
)
"""What a child process runs: bench NAME's quick_ratios(), its outcome written to OUT."""
LEGEND = (
    "ratio: ours over the reference, both measured in the same run (a median of per-round "
    "ratios); clock: cpu = CPU time of the process, wall = elapsed time, rss = peak memory."
)


def child(name: str, out: str) -> None:
    """Import bench ``name``, call its ``quick_ratios()`` and write the outcome to ``out``.

    The outcome is JSON: ``{"rows": [...]}``, ``{"skipped": reason}`` (no such function) or
    ``{"error": "Type: message"}`` (it raised, or returned something else than Ratios).
    """
    outcome: dict[str, Any]
    try:
        module = importlib.import_module(name)
        measure = getattr(module, "quick_ratios", None)
        if measure is None:
            outcome = {"skipped": f"bench/{name}.py has no quick_ratios()"}
        else:
            found = measure()
            if not isinstance(found, list) or not all(isinstance(r, Ratio) for r in found):
                raise TypeError(f"quick_ratios() returned {found!r:.80}, not a list of Ratio")
            outcome = {"rows": [dataclasses.asdict(r) for r in found]}
    except Exception as error:  # noqa: BLE001 - any failure of the bench is its row
        outcome = {"error": one_line(error)}
    Path(out).write_text(json.dumps(outcome))


def one_line(error: BaseException) -> str:
    """``Type: first line of the message``."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


@dataclass(frozen=True)
class Line:
    """A row of the table: a bench's ratio, or the error that stopped the bench."""

    bench: str
    ratio: Ratio | None = None
    error: str = ""

    def cells(self) -> list[str]:
        """what, reference, clock, ratio, target, met (Markdown-safe)."""
        if self.ratio is None:
            cells = [f"{self.bench}: quick_ratios() failed", self.error, "", "", "", "ERROR"]
        else:
            r = self.ratio
            cells = [r.what, r.reference, r.clock, f"{r.ratio:.2f}×", r.target, r.met]
        return [cell.replace("|", "\\|") for cell in cells]

    def as_json(self) -> dict[str, Any]:
        """The row as a JSON object (``ratio`` a number, or null for an error row)."""
        if self.ratio is None:
            return {"bench": self.bench, "error": self.error}
        return {"bench": self.bench, **dataclasses.asdict(self.ratio), "met": self.ratio.met}


@dataclass(frozen=True)
class Outcome:
    """What one bench gave over every round: its rows, or why it was skipped."""

    lines: list[Line]
    skipped: str = ""
    seconds: float = 0.0


def run_once(name: str, directory: Path, timeout: float) -> dict[str, Any]:
    """One round of bench ``name`` in a child process: the child's outcome (see `child`)."""
    with tempfile.TemporaryDirectory(prefix="run-all-") as folder:
        out = Path(folder, "outcome.json")
        command = [sys.executable, "-c", CHILD, str(directory), str(HERE), name, str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:g} s"}
        if out.exists():
            found: dict[str, Any] = json.loads(out.read_text())
            return found
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the child process exited with code {done.returncode}: {last}"}


def run_bench(name: str, directory: Path, rounds: int, timeout: float) -> Outcome:
    """Bench ``name`` over ``rounds`` rounds: each row's median ratio, or the first error."""
    if not (directory / f"{name}.py").is_file():
        return Outcome([], skipped=f"no bench/{name}.py")
    started = time.perf_counter()
    found: dict[tuple[str, str, str, str], list[float]] = {}
    for _ in range(rounds):
        outcome = run_once(name, directory, timeout)
        if "skipped" in outcome:
            return Outcome([], skipped=outcome["skipped"])
        if "error" in outcome:
            return Outcome(
                [Line(name, error=outcome["error"])], seconds=time.perf_counter() - started
            )
        for row in outcome["rows"]:
            key = (row["what"], row["reference"], row["clock"], row["target"])
            found.setdefault(key, []).append(row["ratio"])
    lines = [
        Line(name, Ratio(what, reference, clock, statistics.median(ratios), target))
        for (what, reference, clock, target), ratios in found.items()
    ]
    return Outcome(lines, seconds=time.perf_counter() - started)


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this table (``--json`` and ``--timeout`` left out)."""
    parts = ["python bench/run_all.py"]
    if args.quick:
        parts.append("--quick")
    if args.rounds is not None:
        parts.append(f"--rounds {args.rounds}")
    if args.only:
        parts.append("--only " + " ".join(args.only))
    return " ".join(parts)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="one round of each bench (< 3 min)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds per bench, median shown (3; 1 with --quick)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help=f"these benches only (default: {' '.join(FEEDERS)})",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a bench may take per round (600)"
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def main(argv: Sequence[str] | None = None, directory: Path = HERE) -> int:
    """Run the benches, print the table (or JSON); 1 if a bench crashed, else 0."""
    args = parse(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    outcomes: dict[str, Outcome] = {}
    for name in args.only or FEEDERS:
        outcomes[name] = found = run_bench(name, directory, rounds, args.timeout)
        count = len(found.lines)
        said = found.skipped or f"{count} row{'s' * (count != 1)} in {found.seconds:.1f} s"
        print(f"{name}: {said}", file=sys.stderr)
    lines = [line for found in outcomes.values() for line in found.lines]
    skipped = {name: found.skipped for name, found in outcomes.items() if found.skipped}
    code = 1 if any(line.ratio is None for line in lines) else 0
    command, where = command_line(args), machine()
    if args.json:
        rows = [line.as_json() for line in lines]
        everything = {"command": command, "machine": where, "rounds": rounds, "rows": rows}
        print(json.dumps(everything | {"skipped": skipped}, ensure_ascii=False))
        return code
    day = datetime.now(UTC).date().isoformat()
    heading = f"`{command}` on {where}, {day} ({rounds} round{'s' * (rounds > 1)} per bench):"
    header = ["what", "reference", "clock", "ratio>", "target", "met"]
    table = Table(header, [line.cells() for line in lines]) if lines else "No bench gave a row."
    blocks: list[list[str | Table]] = [[heading], [LEGEND], [table]]
    if skipped:
        blocks.append(["Not run: " + "; ".join(f"{n} ({why})" for n, why in skipped.items()) + "."])
    return report(Report(blocks, code))


if __name__ == "__main__":
    sys.exit(main())
