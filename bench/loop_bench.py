"""The agent loop's own overhead per step, next to a bare journal append, from one run.

    python bench/loop_bench.py [--sessions N] [--turns T] [--steps S] [--repeat R] [--quick]
                               [--clock cpu|wall] [--profile]

A step is one tool call: Observe (context, compaction check) → Propose (an instant model
port; the proposal journaled) → Verify (the gate) → Commit (an instant async tool; the
result journaled). Each turn adds a user input, a final proposal and the answer; they are
counted in the time and spread over the turn's steps. Every append is its own transaction
on a real SQLite file (WAL, ``synchronous=NORMAL``, the journal's default), so a step pays
two commits: the proposal and the result.

Beside it, in the same run and on the same kind of file, a bare ``Journal.append`` of one
event per call (the same proposal and result events, alternating): the floor the loop
cannot go below. Printed: µs per step (median of R runs), µs per bare append, their
ratio, and the target of 0.5 ms per step including the commits.

Times are CPU time of the process by default, like bench/journal_bench.py, so other work
on a shared machine does not inflate them; ``--clock wall`` times wall-clock instead.
``--profile`` runs the loop once under cProfile and prints the top functions.
``quick_ratios()`` gives bench/run_all.py the step's ratio to the bare append.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import CLOCK, Ratio, Report, Table, report
from pydantic import BaseModel

from agentloop import Agent, AgentRuntime, ModelRequest, ModelResponse, Tool, counter_ids
from journal import (
    ActionCommitted,
    ActionProposed,
    AgentEvent,
    Guardrails,
    Journal,
    SessionStarted,
    ToolCall,
    Usage,
)

TARGET_US = 500.0
RATIO_TARGET = "≤ 3×"
"""The target of a loop step against a bare one-event append (issue 21)."""
T0 = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)


class LookupArgs(BaseModel):
    """Arguments of the bench tool."""

    order_id: str
    detail: bool = False


async def lookup(args: LookupArgs) -> dict[str, Any]:
    """An instant tool with a small realistic result."""
    return {"order_id": args.order_id, "status": "shipped", "total": 42.5, "items": 3}


class InstantModel:
    """A model port that answers at once: ``steps`` calls per turn, then the answer."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.in_turn: dict[str, int] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = self.in_turn.get(request.session_id, 0)
        usage = Usage(input_tokens=1200, output_tokens=40, cached_tokens=800)
        if done == self.steps:
            self.in_turn[request.session_id] = 0
            return ModelResponse(text="Your order has shipped.", usage=usage, latency_ms=1.0)
        self.in_turn[request.session_id] = done + 1
        call = ToolCall(
            call_id=f"call_{request.seq}",
            tool="lookup_order",
            args={"order_id": f"A-{request.seq:05d}", "detail": done % 2 == 0},
        )
        return ModelResponse(calls=[call], text="Checking.", usage=usage, latency_ms=1.0)


def agent(steps: int) -> Agent:
    """A one-tool agent whose step limit lets ``steps`` calls through per turn."""
    return Agent(
        name="bench",
        system_prompt="You look orders up for customers.",
        tools=[Tool("lookup_order", lookup, "Look an order up.", LookupArgs, parallel_safe=True)],
        model="instant-1",
        guardrails=Guardrails(max_steps=steps + 1),
        code_version="bench",
    )


def clock(seq: int) -> datetime:
    """A clock that does not read the system time (the loop takes it as a port)."""
    return T0


@dataclass(frozen=True)
class LoopRun:
    """What one run of the loop took: seconds, appends (transactions) and events written."""

    seconds: float
    appends: int
    events: int


def loop_run(path: Path, sessions: int, turns: int, steps: int) -> LoopRun:
    """The loop's run of ``sessions`` x ``turns`` x ``steps`` steps into ``path``."""
    with Journal.open(path) as journal:
        appends = 0
        append = journal.append

        def counted(*args: Any, **kwargs: Any) -> int:
            nonlocal appends
            appends += 1
            return append(*args, **kwargs)

        journal.append = counted  # type: ignore[method-assign]
        runtime = AgentRuntime(
            agent(steps), journal, llm=InstantModel(steps), clock=clock, ids=counter_ids("b")
        )

        async def go() -> None:
            for index in range(sessions):
                session_id = runtime.start(f"bench-{index:04d}")
                for turn in range(turns):
                    result = await runtime.run_turn(session_id, f"where is my order, turn {turn}?")
                    assert result.status == "completed", result

        started = CLOCK[0]()
        asyncio.run(go())
        seconds = CLOCK[0]() - started
        events = sum(seq + 1 for seq, _hash in journal.heads().values())
        return LoopRun(seconds, appends, events)


