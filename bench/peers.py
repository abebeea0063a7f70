"""This journal side by side with the tools users would pick instead, from one run.

    python bench/peers.py [--events N] [--sessions S] [--repeat R] [--steps 1 10 100 1000]
                          [--clock cpu|wall] [--plot PATH] [--quick]

The peers come from the optional extra ``bench`` (``pip install -e '.[bench]'``): the
``eventsourcing`` library with its SQLite persistence, LangGraph's ``SqliteSaver``
(``langgraph`` + ``langgraph-checkpoint-sqlite``) and matplotlib for the plot. A peer whose
package is missing is skipped with one line saying so.

Throughput: the same N events (default 100,000 of about 300 bytes of canonical JSON, over
100 sessions; the workload of ``journal_bench.py``), written and read back by

* raw sqlite3: ``executemany`` in one transaction, and a commit per event (the limits; the
  rows carry the same canonical bytes and sha256 chain, computed by this script);
* this journal: ``Journal.append`` of a whole session per call, and one event per call;
* eventsourcing: an ``Application`` with SQLite persistence, one aggregate per session, its
  payload dict in each event; ``save`` of a whole session at once, and after every event;
* LangGraph: ``SqliteSaver.put``, one checkpoint per step (per event) whose state is that
  step's event (the cheapest checkpoint it can write: nothing accumulates), called
  directly; beside it (for information) the same steps run as a graph, one node per step,
  next to our agent loop (bench/loop_bench.py: instant model and tool) per event it writes.

The time of each peer covers its own storage calls only (``save``, ``put``, ``invoke``):
building its events or checkpoints is left out, as building our pydantic events is. Every
store runs in WAL mode with ``synchronous=NORMAL`` (this journal's default): eventsourcing
and LangGraph default to SQLite's ``FULL``, so this script sets ``NORMAL`` on their
connections and checks it. Reading back: raw ``SELECT`` + ``orjson.loads``; our streaming
read (validated events) and a fold; eventsourcing's ``select_events`` + its mapper, and
``repository.get`` (its fold); LangGraph's ``list`` of a thread's checkpoints, and
``get_tuple`` (its latest state) against our ``Journal.state`` (the projection). Bytes on
disk are the database file after the writer closed it (WAL checkpointed).

Storage growth: one session of 1, 10, 100 and 1,000 steps (a step is one tool call: the
proposal and the result), stored as events here and run as a LangGraph graph whose state
(the messages so far) grows each step, one checkpoint per step; bytes on disk against
steps, a table and a log-log plot (``--plot``, default ``bench/storage_growth.png``).

Figures are medians of R runs (the cases take turns within a run); ratios are taken
within each run, then the median. ``quick_ratios()`` gives bench/run_all.py the ratios of a
small run.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import operator
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import NAMESPACE_URL, UUID, uuid5

from _common import (
    _LAST,
    CLOCK,
    MOMENT,
    Block,
    Ratio,
    Report,
    Table,
    body_sizes,
    describe,
    disk_bytes,
    interleave,
    machine,
    measure,
    payloads_of,
    per_round_ratio,
    report,
    session_events,
    sessions_of,
)
from journal_bench import (
    ours_batched,
    ours_fold,
    ours_per_event,
    ours_read,
    reference_batched,
    reference_per_event,
    reference_read,
)
from loop_bench import loop_run

from journal import AgentEvent, Journal

PLOT = Path(__file__).resolve().parent / "storage_growth.png"
PEERS = {
    "eventsourcing": ("eventsourcing",),
    "langgraph": ("langgraph", "langgraph.checkpoint.sqlite"),
    "matplotlib": ("matplotlib",),
}
EXTRA = "pip install -e '.[bench]'"
LOOP_TURNS, LOOP_STEPS = 5, 10
"""Each loop session: 5 turns of 10 tool calls (116 events)."""


def available(peer: str) -> bool:
    """Whether every module a peer needs can be imported."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in PEERS[peer])
    except (ModuleNotFoundError, ValueError):
        return False


