"""Speed of replay, of the timeline and of the diff, each beside a reference from the same run.

    python bench/replay_bench.py [--steps N] [--events N] [--loop N] [--repeat R] [--quick]

Prints the median of R runs (CPU time of this process; ``--clock wall`` for wall time):

replay
  (a) reference: the original run of an agent with an instant model and instant tools,
      ``--steps`` tool calls (10 per turn), into an in-memory journal;
  (b) ours: ``Replayer().replay`` of that recording (read it, build the agent, re-run the
      loop on the recorded ports, compare event by event); target within 2× of (a);
  (c) for scale: ``fold`` of the recording's events.
state at a seq, on one session of ``--events`` events (realistic ~300-byte events)
  (d) reference: fold from seq 0 to a random seq (what a timeline without snapshots does);
  (e) ours: the first question, at the last seq (folds once and stores the snapshots);
  (f) ours: a random seq once the snapshots exist (a fresh `Timeline` each time, so no
      cache in memory helps): the nearest snapshot plus at most 255 events.
diff, as ``agent-journal diff A B`` does it: read both sessions from the journal, align
  (g) reference: reading both sessions of ``--events`` events as flat records (the floor
      of any diff of stored sessions);
  (h) ours: ``diff_records`` of the two sessions read, which differ in one event (trim,
      align, deepdiff the one pair); target under a second;
  (i) ours: (g) + (h), what ``agent-journal diff`` waits for;
  (j) ours: read + diff of two ``--loop``-event loops of identical calls that differ in a
      few places (a dropped call, changed results), so the middle must be aligned;
  (k) reference: plain ``difflib.SequenceMatcher`` over the whole loop (no trimming, no
      windows), at a tenth of ``--loop`` events (it is quadratic: ×100 at full size).
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from _common import CLOCK, Report, Table, machine, report, session_events
from pydantic import BaseModel

from agentloop import (
    Agent,
    AgentRuntime,
    ModelRequest,
    ModelResponse,
    Tool,
    counter_ids,
)
from journal import (
    ActionCommitted,
    ActionProposed,
    AgentEvent,
    Guardrails,
    Journal,
    SessionStarted,
    ToolCall,
    UserInput,
    fold,
)
from replay import Replayer, ReplayOptions, Timeline, diff_records, fingerprint

# -- an agent with an instant model and instant tools ------------------------------------------

STEPS_PER_TURN = 10


class Lookup(BaseModel):
    """Arguments of the bench tools."""

    id: str


async def _instant(args: Lookup) -> dict[str, Any]:
    return {"id": args.id, "status": "ok"}


class InstantModel:
    """Calls one of three tools with fresh arguments, ten times a turn, then answers."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        calls_this_turn = 0
        for message in reversed(request.messages):
            if message["role"] == "user":
                break
            calls_this_turn += len(message.get("tool_calls", ()))
        if calls_this_turn >= STEPS_PER_TURN:
            return ModelResponse(text="done", model="instant")
        tool = ("lookup_order", "search_docs", "get_status")[request.seq % 3]
        call = ToolCall(call_id=f"call_{request.seq}", tool=tool, args={"id": f"A-{request.seq}"})
        return ModelResponse(calls=[call], model="instant", latency_ms=0.0)


def build_agent() -> Agent:
    """The bench agent (its reference is this function, for a replay that rebuilds it)."""
    return Agent(
        name="instant",
        system_prompt="You look things up.",
        tools=[
            Tool(name, _instant, f"{name} by id", Lookup, parallel_safe=True)
            for name in ("lookup_order", "search_docs", "get_status")
        ],
        llm=InstantModel(),
        model="instant",
        guardrails=Guardrails(max_steps=STEPS_PER_TURN),
        reference="replay_bench:build_agent",
        code_version="bench",
    )


