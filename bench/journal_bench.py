"""Speed of the journal against raw sqlite3 doing the same work, from one run.

    python bench/journal_bench.py [--events N] [--steps S] [--repeat R] [--quick]

Prints µs per event (median of R runs) for:

writing
  (a) reference: raw sqlite3 ``executemany`` of all events in ONE transaction, each event
      serialised canonically (orjson, sorted keys) and sha256 hash-chained by this script;
  (b) reference: the same rows with a commit per event (BEGIN IMMEDIATE ... COMMIT);
  (b+) the floor of (d): the rows of (d), summaries included, committed one by one into our
      schema (its triggers fire) by our INSERT, each transaction also writing the session's
      projection row by a guarded UPDATE of the columns an append sets. Every value is
      computed by our code before timing (where (b) serialises and hashes inside it): the
      SQL a one-event append cannot shed, and nothing else;
  (c) ours: ``Journal.append`` with many events per call (one call per session chunk);
  (d) ours: ``Journal.append`` with one event per call.
steps (µs per step: a model output proposing one tool call, then the tool's result)
  (r) reference: two bare BEGIN-INSERT-COMMITs of the step's two rows, built before timing;
  (s) ours: ``Recorder.model_output`` + ``Recorder.tool_result``, one append each, in turns
      of three steps (only the steps timed).
WAL pages: the pages a one-event commit adds to the WAL (frames counted over the commits of
(d) and (b), a reader holding the WAL so no checkpoint resets it), ours against raw.
reading
  (e) reference: raw ``SELECT body`` + ``orjson.loads`` per row;
  (f) ours: ``Journal.events`` (paged streaming, each event validated into its model);
  (g) ours: ``journal.fold`` over ``Journal.events``.

Both sides write to a file in WAL mode with ``synchronous=NORMAL`` (the journal's default)
into a table of the same shape (the reference table has the same columns and keys but no
triggers and no ``sessions`` projection: those are part of what we pay for; it numbers its
rows by AUTOINCREMENT, the plain way never to give a position twice). The events
are realistic (~300 bytes of canonical body: user inputs, proposals with one tool call
and token usage, commits with small results, the odd failure and rejection) spread over
several sessions, and prebuilt before timing: the reference starts from the payload dicts,
ours from the pydantic models.

Memory: a child process streams (and folds) the first 100k events and then all 1M events of
one long session; its peak RSS growth above the RSS before streaming must stay flat.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from _common import (
    _LAST,
    CLOCK,
    GENESIS,
    MOMENT,
    Block,
    Ratio,
    Report,
    Row,
    Table,
    interleave,
    measure,
    per_round_ratio,
    read_bodies,
    read_rows,
    reference_row,
    reference_rows,
    report,
    session_events,
    speed_table,
    workload,
)

from capture import Recorder
from journal import ActionCommitted, ActionProposed, AgentEvent, Journal, fold
from journal._planner import SessionHead, plan_append
from journal._sqlstore import STATE_EVERY
from journal.canonical import chain_hash
from journal.projection import projection_row
from journal.sqlite import FIRST_INSERT, SQLiteJournal, without_nulls

# -- the reference: raw sqlite3 doing the same serialisation and hashing -------------------

REFERENCE_DDL = """CREATE TABLE events (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts TEXT NOT NULL,
    type TEXT NOT NULL,
    v INTEGER NOT NULL,
    body TEXT NOT NULL,
    hash TEXT NOT NULL,
    summary TEXT NOT NULL,
    UNIQUE (session_id, seq)
)"""
INSERT = (
    "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def reference_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(REFERENCE_DDL)
    return conn


def reference_batched(path: Path, payloads: list[tuple[str, list[dict[str, Any]]]]) -> None:
    conn = reference_connect(path)
    start = CLOCK[0]()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(INSERT, list(reference_rows(payloads)))
    conn.execute("COMMIT")
    _LAST[0] = CLOCK[0]() - start
    conn.close()


def reference_per_event(path: Path, order: list[tuple[str, int, dict[str, Any]]]) -> None:
    conn = reference_connect(path)
    heads: dict[str, str] = {}
    start = CLOCK[0]()
    for session_id, seq, payload in order:
        row = reference_row(session_id, seq, payload, heads.get(session_id, GENESIS))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, row)
        conn.execute("COMMIT")
        heads[session_id] = row[6]
    _LAST[0] = CLOCK[0]() - start
    conn.close()


FLOOR_INSERT = FIRST_INSERT
"""Our insert: its position past every one ever given (a plain INSERT could reuse one)."""


def floor_steps(
    order: list[tuple[str, int, AgentEvent]],
) -> list[tuple[tuple[Any, ...], str, Sequence[Any]]]:
    """Per event, our row and the SQL + parameters that bring its session's projection row
    up to date: what ``Journal.append`` writes, computed by our code before any timing."""
    heads: dict[str, SessionHead] = {}
    written: dict[str, dict[str, Any]] = {}
    steps = []
    for session_id, _seq, event in order:
        head = heads.get(session_id)
        plan = plan_append(
            session_id, head, [event], expected_seq=None, ts=MOMENT, hasher=chain_hash
        )
        heads[session_id] = SessionHead(plan.rows[-1].seq, plan.head_hash, plan.state)
        row = projection_row(plan.state, plan.head_hash)
        before = written.get(session_id)
        written[session_id] = row
        if before is None:
            names = [*row, "session_id"]
            sql = f"INSERT INTO sessions({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
            params = [*row.values(), session_id]
        else:
            state_due = row["last_seq"] // STATE_EVERY != before["last_seq"] // STATE_EVERY
            names = [
                n
                for n in row
                if n != "session_id"  # the key: setting it rewrites the primary-key index
                and (n not in SQLiteJournal.INDEXED_COLUMNS or row[n] != before[n])
                and (n != "state" or state_due)  # written every STATE_EVERY events
            ]
            sql = (
                f"UPDATE sessions SET {', '.join(f'{n} = ?' for n in names)} "
                "WHERE session_id = ? AND last_seq = ?"
            )
            params = [*(row[n] for n in names), session_id, before["last_seq"]]
            if not state_due:
                row["state"] = before["state"]
        row_values: tuple[Any, ...] = plan.rows[0][:8]
        steps.append((row_values, *without_nulls(sql, params)))
    return steps


def floor_per_event(path: Path, steps: list[tuple[tuple[Any, ...], str, Sequence[Any]]]) -> None:
    """(b) into our schema (its triggers fire), with the projection row written in the same
    transaction by a guarded UPDATE: the SQL a one-event append cannot do without."""
    with Journal.open(path):
        pass  # our tables, indexes and triggers
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    start = CLOCK[0]()
    for row, sql, params in steps:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, params)
        conn.execute(FLOOR_INSERT, row)
        conn.execute("COMMIT")
    _LAST[0] = CLOCK[0]() - start
    conn.close()


# -- WAL pages per one-event commit ----------------------------------------------------------


def _wal_frames(path: Path) -> int:
    """Pages in ``path``'s WAL: its size less the 32-byte header, over page + frame header."""
    size = Path(f"{path}-wal").stat().st_size
    return max(0, size - 32) // (4096 + 24)