def timed(call: Callable[[], Any]) -> float:
    """The clock's seconds for one call (the peers' cases add up their storage calls)."""
    start = CLOCK[0]()
    call()
    return CLOCK[0]() - start


# -- eventsourcing ---------------------------------------------------------------------------


def _es_normal_sync() -> None:
    """Make eventsourcing's SQLite connections use ``synchronous=NORMAL``, as ours do.

    It opens WAL itself but leaves SQLite's default (``FULL``: an fsync per commit) and has
    no setting for it, so its connection factory is wrapped (once).
    """
    from eventsourcing.sqlite import SQLiteConnectionPool

    create = SQLiteConnectionPool._create_connection
    if getattr(create, "normal_sync", False):
        return

    def normal(self: SQLiteConnectionPool) -> Any:
        connection = create(self)
        connection._sqlite_conn.execute("PRAGMA synchronous = NORMAL")
        return connection

    normal.normal_sync = True  # type: ignore[attr-defined]
    SQLiteConnectionPool._create_connection = normal  # type: ignore[method-assign]


@functools.cache
def _es_classes() -> tuple[Any, Any]:
    """The aggregate and application classes (made once: eventsourcing registers them)."""
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event

    class Session(Aggregate):
        """One session: created with its first payload, then one ``Recorded`` per event."""

        @staticmethod
        def create_id(name: str, first: dict[str, Any]) -> UUID:
            return uuid5(NAMESPACE_URL, name)

        @event("Started")
        def __init__(self, name: str, first: dict[str, Any]) -> None:
            self.name = name
            self.events = 1
            self.last_type = first["type"]

        @event("Recorded")
        def record(self, payload: dict[str, Any]) -> None:
            self.events += 1
            self.last_type = payload["type"]

    class Sessions(Application):  # type: ignore[type-arg]
        pass

    return Session, Sessions


def es_app(path: Path) -> Any:
    _es_normal_sync()
    _session, sessions = _es_classes()
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
    return sessions(env=env)


def es_synchronous(path: Path) -> str:
    app = es_app(path)
    try:
        with app.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA journal_mode")
            mode = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            sync = cursor.fetchone()[0]
    finally:
        app.close()
    return f"{mode} + synchronous={('OFF', 'NORMAL', 'FULL', 'EXTRA')[sync]}"


def es_batched(path: Path, payloads: list[tuple[str, list[dict[str, Any]]]]) -> None:
    session, _ = _es_classes()
    app = es_app(path)
    aggregates = []
    for session_id, items in payloads:
        aggregate = session(session_id, items[0])
        for payload in items[1:]:
            aggregate.record(payload)
        aggregates.append(aggregate)
    start = CLOCK[0]()
    for aggregate in aggregates:
        app.save(aggregate)
    _LAST[0] = CLOCK[0]() - start
    app.close()


def es_per_event(path: Path, order: list[tuple[str, int, dict[str, Any]]]) -> None:
    session, _ = _es_classes()
    app = es_app(path)
    live: dict[str, Any] = {}
    spent = 0.0
    for session_id, seq, payload in order:
        if seq == 0:
            live[session_id] = aggregate = session(session_id, payload)
        else:
            aggregate = live[session_id]
            aggregate.record(payload)
        spent += timed(lambda a=aggregate: app.save(a))
    _LAST[0] = spent
    app.close()


def es_read(path: Path, session_ids: Sequence[str]) -> None:
    app = es_app(path)
    start = CLOCK[0]()
    for session_id in session_ids:
        for stored in app.recorder.select_events(uuid5(NAMESPACE_URL, session_id)):
            app.mapper.to_domain_event(stored)
    _LAST[0] = CLOCK[0]() - start
    app.close()


def es_fold(path: Path, session_ids: Sequence[str]) -> None:
    app = es_app(path)
    start = CLOCK[0]()
    for session_id in session_ids:
        app.repository.get(uuid5(NAMESPACE_URL, session_id))
    _LAST[0] = CLOCK[0]() - start
    app.close()


