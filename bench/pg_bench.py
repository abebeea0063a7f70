"""Speed of the PostgreSQL journal against raw psycopg doing the same work, from one run.

    python bench/pg_bench.py [--url URL] [--events N] [--sessions S] [--per-event N]
                             [--repeat R] [--quick]
    python bench/pg_bench.py --writers W [--url URL] [--appends N] [--repeat R] [--quick]

Prints µs per event (median of R runs, wall time: the server does half the work) for:

writing
  (a) reference: raw psycopg ``executemany`` of all rows in ONE transaction, each row's
      canonical body and sha256 chain hash computed by this script (as in journal_bench.py);
  (b) reference: ``COPY`` of the same rows in one transaction;
  (c) ours: ``Journal.append`` of a whole session per call;
  (d) reference: the same rows with a commit per event;
  (e) ours: ``Journal.append`` with one event per call.
reading
  (f) reference: raw ``SELECT body ... ORDER BY seq`` per session + ``orjson.loads``;
  (g) ours: ``Journal.events`` (paged streaming, each event validated into its model);
  (h) ours: ``journal.fold`` over ``Journal.events``.

With ``--writers W``, it prints instead how commits per second grow from 1 writer to W, each
writer a process with its own connection and its own session, appending one event per
commit; all connect and prepare first, then wait at a barrier; the wall time runs from the
barrier to the last writer's last commit (medians of R rounds, the cases taking turns):

  (a) reference: raw INSERT + COMMIT, the position from a sequence;
  (b) reference: raw UPDATE of a one-row counter for the position, INSERT, COMMIT (how
      this journal took positions before schema version 4);
  (c) ours: ``Journal.append`` of one event per call;
  (d) ours: ``Journal.append`` of 100 events per call (events per second);
  (e) the one thing our appends still do one at a time: the statement that takes the
      transaction id and the positions under the journal's positions lock, in a transaction
      rolled back (no commit, no flush): the ceiling that lock puts on appends per second.

The server is ``--url`` (default ``AGENT_JOURNAL_TEST_PG`` or
``postgresql://127.0.0.1:5432/test``); every case writes into a fresh schema of its own,
dropped at the end. The reference table has our columns and keys (``TEXT COLLATE "C"``,
``pos`` unique) but no triggers and no ``sessions`` projection: those are part of what we
pay for. Both sides commit as the server is configured (``synchronous_commit``, printed),
so a commit per event costs a WAL flush on either side.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from _common import (
    _LAST,
    CLOCK,
    MOMENT,
    Report,
    Row,
    Table,
    body_sizes,
    describe,
    interleave,
    machine,
    payloads_of,
    per_round_ratio,
    read_bodies,
    read_rows,
    reference_row,
    reference_rows,
    report,
    session_events,
    sessions_of,
    speed_table,
    take_turns,
)
from journal_bench import ours_batched, ours_fold, ours_per_event, ours_read
from psycopg import sql

from journal import Journal
from journal._postgres_schema import TABLES

REFERENCE_DDL = next(ddl for ddl in TABLES if ddl.startswith("CREATE TABLE events ("))
"""Our events table exactly (columns, collations, keys), without its triggers."""
COLUMNS = "pos, session_id, seq, ts, type, v, body, hash, summary"
INSERT = f"INSERT INTO events({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"


def in_schema(url: str, schema: str) -> str:
    """``url`` with its search_path set to ``schema`` (libpq ``options``)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


class Schemas:
    """Fresh schemas on one server, one per case and round, all dropped by `drop_all`."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.prefix = f"aj_bench_{uuid.uuid4().hex[:8]}"
        self.made: list[str] = []

    def url(self, name: str, index: int, *, create: bool = True) -> str:
        schema = f"{self.prefix}_{name}_{index}"
        if create:
            with psycopg.connect(self.server, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            self.made.append(schema)
        return in_schema(self.server, schema)

    def drop(self, url: str) -> None:
        schema = url.rsplit("%3D", 1)[1]
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        self.made.remove(schema)

    def drop_all(self) -> None:
        for schema in list(self.made):
            self.drop(in_schema(self.server, schema))


@contextmanager
def reference_table(url: str) -> Iterator[psycopg.Connection[Any]]:
    conn = psycopg.connect(url)
    conn.execute(REFERENCE_DDL)
    conn.commit()
    try:
        yield conn
    finally:
        conn.close()


def numbered(rows: Iterator[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with their global positions (1, 2, ...) in front, as our table has them."""
    return [(pos, *row) for pos, row in enumerate(rows, 1)]