def _held_open(path: Path) -> sqlite3.Connection:
    """A reader holding a snapshot: no checkpoint resets the WAL, so every frame stays in it."""
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return reader


def wal_pages(directory: Path, order: list[tuple[str, int, AgentEvent]]) -> tuple[float, float]:
    """WAL pages per one-event commit, ours (`Journal.append`) and raw ((b)), over ``order``.

    Each side first writes one event of every session (so no session is new), then the rest
    of ``order`` one commit at a time; the WAL frames those commits add, over their count.
    """
    first = {session_id: index for index, (session_id, _, _) in reversed(list(enumerate(order)))}
    head, rest = order[: max(first.values()) + 1], order[max(first.values()) + 1 :]
    ours = directory / "wal-ours.db"
    with Journal.open(ours) as j:
        for session_id, _seq, event in head:
            j.append(session_id, [event], ts=MOMENT)
        reader = _held_open(ours)
        before = _wal_frames(ours)
        for session_id, _seq, event in rest:
            j.append(session_id, [event], ts=MOMENT)
        ours_frames = _wal_frames(ours) - before
        reader.close()
    raw = directory / "wal-raw.db"
    conn = reference_connect(raw)
    chains: dict[str, str] = {}
    for index, (session_id, seq, event) in enumerate(order):
        if index == len(head):
            reader = _held_open(raw)
            before = _wal_frames(raw)
        row = reference_row(
            session_id, seq, event.model_dump(mode="json"), chains.get(session_id, GENESIS)
        )
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, row)
        conn.execute("COMMIT")
        chains[session_id] = row[6]
    raw_frames = _wal_frames(raw) - before
    reader.close()
    conn.close()
    return ours_frames / len(rest), raw_frames / len(rest)