# -- LangGraph -------------------------------------------------------------------------------


def lg_saver(path: Path) -> tuple[sqlite3.Connection, Any]:
    """A ``SqliteSaver`` on a connection in WAL mode with ``synchronous=NORMAL``."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    saver = SqliteSaver(conn)
    saver.setup()
    return conn, saver


def lg_synchronous(path: Path) -> str:
    conn, _saver = lg_saver(path)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    return f"{mode} + synchronous={('OFF', 'NORMAL', 'FULL', 'EXTRA')[sync]}"


def thread(session_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": session_id, "checkpoint_ns": ""}}


def lg_checkpoints(
    order: list[tuple[str, int, dict[str, Any]]],
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """One checkpoint per step, its state that step's event: (thread, checkpoint, metadata)."""
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    latest: dict[str, Any] = {}
    steps = []
    for session_id, seq, payload in order:
        checkpoint = create_checkpoint(latest.get(session_id) or empty_checkpoint(), None, seq)
        checkpoint["channel_values"] = {"event": payload}
        checkpoint["channel_versions"] = {"event": seq + 1}
        latest[session_id] = checkpoint
        steps.append((session_id, checkpoint, {"source": "loop", "step": seq}))
    return steps


def lg_put(path: Path, steps: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
    conn, saver = lg_saver(path)
    configs: dict[str, dict[str, Any]] = {}
    start = CLOCK[0]()
    for session_id, checkpoint, metadata in steps:
        config = configs.get(session_id) or thread(session_id)
        configs[session_id] = saver.put(config, checkpoint, metadata, {"event": metadata["step"]})
    _LAST[0] = CLOCK[0]() - start
    conn.close()


class Last(TypedDict):
    """A graph state that holds the latest event only (nothing accumulates)."""

    event: dict[str, Any]
    step: int


class Messages(TypedDict):
    """A graph state that holds every event so far (it grows each step)."""

    messages: Annotated[list[dict[str, Any]], operator.add]
    step: int


def lg_graph(saver: Any, state: type, feed: Callable[[int], dict[str, Any]], steps: int) -> Any:
    """A graph of one node run ``steps`` times, one checkpoint per step, on ``saver``."""
    from langgraph.graph import END, START, StateGraph

    def node(current: dict[str, Any]) -> dict[str, Any]:
        return {**feed(current["step"]), "step": current["step"] + 1}

    graph = StateGraph(state)
    graph.add_node("step", node)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda current: "step" if current["step"] < steps else END)
    return graph.compile(checkpointer=saver)


def lg_invoke(path: Path, payloads: list[tuple[str, list[dict[str, Any]]]]) -> None:
    conn, saver = lg_saver(path)
    spent = 0.0
    for session_id, items in payloads:
        app = lg_graph(saver, Last, lambda step, items=items: {"event": items[step]}, len(items))
        config = {**thread(session_id), "recursion_limit": len(items) + 10}
        spent += timed(lambda app=app, config=config: app.invoke({"step": 0}, config))
    _LAST[0] = spent
    conn.close()


def lg_list(path: Path, session_ids: Sequence[str]) -> None:
    conn, saver = lg_saver(path)
    start = CLOCK[0]()
    for session_id in session_ids:
        for _checkpoint in saver.list(thread(session_id)):
            pass
    _LAST[0] = CLOCK[0]() - start
    conn.close()


def lg_latest(path: Path, session_ids: Sequence[str]) -> None:
    conn, saver = lg_saver(path)
    start = CLOCK[0]()
    for session_id in session_ids:
        saver.get_tuple(thread(session_id))
    _LAST[0] = CLOCK[0]() - start
    conn.close()


def ours_state(path: Path, session_ids: Sequence[str]) -> None:
    with Journal.open(path, create=False) as j:
        start = CLOCK[0]()
        for session_id in session_ids:
            j.state(session_id)
        _LAST[0] = CLOCK[0]() - start