def original_run(journal: Journal, steps: int) -> str:
    """Run the agent for ``steps`` tool calls (10 a turn) into ``journal``."""
    runtime = AgentRuntime(build_agent(), journal, ids=counter_ids("bench"))

    async def go() -> None:
        session_id = runtime.start("original")
        for turn in range(steps // STEPS_PER_TURN):
            await runtime.run_turn(session_id, f"look up batch {turn}")

    asyncio.run(go())
    return "original"


# -- long sessions ---------------------------------------------------------------------------


def append_all(journal: Journal, session_id: str, events: Iterator[AgentEvent]) -> int:
    """Append events in chunks of 1000; return how many."""
    chunk: list[AgentEvent] = []
    seq = 0
    for event in events:
        chunk.append(event)
        if len(chunk) == 1000:
            journal.append(session_id, chunk, expected_seq=seq)
            seq += len(chunk)
            chunk = []
    if chunk:
        journal.append(session_id, chunk, expected_seq=seq)
        seq += len(chunk)
    return seq


def changed_once(events: Iterator[AgentEvent], at: int) -> Iterator[AgentEvent]:
    """The same events, with the first commit at or after ``at`` given another result."""
    done = False
    for index, event in enumerate(events):
        if not done and index >= at and isinstance(event, ActionCommitted):
            event = event.model_copy(update={"result": {"ok": False, "note": "changed"}})
            done = True
        yield event


def loop_events(count: int, *, edits: bool) -> Iterator[AgentEvent]:
    """A loop of one identical call and its identical result, ``count`` events in all.

    With ``edits``: a different result every 1,000 calls (and once early on), and one
    extra proposal a third of the way, so the loops differ all along and the middle must
    be aligned.
    """
    yield SessionStarted(agent="bench:poller", model="instant")
    yield UserInput(text="Is ticket 42 resolved yet?")
    call = ToolCall(call_id="call_0", tool="get_ticket_status", args={"ticket_id": 42})
    made, step = 2, 0
    while made < count:
        if edits and step == count // 6:
            yield ActionProposed(calls=[call], text="checking again", model="instant")
            made += 1
        changed = edits and (step % 1000 == 500 or step == count // 16)
        yield ActionProposed(calls=[call], model="instant", latency_ms=float(step % 9))
        yield ActionCommitted(
            call_id="call_0",
            tool="get_ticket_status",
            args={"ticket_id": 42},
            result={"status": "changed" if changed else "pending"},
            duration_ms=float(step % 7),
        )
        made += 2
        step += 1


def read_records(journal: Journal, session_id: str) -> list[dict[str, Any]]:
    """A session as flat records, the way ``agent-journal diff`` reads one."""
    return [
        {**orjson.loads(row.body), "hash": row.hash} for row in journal.stored_events(session_id)
    ]


# -- timing ----------------------------------------------------------------------------------


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds `function` took on the bench clock, and what it returned."""
    start = CLOCK[0]()
    value = function()
    return CLOCK[0]() - start, value


def median_of(runs: int, function: Callable[[], Any]) -> float:
    return statistics.median(timed(function)[0] for _ in range(runs))


def bench_replay(steps: int, runs: int) -> dict[str, float]:
    """Original run, replay, and fold of the recording, in turns (medians, seconds)."""
    times: dict[str, list[float]] = {"original": [], "replay": [], "fold": []}
    events = 0
    for _ in range(runs):
        with Journal.open(":memory:") as journal:
            took, session_id = timed(lambda: original_run(journal, steps))  # noqa: B023
            times["original"].append(took)
            agent = build_agent()
            replayer = Replayer(ReplayOptions(agent=agent))
            took, result = timed(lambda: replayer.replay(journal, session_id))  # noqa: B023
            if not result.identical:
                raise SystemExit(f"the bench replay diverged: {result.first_divergence}")
            times["replay"].append(took)
            recorded = list(journal.events(session_id))
            events = len(recorded)
            times["fold"].append(timed(lambda: fold(recorded))[0])  # noqa: B023
    return {name: statistics.median(values) for name, values in times.items()} | {
        "events": float(events)
    }


def drop_snapshots(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("DROP TABLE IF EXISTS snapshots")
        conn.commit()
    finally:
        conn.close()


def bench_state(path: Path, total: int, runs: int, queries: int) -> dict[str, float]:
    """Refold from zero, the first question, and questions once snapshots exist."""
    rng = random.Random(5)
    with Journal.open(path) as journal:
        append_all(journal, "long", session_events(0, total))
    refold, first, later = [], [], []
    for _ in range(runs):
        drop_snapshots(path)
        with Journal.open(path) as journal:
            seq = rng.randrange(total)
            refold.append(timed(lambda: fold(journal.events("long", stop=seq + 1)))[0])  # noqa: B023
            timeline = Timeline(journal, "long")
            first.append(timed(lambda: timeline.state_at(total - 1))[0])  # noqa: B023
            for _ in range(queries):
                seq = rng.randrange(total)
                later.append(timed(lambda: Timeline(journal, "long").state_at(seq))[0])  # noqa: B023
    return {
        "refold": statistics.median(refold),
        "first": statistics.median(first),
        "later": statistics.median(later),
    }


def bench_diff(path: Path, total: int, loop: int, runs: int) -> dict[str, float]:
    """Reading two long sessions, diffing them, and diffing two loops (medians, seconds)."""
    with Journal.open(path) as journal:
        append_all(journal, "diff-a", session_events(1, total))
        append_all(journal, "diff-b", changed_once(session_events(1, total), total // 2))
        append_all(journal, "loop-a", loop_events(loop, edits=False))
        append_all(journal, "loop-b", loop_events(loop, edits=True))

        def diff(a: str, b: str, differences: Callable[[int], bool]) -> Callable[[], None]:
            def run() -> None:
                result = diff_records(read_records(journal, a), read_records(journal, b))
                if not differences(result.differences):
                    raise SystemExit(f"diff {a} {b}: {result.differences} difference(s)")

            return run

        times: dict[str, list[float]] = {"read": [], "diff": [], "loop": []}
        for _ in range(runs):
            took, pair = timed(
                lambda: (read_records(journal, "diff-a"), read_records(journal, "diff-b"))
            )
            times["read"].append(took)
            took, result = timed(lambda: diff_records(*pair))  # noqa: B023
            if result.differences != 1:
                raise SystemExit(f"the one-event diff found {result.differences} difference(s)")
            times["diff"].append(took)
            times["loop"].append(timed(diff("loop-a", "loop-b", lambda n: 0 < n <= 30))[0])
        small = max(loop // 10, 10)
        prints_a = [fingerprint(r) for r in read_records(journal, "loop-a")[:small]]
        prints_b = [fingerprint(r) for r in read_records(journal, "loop-b")[:small]]
    plain = median_of(
        max(1, runs // 2),
        lambda: difflib.SequenceMatcher(None, prints_a, prints_b, autojunk=False).get_opcodes(),
    )
    return {name: statistics.median(values) for name, values in times.items()} | {
        "plain": plain,
        "plain_events": float(small),
    }


# -- the report ------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="tool calls of the replayed run")
    parser.add_argument("--events", type=int, default=None, help="events of the long sessions")
    parser.add_argument("--loop", type=int, default=None, help="events of the repeating loops")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (median)")
    parser.add_argument("--queries", type=int, default=200, help="random seqs asked per run")
    parser.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu", help="what to time with")
    return parser.parse_args(argv)


def replay_rows(steps: int, replayed: dict[str, float]) -> list[list[str]]:
    ratio = replayed["replay"] / replayed["original"]
    events = int(replayed["events"])
    return [
        ["(a)", f"original run, {steps} steps ({events} events)", ms(replayed["original"]), "", ""],
        [
            "(b)",
            "replay of that run, compared event by event",
            ms(replayed["replay"]),
            f"{ratio:.2f}× (a)",
            f"≤ 2× (a): {MET[ratio <= 2]}",
        ],
        ["(c)", f"fold of the recording ({events} events)", ms(replayed["fold"]), "", ""],
    ]


def state_rows(total: int, queries: int, state: dict[str, float]) -> list[list[str]]:
    return [
        [
            "(d)",
            f"state at a random seq, refold from 0 ({total:,} events)",
            ms(state["refold"]),
            "",
            "",
        ],
        [
            "(e)",
            "state, first question (last seq; stores the snapshots)",
            ms(state["first"]),
            "",
            "",
        ],
        [
            "(f)",
            f"state at a random seq, snapshots exist ({queries} per run)",
            ms(state["later"]),
            f"{state['refold'] / state['later']:,.0f}× faster than (d)",
            "milliseconds",
        ],
    ]


def diff_rows(total: int, loop: int, diffs: dict[str, float]) -> list[list[str]]:
    return [
        ["(g)", f"read two {total:,}-event sessions", ms(diffs["read"]), "", ""],
        [
            "(h)",
            "diff of the two, one event differs",
            ms(diffs["diff"]),
            f"{diffs['diff'] / diffs['read']:.2f}× (g)",
            f"< 1 s: {MET[diffs['diff'] < 1]}",
        ],
        [
            "(i)",
            "read + diff (agent-journal diff A B)",
            ms(diffs["read"] + diffs["diff"]),
            "",
            "report",
        ],
        [
            "(j)",
            f"read + diff of two {loop:,}-event loops of identical calls",
            ms(diffs["loop"]),
            "",
            "report",
        ],
        [
            "(k)",
            f"plain difflib over {int(diffs['plain_events']):,} loop events (quadratic)",
            ms(diffs["plain"]),
            f"≈ {diffs['plain'] * 100:,.0f} s at {loop:,}",
            "",
        ],
    ]


MET = {True: "yes", False: "NO"}


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(argv)
    quick = options.quick
    steps = options.steps or (200 if quick else 1000)
    total = options.events or (10_000 if quick else 100_000)
    loop = options.loop or (4_000 if quick else 20_000)
    runs = options.repeat or (3 if quick else 5)
    if options.clock == "wall":
        CLOCK[0] = time.perf_counter
    replayed = bench_replay(steps, runs)
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as folder:
        state = bench_state(Path(folder) / "state.db", total, runs, options.queries)
        diffs = bench_diff(Path(folder) / "diff.db", total, loop, runs)
    rows = [
        *replay_rows(steps, replayed),
        *state_rows(total, options.queries, state),
        *diff_rows(total, loop, diffs),
    ]
    met = replayed["replay"] <= 2 * replayed["original"] and diffs["diff"] < 1
    heading = f"{machine()}; {options.clock} time, median of {runs} runs"
    table = Table(["", "what", "ms>", "versus>", "target"], rows)
    return report(Report([[heading, table]], code=0 if met else 1))


if __name__ == "__main__":
    sys.exit(main())