def reference_read(path: Path, session_ids: Sequence[str]) -> None:
    conn = sqlite3.connect(path)
    read_bodies(conn, session_ids)
    conn.close()


# -- ours ------------------------------------------------------------------------------------


def ours_batched(path: Path, work: list[tuple[str, list[AgentEvent]]], batch: int) -> None:
    with Journal.open(path) as j:
        start = CLOCK[0]()
        for session_id, events in work:
            for offset in range(0, len(events), batch):
                j.append(session_id, events[offset : offset + batch], ts=MOMENT)
        _LAST[0] = CLOCK[0]() - start


def ours_per_event(path: Path, order: list[tuple[str, int, AgentEvent]]) -> None:
    with Journal.open(path) as j:
        start = CLOCK[0]()
        for session_id, _seq, event in order:
            j.append(session_id, [event], ts=MOMENT)
        _LAST[0] = CLOCK[0]() - start


def ours_read(path: Path, session_ids: Sequence[str]) -> None:
    with Journal.open(path, create=False) as j:
        start = CLOCK[0]()
        for session_id in session_ids:
            for _event in j.events(session_id):
                pass
        _LAST[0] = CLOCK[0]() - start


def ours_fold(path: Path, session_ids: Sequence[str]) -> None:
    with Journal.open(path, create=False) as j:
        start = CLOCK[0]()
        for session_id in session_ids:
            fold(j.events(session_id))
        _LAST[0] = CLOCK[0]() - start


# -- a Recorder step against two bare commits ---------------------------------------------------


Step = tuple[dict[str, Any], dict[str, Any]]
"""One step's model output (a proposal with one tool call) and its tool result, as dicts."""


def recorder_steps(count: int) -> list[Step]:
    """``count`` realistic steps (the workload's proposals and the results committed)."""
    steps: list[Step] = []
    for _sid, events in workload(max(2_000, count * 4)):
        for proposal, outcome in zip(events, events[1:], strict=False):
            if isinstance(proposal, ActionProposed) and isinstance(outcome, ActionCommitted):
                steps.append((proposal.model_dump(), outcome.model_dump()))
    return steps[:count]


def bare_steps(path: Path, steps: list[Step]) -> None:
    """(r): each step's two rows, built before timing, each its own BEGIN-INSERT-COMMIT."""
    conn = reference_connect(path)
    rows, chain = [], GENESIS
    for seq, payload in enumerate(payload for step in steps for payload in step):
        rows.append(reference_row("bare", seq, payload, chain))
        chain = rows[-1][6]
    start = CLOCK[0]()
    for row in rows:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, row)
        conn.execute("COMMIT")
    _LAST[0] = CLOCK[0]() - start
    conn.close()


STEPS_PER_TURN = 3
"""Steps of a turn in (s): the state a turn keeps (its calls' repeat keys) stays as small as
in a real session's turn (the default step limit is 10)."""


def recorder_case(path: Path, steps: list[Step]) -> None:
    """(s): `Recorder.model_output` + `Recorder.tool_result` per step, one append each.

    Turns of `STEPS_PER_TURN` steps; only the steps are timed (not the user input and final
    answer around them).
    """
    with Journal.open(path) as journal:
        recorder = Recorder(journal, "recorded")
        recorder.start(agent="bench:agent", model="gpt-x-mini", system_prompt="Be careful.")
        clock, elapsed = CLOCK[0], 0.0
        for index, (proposal, outcome) in enumerate(steps):
            if index % STEPS_PER_TURN == 0:
                if index:
                    recorder.final("Done.")
                recorder.user_input("Where is my order?")
            start = clock()
            recorder.model_output(
                calls=proposal["calls"],
                text=proposal["text"],
                usage=proposal["usage"],
                latency_ms=proposal["latency_ms"],
                cost=proposal["cost"],
            )
            recorder.tool_result(
                outcome["call_id"], outcome["result"], duration_ms=outcome["duration_ms"]
            )
            elapsed += clock() - start
        _LAST[0] = elapsed


# -- memory ----------------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so the peak covers only what follows."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(path: str, stop: int) -> None:
    """Stream and fold the first ``stop`` events of session ``long``; print RSS figures (KiB).

    The baseline is taken after the imports, the connection and the first page; the peak
    (VmHWM, reset at the baseline when the kernel allows it) covers the streaming only.
    """
    with Journal.open(path, create=False) as j:
        events = j.events("long", stop=stop)
        first = next(events)
        state = fold([first])
        reset = _reset_peak()
        base = _status_kib("VmRSS")
        start = time.perf_counter()
        state = fold(events, state)
        elapsed = time.perf_counter() - start
        peak = _status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {"base": base, "peak": peak, "events": state.events, "s": elapsed, "reset": reset}
    print(orjson.dumps(result).decode())