def ours_loop(path: Path, sessions: int) -> None:
    """The agent loop of bench/loop_bench.py (instant model and tool) into ``path``."""
    _LAST[0] = loop_run(path, sessions, LOOP_TURNS, LOOP_STEPS).seconds


def events_in(path: Path) -> int:
    """How many events a journal holds."""
    with Journal.open(path, create=False) as j:
        return sum(seq + 1 for seq, _hash in j.heads().values())


# -- storage growth --------------------------------------------------------------------------


def step_events(steps: int) -> tuple[AgentEvent, list[list[AgentEvent]]]:
    """A session start and ``steps`` steps (a proposal and its result), ~300 B events each."""
    events = (
        e
        for e in session_events(0, 20 * steps + 10, seed=3)
        if e.type in ("action_proposed", "action_committed")
    )
    start = next(session_events(0, 1, seed=3))
    found: list[list[AgentEvent]] = []
    pending: AgentEvent | None = None
    for event in events:
        if event.type == "action_proposed":
            pending = event
        elif pending is not None:
            found.append([pending, event])
            pending = None
        if len(found) == steps:
            break
    assert len(found) == steps, "the workload ran out of steps"
    return start, found


def growth_ours(path: Path, steps: int) -> int:
    start, found = step_events(steps)
    with Journal.open(path) as j:
        j.append("growth", [start], ts=MOMENT)
        for pair in found:
            j.append("growth", pair, ts=MOMENT)
    return disk_bytes(path)


def growth_langgraph(path: Path, steps: int) -> int:
    start, found = step_events(steps)
    conn, saver = lg_saver(path)
    first = [start.model_dump(mode="json")]
    dumped = [[e.model_dump(mode="json") for e in pair] for pair in found]
    app = lg_graph(saver, Messages, lambda step: {"messages": dumped[step]}, steps)
    app.invoke({"messages": first, "step": 0}, {**thread("growth"), "recursion_limit": steps + 10})
    conn.close()
    return disk_bytes(path)


def storage_growth(directory: Path, sizes: Sequence[int], langgraph: bool) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"this journal (events)": []}
    if langgraph:
        found["LangGraph SqliteSaver (checkpoint per step)"] = []
    for steps in sizes:
        found["this journal (events)"].append(growth_ours(directory / f"g-ours-{steps}.db", steps))
        if langgraph:
            path = directory / f"g-lg-{steps}.db"
            found["LangGraph SqliteSaver (checkpoint per step)"].append(
                growth_langgraph(path, steps)
            )
    return found


def linearity(sizes: Sequence[int], size_bytes: Sequence[int]) -> float:
    """How much more a step costs at the top of the range than lower down (1.0: linear).

    The bytes per step added between the last two sizes, over those added between the two
    before them (with fewer than three sizes: between the first two, over the first).
    """
    if len(sizes) < 3:
        return (size_bytes[-1] / sizes[-1]) / (size_bytes[0] / sizes[0])
    top = (size_bytes[-1] - size_bytes[-2]) / (sizes[-1] - sizes[-2])
    low = (size_bytes[-2] - size_bytes[-3]) / (sizes[-2] - sizes[-3])
    return top / low