def reference_executemany(url: str, payloads: list[tuple[str, list[dict[str, Any]]]]) -> None:
    with reference_table(url) as conn:
        start = CLOCK[0]()
        with conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(INSERT, numbered(reference_rows(payloads)))
        _LAST[0] = CLOCK[0]() - start


def reference_copy(url: str, payloads: list[tuple[str, list[dict[str, Any]]]]) -> None:
    with reference_table(url) as conn:
        start = CLOCK[0]()
        with conn.transaction(), conn.cursor() as cursor:
            with cursor.copy(f"COPY events({COLUMNS}) FROM STDIN") as copy:
                for row in numbered(reference_rows(payloads)):
                    copy.write_row(row)
        _LAST[0] = CLOCK[0]() - start


def reference_per_event(url: str, order: list[tuple[str, int, dict[str, Any]]]) -> None:
    with reference_table(url) as conn:
        heads: dict[str, str] = {}
        start = CLOCK[0]()
        for pos, (session_id, seq, payload) in enumerate(order, 1):
            row = reference_row(session_id, seq, payload, heads.get(session_id, "0" * 64))
            with conn.transaction():
                conn.execute(INSERT, (pos, *row))
            heads[session_id] = row[6]
        _LAST[0] = CLOCK[0]() - start


def reference_read(url: str, session_ids: Sequence[str]) -> None:
    with psycopg.connect(url) as conn:
        read_bodies(conn, session_ids, "%s")


# -- writers at once (--writers) -------------------------------------------------------------

WRITER_CASES = {
    "a": "(a) raw INSERT+COMMIT, position from a sequence",
    "b": "(b) raw INSERT+COMMIT with a single counter row",
    "c": "(c) this journal, 1 event per append",
    "d": "(d) this journal, 100 events per append (events/s)",
    "e": "(e) positions alone: our critical section, rolled back",
}
BATCH = 100
"""Events per append of case (d)."""
_RAW = {
    "a": INSERT.replace("VALUES (%s", "VALUES (nextval('positions')"),
    "b": INSERT,
}


def _raw_writer(case: str, url: str, session_id: str, count: int, gate: Any) -> None:
    """Raw appends of one reference row each, the position from the sequence or the counter."""
    events = list(session_events(int(session_id[1:]), count))
    rows = list(reference_rows(payloads_of([(session_id, events)])))
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1")  # connected, warm
        conn.rollback()
        gate.wait()
        for row in rows:
            with conn.transaction():
                if case == "a":
                    conn.execute(_RAW[case], row)
                else:
                    found = conn.execute("UPDATE counter SET pos = pos + 1 RETURNING pos")
                    conn.execute(_RAW[case], (found.fetchone()[0], *row))  # type: ignore[index]


def _journal_writer(url: str, session_id: str, count: int, per: int, gate: Any) -> None:
    """``count`` appends of ``per`` events each to this writer's own session."""
    events = list(session_events(int(session_id[1:]), 1 + count * per))
    with Journal.open(url, create=False) as journal:
        journal.append(session_id, events[:1], ts=MOMENT)  # the session exists, the pool is warm
        batches = [events[1 + k * per : 1 + (k + 1) * per] for k in range(count)]
        gate.wait()
        for batch in batches:
            journal.append(session_id, batch, ts=MOMENT)


def _positions_only(url: str, count: int, gate: Any) -> None:
    """``count`` reservations of one position each, each in a transaction rolled back, sent
    as one simple query (``BEGIN; SELECT ...; ROLLBACK``): one round trip, no flush."""
    with Journal.open(url, create=False) as journal:
        text, params = journal._reservation(1, None)  # type: ignore[attr-defined]
    literal = sql.SQL(text.replace("?", "{}")).format(*map(sql.Literal, params))
    with psycopg.connect(url, autocommit=True) as conn:
        query = sql.SQL("BEGIN; {}; ROLLBACK").format(literal).as_string(conn)
        gate.wait()
        for _ in range(count):
            conn.execute(query)