def build_long_session(path: Path, total: int) -> None:
    with Journal.open(path) as j:
        chunk: list[AgentEvent] = []
        for event in session_events(0, total, seed=11):
            chunk.append(event)
            if len(chunk) == 10_000:
                j.append("long", chunk, ts=MOMENT)
                chunk = []
        if chunk:
            j.append("long", chunk, ts=MOMENT)


def measure_memory(directory: Path, sizes: Sequence[int]) -> list[dict[str, Any]]:
    path = directory / "long.db"
    build_long_session(path, max(sizes))
    results = []
    for size in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(path), str(size)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append({"size": size, **orjson.loads(out.strip().splitlines()[-1])})
    return results


# -- the run: settings, measuring, the report ---------------------------------------------


@dataclass(frozen=True)
class Settings:
    events: int
    per_event: int
    steps: int
    repeat: int
    batch: int
    memory: list[int]
    clock: str


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=None, help="events written and read")
    parser.add_argument("--per-event", type=int, default=None, help="events for per-event appends")
    parser.add_argument("--steps", type=int, default=None, help="Recorder steps timed")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (median)")
    parser.add_argument("--batch", type=int, default=1000, help="events per batched append call")
    parser.add_argument("--memory", type=int, nargs="*", default=None, help="streamed event counts")
    parser.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    parser.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="time CPU (default) or wall time"
    )
    parser.add_argument("--memory-child", nargs=2, metavar=("DB", "STOP"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def settings(args: argparse.Namespace) -> Settings:
    events = args.events or (5_000 if args.quick else 50_000)
    default_memory = [10_000, 100_000] if args.quick else [100_000, 1_000_000]
    return Settings(
        events=events,
        per_event=min(events, args.per_event or (2_000 if args.quick else 10_000)),
        steps=args.steps or (500 if args.quick else 2_000),
        repeat=args.repeat or (3 if args.quick else 5),
        batch=args.batch,
        memory=args.memory if args.memory is not None else default_memory,
        clock=args.clock,
    )


@dataclass(frozen=True)
class Writes:
    """The writing cases of a run and how many events (steps for (r), (s)) each writes."""

    cases: dict[str, Callable[[Path], None]]
    counts: dict[str, int]
    body_sizes: list[int]
    sessions: int


def write_cases(s: Settings) -> Writes:
    """(a) to (d), (r) and (s), their workloads built before any timing."""
    work = workload(s.events)
    payloads = [(sid, [e.model_dump(mode="json") for e in evs]) for sid, evs in work]
    small = workload(s.per_event)
    small_payloads = [(sid, [e.model_dump(mode="json") for e in evs]) for sid, evs in small]
    floor = floor_steps(interleave(small))
    steps = recorder_steps(s.steps)
    return Writes(
        cases={
            "a": lambda p: reference_batched(p, payloads),
            "b": lambda p: reference_per_event(p, interleave(small_payloads)),
            "b+": lambda p: floor_per_event(p, floor),
            "c": lambda p: ours_batched(p, work, s.batch),
            "d": lambda p: ours_per_event(p, interleave(small)),
            "r": lambda p: bare_steps(p, steps),
            "s": lambda p: recorder_case(p, steps),
        },
        counts={"a": s.events, "b": s.per_event, "b+": s.per_event, "c": s.events}
        | {"d": s.per_event, "r": len(steps), "s": len(steps)},
        body_sizes=[len(row[5]) for row in reference_rows(payloads)],
        sessions=len(work),
    )


def measure_speed(s: Settings) -> tuple[list[str], list[Row]]:
    """Time (a) to (g), (r) and (s) in turns; return the heading lines and the rows."""
    writes = write_cases(s)
    session_ids = [f"bench-{i:03d}" for i in range(writes.sessions)]
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        directory = Path(tmp)
        ours_db, ref_db = directory / "c-0.db", directory / "a-0.db"
        times = measure(
            s.repeat,
            writes.cases
            | {
                "e": lambda _p: reference_read(ref_db, session_ids),
                "f": lambda _p: ours_read(ours_db, session_ids),
                "g": lambda _p: ours_fold(ours_db, session_ids),
            },
            directory,
        )
        ours_pages, raw_pages = wal_pages(directory, interleave(workload(s.per_event)))
    per_us = {
        k: statistics.median(v) / writes.counts.get(k, s.events) * 1e6 for k, v in times.items()
    }

    def ratio(ours: str, reference: str) -> float:
        return per_round_ratio(times, ours, reference)

    rows: list[Row] = [
        ("write", "(a) raw executemany, one transaction", per_us["a"], None, ""),
        ("write", "(b) raw commit per event", per_us["b"], None, ""),
        (
            "write",
            "(b+) (b) + our triggers + projection row",
            per_us["b+"],
            ratio("b+", "b"),
            "(b): floor of (d)",
        ),
        (
            "write",
            f"(c) Journal.append, {s.batch} events/call",
            per_us["c"],
            ratio("c", "a"),
            "(a) ≤ 1.8×",
        ),
        ("write", "(d) Journal.append, 1 event/call", per_us["d"], ratio("d", "b"), "(b) ≤ 2×"),
        ("step", "(r) raw: two bare INSERT+COMMITs, µs/step", per_us["r"], None, ""),
        (
            "step",
            "(s) Recorder model_output + tool_result, µs/step",
            per_us["s"],
            ratio("s", "r"),
            "(r) ≤ 3×",
        ),
        *read_rows(per_us, ratio, "e", "f", "g"),
    ]
    sizes = writes.body_sizes
    heading = [
        f"agent-journal bench: {s.events} events ({s.per_event} for per-event appends, "
        f"{writes.counts['s']} Recorder steps) in {writes.sessions} sessions, body "
        f"{statistics.mean(sizes):.0f} B mean ({min(sizes)}-{max(sizes)}), "
        f"median of {s.repeat} runs",
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} cpus, WAL + synchronous=NORMAL, {s.clock} time",
        f"WAL pages per one-event commit: ours {ours_pages:.2f}, raw (b) {raw_pages:.2f} "
        f"({ours_pages / raw_pages:.2f}×)",
    ]
    return heading, rows


def quick_ratios() -> list[Ratio]:
    """The journal's lines of ``bench/run_all.py``: a small run (seconds), CPU time."""
    CLOCK[0] = time.process_time
    s = Settings(
        events=5_000, per_event=1_000, steps=300, repeat=3, batch=1000, memory=[], clock="cpu"
    )
    writes = write_cases(s)
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        directory = Path(tmp)
        wanted = ("a", "b", "c", "d", "r", "s")
        times = measure(s.repeat, {k: writes.cases[k] for k in wanted}, directory)
        ours_pages, raw_pages = wal_pages(directory, interleave(workload(s.per_event)))
    return [
        Ratio(
            "one-event Journal.append",
            "raw BEGIN-INSERT-COMMIT of the same row",
            "cpu",
            per_round_ratio(times, "d", "b"),
            "≤ 2×",
        ),
        Ratio(
            f"Journal.append, {s.batch} events/call",
            "raw executemany of the same rows",
            "cpu",
            per_round_ratio(times, "c", "a"),
            "≤ 1.8×",
        ),
        Ratio(
            "Recorder step (model_output + tool_result)",
            "two bare INSERT+COMMITs",
            "cpu",
            per_round_ratio(times, "s", "r"),
            "≤ 3×",
        ),
        Ratio(
            "WAL pages per one-event commit",
            "raw BEGIN-INSERT-COMMIT",
            "pages",
            ours_pages / raw_pages,
            "≤ 1.05×",
        ),
    ]


def memory_block(found: list[dict[str, Any]]) -> Block:
    """The memory table and its verdict (nothing when no size was asked for)."""
    if not found:
        return []
    growth = [(item["peak"] - item["base"]) / 1024 for item in found]
    flat = growth[-1] <= max(growth[0] * 1.5, growth[0] + 8)
    rows = [
        [f"{item['events']:,}", f"{item['peak'] / 1024:.1f}", f"{grew:.1f}", f"{item['s']:.1f}"]
        for item, grew in zip(found, growth, strict=True)
    ]
    header = ["streamed + folded events>", "peak RSS MiB>", "growth while streaming MiB>"]
    return [
        Table([*header, "seconds>"], rows),
        f"memory flat ({found[0]['events']:,} vs {found[-1]['events']:,} events): "
        f"{'yes' if flat else 'NO'} ({growth[0]:.1f} MiB vs {growth[-1]:.1f} MiB growth)",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return 0
    s = settings(args)
    heading, rows = measure_speed(s)
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        found = measure_memory(Path(tmp), s.memory) if s.memory else []
    return report(Report([heading, [speed_table(rows)], memory_block(found)]))


if __name__ == "__main__":
    sys.exit(main())
