"""What the benches share: the realistic workload, the reference rows, timing and the report.

Imported by the bench scripts (``python bench/NAME.py`` puts this folder on the path).
Each bench measures in functions that return figures or rows, builds a `Report` of them
(lines and tables) and prints it with `report`, the one printing function.
"""

from __future__ import annotations

import gc
import hashlib
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    SessionStarted,
    ToolCall,
    ToolSpec,
    Usage,
    UserInput,
    VerificationFailed,
)

GENESIS = "0" * 64
TS = "2026-11-29T23:00:00.123456Z"
MOMENT = datetime(2026, 11, 29, 23, 0, 0, 123456, tzinfo=UTC)
"""What our appends are stamped with: a datetime, as the runtime's clock gives."""
WORDS = (
    "order refund customer invoice shipping address total amount status pending delivered "
    "account balance payment card ticket priority search result weather city forecast "
    "please check the latest update for my request and tell me what happens next"
).split()
TOOLS = ("lookup_order", "search_docs", "get_weather", "refund", "read_file")

# -- realistic events ----------------------------------------------------------------------


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def session_start(index: int) -> SessionStarted:
    return SessionStarted(
        agent="examples.support:build",
        config=AgentConfig(
            tools=[
                ToolSpec(
                    name=name,
                    description=f"{name.replace('_', ' ')} for the user",
                    parameters={
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "query": {"type": "string"}},
                    },
                    schema_hash=hashlib.sha256(name.encode()).hexdigest()[:16],
                    parallel_safe=name != "refund",
                )
                for name in TOOLS
            ]
        ),
        system_prompt="You are a careful support agent. Use the tools; never guess.",
        system_prompt_hash=hashlib.sha256(b"prompt").hexdigest(),
        model="gpt-x-mini",
        model_settings={"temperature": 0.0, "max_tokens": 1024},
        code_version="0.1.0+bench",
        metadata={"bench": True, "session": index},
    )


def turn_events(rng: random.Random, turn: int) -> Iterator[AgentEvent]:
    """One turn: a user input, one to three tool steps, an answer (~300-byte events)."""
    yield UserInput(text=_words(rng, 10, 25) + "?")
    for step in range(rng.randint(1, 3)):
        call_id = f"call_{turn}_{step}_{rng.randrange(10**6):06d}"
        tool = rng.choice(TOOLS)
        args = {"id": f"A-{rng.randrange(10**5)}", "query": _words(rng, 2, 5)}
        yield ActionProposed(
            calls=[ToolCall(call_id=call_id, tool=tool, args=args)],
            text=_words(rng, 3, 8),
            model="gpt-x-mini",
            usage=Usage(
                input_tokens=rng.randint(500, 4000),
                output_tokens=rng.randint(10, 200),
                cached_tokens=rng.randint(0, 400),
            ),
            latency_ms=round(rng.uniform(200, 2000), 3),
            cost=round(rng.uniform(0.0001, 0.01), 6),
        )
        roll = rng.random()
        if roll < 0.05:
            yield VerificationFailed(
                call_id=call_id,
                tool=tool,
                stage="schema",
                message=f"argument id must look like A-123, got {args['id']!r}; fix it",
            )
        elif roll < 0.12:
            yield ActionFailed(
                call_id=call_id,
                tool=tool,
                kind="business",
                message=f"{tool}: nothing found for {args['id']}",
                args=args,
                duration_ms=round(rng.uniform(1, 50), 3),
            )
        else:
            yield ActionCommitted(
                call_id=call_id,
                tool=tool,
                args=args,
                result={
                    "ok": True,
                    "id": args["id"],
                    "status": rng.choice(["pending", "shipped", "delivered"]),
                    "total": round(rng.uniform(1, 500), 2),
                    "note": _words(rng, 2, 6),
                },
                duration_ms=round(rng.uniform(1, 80), 3),
            )
    yield AgentCompleted(answer=_words(rng, 8, 20) + ".")