def plot(path: Path, sizes: Sequence[int], growth: dict[str, list[int]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for (name, values), marker in zip(growth.items(), "os", strict=False):
        axes.plot(sizes, values, marker=marker, label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("steps in the session (a proposal and a result each)")
    axes.set_ylabel("bytes on disk (SQLite file)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


# -- the run: settings, measuring, the report ---------------------------------------------

LABELS = {
    "raw-batch": ("write", "raw sqlite3 executemany, one transaction"),
    "raw-each": ("write", "raw sqlite3, commit per event"),
    "ours-batch": ("write", "this journal: append, {per} events/call"),
    "ours-each": ("write", "this journal: append, 1 event/call"),
    "es-batch": ("write", "eventsourcing: save, {per} events/call"),
    "es-each": ("write", "eventsourcing: save per event"),
    "lg-put": ("write", "LangGraph: SqliteSaver.put, checkpoint per step"),
    "lg-graph": ("write", "LangGraph: graph.invoke, node per step ({graph} ev)"),
    "loop": ("write", "this journal: agent loop, instant model + tool ({loop} ev)"),
    "raw-read": ("read", "raw SELECT + orjson.loads"),
    "ours-read": ("read", "this journal: events() (validated)"),
    "ours-fold": ("read", "this journal: fold(events())"),
    "es-read": ("read", "eventsourcing: select_events + mapper"),
    "es-fold": ("read", "eventsourcing: repository.get (its fold)"),
    "lg-list": ("read", "LangGraph: list (every checkpoint)"),
    "ours-state": ("state", "this journal: state() (projection)"),
    "lg-latest": ("state", "LangGraph: get_tuple (latest checkpoint)"),
}
"""Case -> (kind, what); ``{per}``, ``{graph}`` and ``{loop}`` are filled in from the run."""


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=None, help="events written and read")
    parser.add_argument("--sessions", type=int, default=None, help="sessions they are spread over")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (median)")
    parser.add_argument("--graph-events", type=int, default=None, help="events for graph.invoke")
    parser.add_argument("--steps", type=int, nargs="*", default=None, help="storage growth sizes")
    parser.add_argument(
        "--plot", type=Path, default=None, help=f"PNG path (default: {PLOT}; none with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="time CPU (default) or wall time"
    )
    return parser.parse_args(argv)


@dataclass
class Throughput:
    """What the throughput cases measured: seconds per round, bytes on disk, durability."""

    times: dict[str, list[float]]
    on_disk: dict[str, int]
    durability: dict[str, str]
    counts: dict[str, int]
    labels: dict[str, tuple[str, str]]


def measure_throughput(
    work: list[tuple[str, list[AgentEvent]]], graph_events: int, repeat: int, have: dict[str, bool]
) -> Throughput:
    """Every write and read case of every installed peer, in turns."""
    per = len(work[0][1])
    events = sum(len(items) for _, items in work)
    payloads = payloads_of(work)
    order = interleave(payloads)
    ours_order = interleave(work)
    session_ids = [sid for sid, _ in work]
    graph_payloads = [(sid, items[: max(1, graph_events // len(work))]) for sid, items in payloads]
    graph_events = sum(len(items) for _, items in graph_payloads)
    loop_sessions = max(1, graph_events // 100)
    cases: dict[str, Callable[[Path], None]] = {
        "raw-batch": lambda p: reference_batched(p, payloads),
        "raw-each": lambda p: reference_per_event(p, order),
        "ours-batch": lambda p: ours_batched(p, work, per),
        "ours-each": lambda p: ours_per_event(p, ours_order),
        "loop": lambda p: ours_loop(p, loop_sessions),
    }
    directory = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    durability = {"raw sqlite3 and this journal": "wal + synchronous=NORMAL (set by each)"}
    if have["eventsourcing"]:
        durability["eventsourcing"] = es_synchronous(directory / "check-es.db")
        cases["es-batch"] = lambda p: es_batched(p, payloads)
        cases["es-each"] = lambda p: es_per_event(p, order)
    if have["langgraph"]:
        durability["LangGraph"] = lg_synchronous(directory / "check-lg.db")
        steps = lg_checkpoints(order)
        cases["lg-put"] = lambda p: lg_put(p, steps)
        cases["lg-graph"] = lambda p: lg_invoke(p, graph_payloads)
    reads: dict[str, Callable[[Path], None]] = {
        "raw-read": lambda _p: reference_read(directory / "raw-batch-0.db", session_ids),
        "ours-read": lambda _p: ours_read(directory / "ours-batch-0.db", session_ids),
        "ours-fold": lambda _p: ours_fold(directory / "ours-batch-0.db", session_ids),
        "ours-state": lambda _p: ours_state(directory / "ours-batch-0.db", session_ids),
    }
    if have["eventsourcing"]:
        reads["es-read"] = lambda _p: es_read(directory / "es-batch-0.db", session_ids)
        reads["es-fold"] = lambda _p: es_fold(directory / "es-batch-0.db", session_ids)
    if have["langgraph"]:
        reads["lg-list"] = lambda _p: lg_list(directory / "lg-put-0.db", session_ids)
        reads["lg-latest"] = lambda _p: lg_latest(directory / "lg-put-0.db", session_ids)
    try:
        times = measure(repeat, cases | reads, directory)
        on_disk = {name: disk_bytes(directory / f"{name}-0.db") for name in cases}
        loop_events = events_in(directory / "loop-0.db")
    finally:
        for leftover in directory.iterdir():
            leftover.unlink()
        directory.rmdir()
    labels = {
        name: (kind, what.format(per=per, graph=graph_events, loop=loop_events))
        for name, (kind, what) in LABELS.items()
    }
    counts = {name: events for name in labels} | {"lg-graph": graph_events, "loop": loop_events}
    return Throughput(times, on_disk, durability, counts, labels)


def throughput_table(found: Throughput, sessions: int) -> Table:
    """Time per event (per session for the state cases) and bytes on disk per event."""
    rows = []
    for name, (kind, what) in found.labels.items():
        if name not in found.times:
            continue
        per_session = name in ("ours-state", "lg-latest")
        count = sessions if per_session else found.counts[name]
        value = statistics.median(found.times[name]) / count * 1e6
        unit = "µs/session" if per_session else "µs/event"
        size = f"{found.on_disk[name] / found.counts[name]:.0f}" if name in found.on_disk else ""
        rows.append([kind, what, f"{value:.1f} {unit}", size])
    return Table(["", "what", "time>", "bytes on disk/event>"], rows)


def clock_name() -> str:
    """``cpu`` or ``wall``: what the cases were timed with."""
    return "cpu" if CLOCK[0] is time.process_time else "wall"


def peer_ratios(found: Throughput) -> list[tuple[Ratio, str]]:
    """Our appends against each peer's fastest path, with the goals, and what was measured."""
    times, labels = found.times, found.labels
    us = {name: statistics.median(t) / found.counts[name] * 1e6 for name, t in times.items()}
    found_ratios = []

    def target(what: str, ours: str, reference: str, peer: str, goal: str) -> None:
        ratio = per_round_ratio(times, ours, peer, found.counts[peer] / found.counts[ours])
        shown = f"{us[ours]:.1f} vs {us[peer]:.1f} µs/event"
        found_ratios.append((Ratio(what, reference, clock_name(), ratio, goal), shown))

    for prefix, peer in (("es", "eventsourcing"), ("lg", "LangGraph")):
        paths = [n for n in times if n.startswith(prefix + "-") and labels[n][0] == "write"]
        paths = [n for n in paths if n != "lg-graph"]  # the graph is the same put plus an engine
        if paths:
            fastest = min(paths, key=lambda n: us[n])
            reference = f"{peer}'s fastest ({labels[fastest][1].split(': ')[1]})"
            target("batched append", "ours-batch", reference, fastest, "≤ 0.33× (3× faster)")
    per_step = [n for n in ("es-each", "lg-put") if n in times]
    if per_step:
        fastest = min(per_step, key=lambda n: us[n])
        reference = f"the fastest peer per step ({labels[fastest][1]})"
        target("append per event", "ours-each", reference, fastest, "≤ 1× (no slower)")
    return found_ratios


def targets_block(found: Throughput) -> Block:
    """Our appends against each peer's fastest path, with the goals."""
    rows = [
        [f"{r.what} vs {r.reference}", shown, f"{r.ratio:.2f}×", r.target, r.met]
        for r, shown in peer_ratios(found)
    ]
    if not rows:
        return ["no peer installed: no targets to check"]
    return [Table(["target", "measured", "ratio>", "goal", "met"], rows)]


def quick_ratios() -> list[Ratio]:
    """A small run (2,000 events, 200 through the graph, median of 3 rounds; seconds).

    The peers' targets (our appends against each installed peer's fastest path), and our
    agent loop per event it writes against a LangGraph graph per node step (a checkpoint
    each), for context.
    """
    have = {peer: available(peer) for peer in PEERS}
    found = measure_throughput(sessions_of(10, 200, prefix="peer"), 200, 3, have)
    ratios = [ratio for ratio, _shown in peer_ratios(found)]
    if "lg-graph" in found.times:
        scale = found.counts["lg-graph"] / found.counts["loop"]
        ratios.append(
            Ratio(
                "agent loop, per event it writes (instant model and tool)",
                "LangGraph graph.invoke, per node step (a SqliteSaver checkpoint each)",
                clock_name(),
                per_round_ratio(found.times, "loop", "lg-graph", scale),
                "",
            )
        )
    return ratios


def growth_block(sizes: Sequence[int], growth: dict[str, list[int]]) -> Block:
    """Bytes on disk against steps, bytes added per step, and whether that is linear."""
    names = list(growth)

    def added(name: str, i: int) -> str:
        """Bytes added per step since the row before (blank on the first row)."""
        if i == 0:
            return ""
        return f"{(growth[name][i] - growth[name][i - 1]) // (sizes[i] - sizes[i - 1]):,}"

    header = [h for name in names for h in (f"{name}: bytes>", "added per step>")]
    rows = []
    for i, n in enumerate(sizes):
        rows.append([f"{n:,}"])
        for name in names:
            rows[-1] += [f"{growth[name][i]:,}", added(name, i)]
    block: list[str | Table] = [Table(["steps>", *header], rows)]
    if len(sizes) >= 2:
        for name in names:
            factor = linearity(sizes, growth[name])
            verdict = "linear" if factor <= 1.5 else "NOT linear"
            block.append(
                f"{name}: {verdict} in steps (a step at the top of the range adds "
                f"{factor:.1f}× the bytes of one lower down)"
            )
    return block


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    events = args.events or (5_000 if args.quick else 100_000)
    sessions = args.sessions or (10 if args.quick else 100)
    repeat = args.repeat or 3
    sizes = args.steps if args.steps is not None else [1, 10, 100] + ([] if args.quick else [1000])
    plot_to = args.plot if args.plot is not None or args.quick else PLOT
    have = {peer: available(peer) for peer in PEERS}
    missing = [
        f"{peer}: not installed ({EXTRA}); skipped" for peer, found in have.items() if not found
    ]

    per = max(1, events // sessions)
    work = sessions_of(sessions, per, prefix="peer")
    graph_events = min(per * sessions, args.graph_events or max(sessions, per * sessions // 50))
    found = measure_throughput(work, graph_events, repeat, have)
    with tempfile.TemporaryDirectory(prefix="peers-growth-") as folder:
        growth = storage_growth(Path(folder), sizes, have["langgraph"])

    plotted: list[str | Table] = []
    if not have["matplotlib"]:
        plotted.append("no plot: matplotlib is not installed")
    elif plot_to is not None and len(sizes) >= 2:
        title = f"one session, bytes on disk against steps ({machine().split(',')[0]})"
        plot(plot_to, sizes, growth, title)
        plotted.append(f"plot: {plot_to}")
    heading = [
        *missing,
        f"agent-journal peers bench: "
        f"{describe(per * sessions, sessions, body_sizes(payloads_of(work)), repeat)}, "
        f"{args.clock} time",
        f"machine: {machine()}, sqlite {sqlite3.sqlite_version}",
        "durability: " + "; ".join(f"{who}: {how}" for who, how in found.durability.items()),
    ]
    blocks = [
        heading,
        [throughput_table(found, sessions)],
        targets_block(found),
        [*growth_block(sizes, growth), *plotted],
    ]
    return report(Report(blocks))


if __name__ == "__main__":
    sys.exit(main())