def _writer(case: str, url: str, index: int, count: int, gate: Any, done: Any) -> None:
    session_id = f"w{index:03d}"
    if case in _RAW:
        _raw_writer(case, url, session_id, count, gate)
    elif case == "e":
        _positions_only(url, count, gate)
    else:
        _journal_writer(url, session_id, count, BATCH if case == "d" else 1, gate)
    done.put(time.perf_counter())


def writers_round(case: str, url: str, writers: int, count: int) -> float:
    """Commits (events, for case d) per second of ``writers`` processes, barrier to last."""
    if case in _RAW:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(REFERENCE_DDL)
            conn.execute("CREATE SEQUENCE positions")
            conn.execute("CREATE TABLE counter (id BOOLEAN PRIMARY KEY, pos BIGINT NOT NULL)")
            conn.execute("INSERT INTO counter VALUES (TRUE, 0)")
    else:
        Journal.open(url).close()  # the schema exists before the writers start
    context = multiprocessing.get_context("fork")
    gate = context.Barrier(writers + 1)
    done = context.Queue()
    processes = [
        context.Process(target=_writer, args=(case, url, n, count, gate, done))
        for n in range(writers)
    ]
    for process in processes:
        process.start()
    try:
        gate.wait(timeout=300)
        start = time.perf_counter()
        last = max(done.get(timeout=900) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=60)
    assert all(p.exitcode == 0 for p in processes), "a writer failed"
    return writers * count * (BATCH if case == "d" else 1) / (last - start)