def session_events(index: int, count: int, seed: int = 7) -> Iterator[AgentEvent]:
    """``count`` events of session ``index``: its start, then whole turns (the last cut)."""
    rng = random.Random(seed * 1_000_003 + index)
    yield session_start(index)
    made, turn = 1, 0
    while True:
        for event in turn_events(rng, turn):
            if made == count:
                return
            yield event
            made += 1
        turn += 1


def workload(total: int) -> list[tuple[str, list[AgentEvent]]]:
    """``total`` events over several sessions (1000 events per session, 2 to 20 sessions)."""
    sessions = max(2, min(20, total // 1000))
    per, extra = divmod(total, sessions)
    return [
        (f"bench-{i:03d}", list(session_events(i, per + (1 if i < extra else 0))))
        for i in range(sessions)
    ]


def sessions_of(count: int, per: int, prefix: str = "bench") -> list[tuple[str, list[AgentEvent]]]:
    """``count`` sessions of ``per`` events each (``PREFIX-000``, ``PREFIX-001``, ...)."""
    return [(f"{prefix}-{i:03d}", list(session_events(i, per))) for i in range(count)]


def payloads_of(work: list[tuple[str, list[AgentEvent]]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The JSON payloads of a workload (what the raw references start from)."""
    return [(sid, [e.model_dump(mode="json") for e in events]) for sid, events in work]


# -- the reference rows: the same canonical bytes and hash chain, computed here --------------


def reference_row(
    session_id: str, seq: int, payload: dict[str, Any], chain: str
) -> tuple[Any, ...]:
    """Canonical bytes (sorted keys) of the flat record and its sha256 chain hash."""
    record = dict(payload, session_id=session_id, seq=seq, ts=TS, v=1)
    body = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    digest = hashlib.sha256(chain.encode("ascii"))
    digest.update(body)
    return (session_id, seq, TS, payload["type"], 1, body.decode(), digest.hexdigest(), "")


def reference_rows(payloads: list[tuple[str, list[dict[str, Any]]]]) -> Iterator[tuple[Any, ...]]:
    """Every session's reference rows, session after session, each chained from genesis."""
    for session_id, items in payloads:
        chain = GENESIS
        for seq, payload in enumerate(items):
            row = reference_row(session_id, seq, payload, chain)
            chain = row[6]
            yield row


def body_sizes(payloads: list[tuple[str, list[dict[str, Any]]]]) -> list[int]:
    """The canonical body size of every event, in bytes."""
    return [len(row[5].encode()) for row in reference_rows(payloads)]


def interleave(work: list[tuple[str, list[Any]]]) -> list[tuple[str, int, Any]]:
    """Round-robin over sessions, as many live sessions would append."""
    order = []
    longest = max(len(items) for _, items in work)
    for seq in range(longest):
        for session_id, items in work:
            if seq < len(items):
                order.append((session_id, seq, items[seq]))
    return order


# -- timing ----------------------------------------------------------------------------------

_LAST = [0.0]
"""Seconds of the region the last case timed (each case times its own region)."""
CLOCK: list[Callable[[], float]] = [time.process_time]
"""What the cases time with: CPU time of this process by default (a shared machine's other
load inflates wall time but hardly CPU time), or wall time (``--clock wall``)."""


def take_turns(runs: int, cases: Mapping[str, Callable[[int], None]]) -> dict[str, list[float]]:
    """Seconds of each case (called with the round) in each of ``runs`` rounds, in turns.

    Taking turns (rather than all runs of one case, then the next) keeps a load spike on a
    shared machine from landing on one side of a ratio only. Each case starts after a full
    garbage collection: the collector's debt from building the workload, or from the case
    before, is not paid inside whichever case happens to cross its threshold (one full pass
    over a prebuilt workload of 50,000 events costs tens of milliseconds). Each case sets
    `_LAST`.
    """
    times: dict[str, list[float]] = {name: [] for name in cases}
    for index in range(runs):
        for name, case in cases.items():
            gc.collect()
            case(index)
            times[name].append(_LAST[0])
    return times


def cpu_per_call(
    cases: Mapping[str, Callable[[int], None]], calls: int, repeat: int
) -> dict[str, float]:
    """The median µs of process CPU per call of each case, over ``repeat`` rounds in turns.

    Each case makes ``calls`` calls (it is given the count); a round runs every case once,
    so a load spike on a shared machine lands on both sides of the ratio.
    """
    found: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            started = time.process_time()
            case(calls)
            found[name].append((time.process_time() - started) / calls * 1e6)
    return {name: statistics.median(values) for name, values in found.items()}


def print_per_call(title: str, found: Mapping[str, float]) -> None:
    """`cpu_per_call`'s two cases, the reference first, and the second's ratio over it."""
    (bare_name, bare), (ours_name, ours) = found.items()
    width = max(len(bare_name), len(ours_name)) + 2
    print(f"{title} (CPU, median)")
    print(f"  {bare_name:<{width}} {bare:9.1f} µs/call")
    ratio = f"ratio {ours / bare:.2f}x  (+{ours - bare:.1f} µs)"
    print(f"  {ours_name:<{width}} {ours:9.1f} µs/call   {ratio}")


def measure(
    runs: int, cases: dict[str, Callable[[Path], None]], directory: Path
) -> dict[str, list[float]]:
    """`take_turns` over cases that each write a fresh file ``NAME-ROUND.db`` in ``directory``.

    Write files other than round 0's (which the reads use) are removed after use.
    """

    def on_file(name: str, case: Callable[[Path], None]) -> Callable[[int], None]:
        def run(index: int) -> None:
            case(directory / f"{name}-{index}.db")
            if index:
                for leftover in directory.glob(f"{name}-{index}.db*"):
                    leftover.unlink()

        return run

    return take_turns(runs, {name: on_file(name, case) for name, case in cases.items()})


def read_bodies(conn: Any, session_ids: Sequence[str], mark: str = "?") -> None:
    """Time the raw read: each session's bodies in seq order, each decoded by orjson.

    ``conn`` is a DB-API connection with ``execute``; ``mark`` its placeholder.
    """
    query = f"SELECT body FROM events WHERE session_id = {mark} ORDER BY seq"
    start = CLOCK[0]()
    for session_id in session_ids:
        for (body,) in conn.execute(query, (session_id,)):
            orjson.loads(body)
    _LAST[0] = CLOCK[0]() - start


def per_round_ratio(
    times: Mapping[str, list[float]], ours: str, reference: str, scale: float = 1.0
) -> float:
    """Median over rounds of ``ours / reference`` (both measured in the same round).

    ``scale`` is the reference's event count over ours, when they differ.
    """
    pairs = zip(times[ours], times[reference], strict=True)
    return statistics.median(x / y * scale for x, y in pairs)


def disk_bytes(path: Path) -> int:
    """Bytes on disk of a SQLite database: the file and its ``-wal``/``-shm`` companions."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


# -- output ----------------------------------------------------------------------------------

Row = tuple[str, str, float, float | None, str]
"""kind, what, value, ratio to the target's reference (or None), target (``(a) ≤ 2×``)."""


def met(ratio: float | None, target: str) -> str:
    """``yes``/``NO`` for a target ``... ≤ N×`` (blank without a limit)."""
    if "≤" not in target:
        return ""
    limit = float(target.split("≤ ")[1].rstrip("×"))
    return "yes" if ratio is not None and ratio <= limit else "NO"


def describe(events: int, sessions: int, sizes: Sequence[int], repeat: int) -> str:
    """``N events in S sessions, body B mean (min-max), median of R runs``."""
    return (
        f"{events:,} events in {sessions} sessions, body {statistics.mean(sizes):.0f} B mean "
        f"({min(sizes)}-{max(sizes)}), median of {repeat} runs"
    )


def read_rows(
    us: Mapping[str, float], ratio: Callable[[str, str], float], raw: str, ours: str, folded: str
) -> list[Row]:
    """The reading rows every bench prints: raw SELECT + decode, ours streamed, ours folded."""
    return [
        ("read", f"({raw}) raw SELECT + orjson.loads", us[raw], None, ""),
        (
            "read",
            f"({ours}) Journal.events (validated)",
            us[ours],
            ratio(ours, raw),
            f"({raw}) ≤ 3×",
        ),
        ("read", f"({folded}) fold(Journal.events)", us[folded], ratio(folded, raw), f"({raw})"),
    ]


@dataclass(frozen=True)
class Table:
    """A Markdown table: column names (one ending in ``>`` is right-aligned) and rows."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]


Block = Sequence["str | Table"]
"""Lines and tables printed one after the other."""


@dataclass(frozen=True)
class Report:
    """What a bench found: blocks printed with a blank line between, and its exit code."""

    blocks: Sequence[Block]
    code: int = 0


def report(found: Report) -> int:
    """Print a bench's report and return its exit code (1: a target was missed)."""
    for index, block in enumerate(found.blocks):
        if index:
            print()
        for item in block:
            if isinstance(item, Table):
                markdown(item.header, item.rows)
            else:
                print(item)
    return found.code


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print a Markdown table; a header ending in ``>`` is a right-aligned column."""
    names = [name.rstrip(">") for name in header]
    right = [name.endswith(">") for name in header]
    widths = [max(len(name), *(len(row[i]) for row in rows)) for i, name in enumerate(names)]

    def line(cells: Sequence[str]) -> str:
        padded = (
            f"{cell:>{width}}" if flush else f"{cell:{width}}"
            for cell, width, flush in zip(cells, widths, right, strict=True)
        )
        return "| " + " | ".join(padded) + " |"

    print(line(names))
    rules = ("-" * (w + 1) + (":" if r else "-") for w, r in zip(widths, right, strict=True))
    print("|" + "|".join(rules) + "|")
    for row in rows:
        print(line(row))


def speed_table(rows: Sequence[Row], unit: str = "µs/event") -> Table:
    """Rows as a table with a ratio, a target and whether it was met."""
    return Table(
        ["", "what", unit + ">", "ratio>", "target", "met"],
        [
            [kind, what, f"{value:.1f}", "" if r is None else f"{r:.2f}×", goal, met(r, goal)]
            for kind, what, value, r, goal in rows
        ],
    )


@dataclass(frozen=True)
class Ratio:
    """One line of `bench/run_all.py`'s table: ours against a reference, in one run.

    Each bench that feeds the table has a ``quick_ratios() -> list[Ratio]`` function that
    measures a small run of its cases (seconds, not minutes) and returns these.
    """

    what: str
    """What is ours (``one-event Journal.append``)."""
    reference: str
    """What it is compared against (``raw BEGIN-INSERT-COMMIT of the same row``)."""
    clock: str
    """``cpu``, ``wall`` or ``rss``."""
    ratio: float
    """Ours over the reference (a median of per-round ratios where there are rounds)."""
    target: str
    """``≤ 2×``, ``≥ 3×`` or blank (a figure shown for context)."""

    @property
    def met(self) -> str:
        """``yes``/``NO`` against the target (blank without one)."""
        if not self.target:
            return ""
        limit = float(self.target.split(" ")[1].rstrip("×"))
        ok = self.ratio <= limit if self.target.startswith("≤") else self.ratio >= limit
        return "yes" if ok else "NO"


def machine() -> str:
    """One line naming the machine: CPU model, cores, OS, Python."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                model,
            )
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} cpus, {platform.system()} {platform.release()}, "
        f"python {platform.python_version()}"
    )