def bare_run(path: Path, count: int) -> float:
    """Seconds for ``count`` single-event appends of step-sized events into ``path``."""
    proposal = ActionProposed(
        calls=[ToolCall(call_id="call_1", tool="lookup_order", args={"order_id": "A-00001"})],
        text="Checking.",
        model="instant-1",
        usage=Usage(input_tokens=1200, output_tokens=40, cached_tokens=800),
        latency_ms=1.0,
    )
    result = ActionCommitted(
        call_id="call_1",
        tool="lookup_order",
        args={"order_id": "A-00001", "detail": False},
        result={"order_id": "A-00001", "status": "shipped", "total": 42.5, "items": 3},
        duration_ms=0.1,
    )
    events: list[AgentEvent] = [proposal, result]
    with Journal.open(path) as journal:
        journal.append("bare", [SessionStarted(agent="bench")], ts=T0)
        started = CLOCK[0]()
        for seq in range(1, count + 1):
            journal.append("bare", [events[seq % 2]], expected_seq=seq, ts=T0)
        return CLOCK[0]() - started


@dataclass(frozen=True)
class Measured:
    """Median µs per loop step and per bare append, their per-run ratio, appends per step."""

    loop_us: float
    bare_us: float
    ratio: float
    per_step: float


def measure(sessions: int, turns: int, steps: int, repeat: int) -> Measured:
    """The loop and the bare append (as many appends as the loop has steps), in turns."""
    total = sessions * turns * steps
    loop_s: list[float] = []
    bare_s: list[float] = []
    appends = 0
    for run in range(repeat):
        with tempfile.TemporaryDirectory(prefix="loop-bench-") as folder:
            found = loop_run(Path(folder, f"loop-{run}.db"), sessions, turns, steps)
            loop_s.append(found.seconds)
            appends = found.appends
            bare_s.append(bare_run(Path(folder, f"bare-{run}.db"), total))
    return Measured(
        statistics.median(loop_s) * 1e6 / total,
        statistics.median(bare_s) * 1e6 / total,
        statistics.median(x / y for x, y in zip(loop_s, bare_s, strict=True)),
        appends / total,
    )


def step_ratio(found: Measured) -> Ratio:
    """A loop step against a bare one-event append, with the target."""
    return Ratio(
        "agent loop step, instant model and tool (two commits)",
        "bare one-event Journal.append",
        "cpu",
        found.ratio,
        RATIO_TARGET,
    )


def quick_ratios() -> list[Ratio]:
    """A loop step against a bare one-event append: 250 steps, median of 9 runs (seconds)."""
    return [step_ratio(measure(sessions=5, turns=5, steps=10, repeat=9))]


def profile(sessions: int, turns: int, steps: int, top: int = 30) -> None:
    """Run the loop once under cProfile; print the top functions by own and total time."""
    with tempfile.TemporaryDirectory(prefix="loop-bench-") as folder:
        profiler = cProfile.Profile()
        profiler.enable()
        loop_run(Path(folder, "profile.db"), sessions, turns, steps)
        profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions per run (20)")
    parser.add_argument("--turns", type=int, default=5, help="turns per session (5)")
    parser.add_argument("--steps", type=int, default=10, help="tool calls per turn (10)")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the median is shown (5)")
    parser.add_argument("--quick", action="store_true", help="5 sessions, 3 runs (under 30 s)")
    parser.add_argument("--profile", action="store_true", help="cProfile one run instead")
    parser.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="time CPU (default) or wall time"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.repeat = min(args.sessions, 5), min(args.repeat, 3)
    return args


def loop_report(args: argparse.Namespace) -> Report:
    """Measure the loop and the bare append; the table, and exit 1 when a target is missed."""
    total = args.sessions * args.turns * args.steps
    found = measure(args.sessions, args.turns, args.steps, args.repeat)
    loop_us, bare_us = found.loop_us, found.bare_us
    met = "yes" if loop_us < TARGET_US else "NO"
    ratio_met = step_ratio(found).met
    rows = [
        ("bare Journal.append, one event per call", bare_us, 1.0, "", ""),
        (
            f"loop step, all in ({found.per_step:.2f} appends per step)",
            loop_us,
            found.ratio,
            f"< 500 µs; ratio {RATIO_TARGET}",
            f"{met}; {ratio_met}",
        ),
        (
            "loop's own work per step (minus its appends)",
            loop_us - found.per_step * bare_us,
            (loop_us - found.per_step * bare_us) / bare_us,
            "",
            "",
        ),
    ]
    heading = (
        f"{total} steps per run ({args.sessions} sessions x {args.turns} turns x "
        f"{args.steps} calls), median of {args.repeat} runs (the ratio: a median of per-run "
        f"ratios), SQLite file (WAL, synchronous=NORMAL), a commit per append, {args.clock} time"
    )
    table = Table(
        ["what", "µs>", "ratio>", "target", "met"],
        [[what, f"{us:.1f}", f"{r:.2f}", goal, ok] for what, us, r, goal, ok in rows],
    )
    return Report([[heading], [table]], code=0 if met == ratio_met == "yes" else 1)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.profile:
        profile(args.sessions, args.turns, args.steps)
        return 0
    return report(loop_report(args))


if __name__ == "__main__":
    raise SystemExit(main())