def measure_writers(args: argparse.Namespace) -> Report:
    """Commits per second for 1 writer and ``args.writers`` writers, as a report."""
    appends = args.appends or (40 if args.quick else 300)
    repeat = args.repeat or 3
    counts = {"a": appends, "b": appends, "c": appends, "d": max(1, appends // 20)}
    counts["e"] = appends * 10
    sizes = (1, args.writers)
    rates: dict[tuple[str, int], list[float]] = {(c, w): [] for c in WRITER_CASES for w in sizes}
    schemas = Schemas(args.url)
    try:
        server, sync = server_of(args.url)
        for index in range(repeat):
            for case in WRITER_CASES:
                for writers in sizes:
                    url = schemas.url(f"{case}{writers}", index)
                    rates[case, writers].append(writers_round(case, url, writers, counts[case]))
                    schemas.drop(url)
    finally:
        schemas.drop_all()
    many = args.writers

    def median(case: str, writers: int) -> float:
        return statistics.median(rates[case, writers])

    def ratio(ours: tuple[str, int], reference: tuple[str, int]) -> float:
        pairs = zip(rates[ours], rates[reference], strict=True)
        return statistics.median(x / y for x, y in pairs)

    def cell(case: str, writers: int) -> str:
        text = f"{median(case, writers):,.0f}"
        if case in ("b", "c"):
            text += f" ({ratio((case, writers), ('a', writers)):.2f}× (a))"
        return text

    heading = [
        f"agent-journal PostgreSQL writers bench: one event per commit ({BATCH} for (d)), each "
        f"writer its own process, connection and session; {appends} appends per writer "
        f"({counts['d']} for (d)); wall time from a barrier to the last commit, median of "
        f"{repeat} rounds taken in turns",
        f"machine: {machine()}",
        f"server: {server} on the same machine, synchronous_commit={sync}",
    ]
    table = Table(
        ["commits per second", "1 writer>", f"{many} writers>", f"{many} / 1>"],
        [
            [what, cell(case, 1), cell(case, many), f"{ratio((case, many), (case, 1)):.2f}×"]
            for case, what in WRITER_CASES.items()
        ],
    )
    against_raw = ratio(("c", many), ("a", many))
    scaling = ratio(("c", many), ("c", 1))
    verdicts = [
        f"{what}: {value:.2f}× (target ≥ {goal}×: {'met' if value >= goal else 'NOT met'})"
        for what, value, goal in (
            (f"(c) at {many} writers against (a) at {many} writers", against_raw, 0.5),
            (f"(c) at {many} writers against (c) at 1 writer", scaling, 2.0),
        )
    ]
    return Report([heading, [table], verdicts])


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("AGENT_JOURNAL_TEST_PG", "postgresql://127.0.0.1:5432/test"),
        help="the PostgreSQL server (a fresh schema per case)",
    )
    parser.add_argument("--events", type=int, default=None, help="events written and read")
    parser.add_argument("--sessions", type=int, default=None, help="sessions they are spread over")
    parser.add_argument("--per-event", type=int, default=None, help="events for per-event appends")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (median)")
    parser.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    parser.add_argument(
        "--writers", type=int, default=None, help="commits/s of 1 and of W writer processes"
    )
    parser.add_argument("--appends", type=int, default=None, help="appends per writer (--writers)")
    args = parser.parse_args(argv)
    if args.writers is not None and args.writers < 2:
        parser.error("--writers needs at least 2 writers")
    return args


def server_of(url: str) -> tuple[str, str]:
    """The server's version and its ``synchronous_commit``."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version(), current_setting('synchronous_commit')").fetchone()
        assert row is not None
        return str(row[0]).split(" on ")[0], row[1]


def measure_cases(
    url: str, repeat: int, work: list[tuple[str, list[Any]]], per_event: int
) -> dict[str, list[float]]:
    """Seconds of (a) to (h) in each of ``repeat`` rounds, each write in a fresh schema."""
    payloads = payloads_of(work)
    session_ids = [sid for sid, _ in work]
    per = len(work[0][1])
    small = [(sid, items[: max(1, per_event // len(work))]) for sid, items in work]
    small_order, small_payload_order = interleave(small), interleave(payloads_of(small))
    schemas = Schemas(url)
    kept: dict[str, str] = {}

    def case(name: str, run: Callable[[str], None]) -> Callable[[int], None]:
        def one(index: int) -> None:
            target = schemas.url(name, index)
            run(target)
            if index:
                schemas.drop(target)
            else:
                kept[name] = target

        return one

    def read(source: str, run: Callable[[str, Sequence[str]], None]) -> Callable[[int], None]:
        return lambda _index: run(kept[source], session_ids)

    try:
        return take_turns(
            repeat,
            {
                "a": case("a", lambda target: reference_executemany(target, payloads)),
                "b": case("b", lambda target: reference_copy(target, payloads)),
                "c": case("c", lambda target: ours_batched(target, work, per)),
                "d": case("d", lambda target: reference_per_event(target, small_payload_order)),
                "e": case("e", lambda target: ours_per_event(target, small_order)),
                "f": read("a", reference_read),
                "g": read("c", ours_read),
                "h": read("c", ours_fold),
            },
        )
    finally:
        schemas.drop_all()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.writers is not None:
        return report(measure_writers(args))
    CLOCK[0] = time.perf_counter
    sessions = args.sessions or (5 if args.quick else 50)
    per = max(1, (args.events or (5_000 if args.quick else 50_000)) // sessions)
    events = per * sessions
    repeat = args.repeat or (3 if args.quick else 5)
    work = sessions_of(sessions, per, prefix="pg")
    wanted = min(events, args.per_event or (200 if args.quick else 1_000))
    per_event = sessions * min(per, max(1, wanted // sessions))
    server, sync = server_of(args.url)
    times = measure_cases(args.url, repeat, work, wanted)
    counts = {"d": per_event, "e": per_event}
    us = {k: statistics.median(v) / counts.get(k, events) * 1e6 for k, v in times.items()}

    def ratio(ours: str, reference: str) -> float:
        return per_round_ratio(times, ours, reference)

    rows: list[Row] = [
        ("write", "(a) raw executemany, one transaction", us["a"], None, ""),
        ("write", "(b) raw COPY, one transaction", us["b"], None, ""),
        ("write", f"(c) Journal.append, {per} events/call", us["c"], ratio("c", "a"), "(a) ≤ 2×"),
        ("write", "(c) against COPY", us["c"], ratio("c", "b"), "(b)"),
        ("write", "(d) raw commit per event", us["d"], None, ""),
        ("write", "(e) Journal.append, 1 event/call", us["e"], ratio("e", "d"), "(d)"),
        *read_rows(us, ratio, "f", "g", "h"),
    ]
    sizes = body_sizes(payloads_of(work))
    heading = [
        f"agent-journal PostgreSQL bench: {describe(events, sessions, sizes, repeat)}, "
        f"wall time; {per_event:,} of the events for per-event appends",
        f"machine: {machine()}",
        f"server: {server} on the same machine, synchronous_commit={sync}, "
        f"psycopg {psycopg.__version__}",
    ]
    return report(Report([heading, [speed_table(rows)]]))


if __name__ == "__main__":
    sys.exit(main())
