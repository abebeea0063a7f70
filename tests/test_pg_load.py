"""Load drill on one PostgreSQL journal: 8 writer processes, one killed mid-transaction,
and a reader following positions.

Each writer process appends to many sessions of its own, round-robin, one to three events
per append with the seq it expects, and each round one event to a session all writers
share (no seq named: they queue on its lock). All writers connect first and wait at a gate
(an advisory lock the test holds), so they really write at once. Writer 0 is the victim:
after a few rounds it starts a new session and stops inside that append's transaction,
after inserting its rows (their positions taken, their commit not made); while it is
stopped the others commit later positions, the test checks that the reader has read
everything before the victim's positions and nothing after, and then kills the victim with
SIGKILL. Meanwhile a reader in the test follows the global position (``follow``, which
waits on LISTEN/NOTIFY, and ``read_after`` under it). Checked: the reader saw every stored
position exactly once, in order (positions come from a sequence: the victim's, and those
of appends that lost a race, are gaps), none of the victim's, every session's seqs dense
and in order, the rows the reader saw chain correctly and are the stored ones, and
``verify`` is ok.

A writer is this module run as a script: ``python -m tests.test_pg_load URL WORKER SESSIONS
ROUNDS GATE HOLD_AT``; it prints the number of events it appended, or, with HOLD_AT >= 0,
``held FIRST LAST`` once stopped in that round's held append.
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from journal import Journal, SessionStarted, UserInput
from journal.canonical import GENESIS_HASH, chain_hash
from journal.records import StoredEvent

from .drill_helpers import drill_size
from .helpers import REPO
from .stores import PgSchema

WRITERS = 8
SHARED = "shared"


def _own(worker: int, k: int) -> str:
    return f"w{worker}-s{k}"


def write(url: str, worker: int, sessions: int, rounds: int, gate: int, hold_at: int) -> int:
    """Append ``rounds`` rounds over ``sessions`` sessions of this worker; return the count.

    With ``hold_at`` >= 0, stop for good in round ``hold_at`` inside a held append (see
    `hold_next_insert`) instead: the test kills the process there.
    """
    written = 0
    with Journal.open(url) as journal, psycopg.connect(url, autocommit=True) as wait:
        wait.execute("SELECT pg_advisory_lock_shared(%s)", (gate,))  # until the test lets go
        for round_ in range(rounds):
            if round_ == hold_at:
                hold_next_insert(journal)
                journal.append(f"w{worker}-held", [SessionStarted(), UserInput(text="lost")])
            for k in range(sessions):
                session_id, size = _own(worker, k), 1 + k % 3
                batch = [UserInput(text=f"{session_id}-{round_}-{i}") for i in range(size)]
                if round_ == 0:
                    batch.insert(0, SessionStarted(agent="tests.test_pg_load:write"))
                journal.append(session_id, batch, expected_seq=1 + round_ * size if round_ else 0)
                written += len(batch)
            journal.append(SHARED, [UserInput(text=f"w{worker}-{round_}")])
            written += 1
    return written


def hold_next_insert(journal: Journal) -> None:
    """Stop ``journal``'s next append inside its transaction, once its rows are inserted:
    print ``held FIRST LAST`` (their positions) and sleep until the process is killed."""
    insert = journal._insert_events  # type: ignore[attr-defined]

    def insert_and_stop(tx: Any, rows: Any) -> None:
        first = tx.next_position
        insert(tx, rows)
        print(f"held {first} {tx.next_position - 1}", flush=True)
        time.sleep(3600)

    journal._insert_events = insert_and_stop  # type: ignore[attr-defined]


def own_events(k: int, rounds: int) -> int:
    """Events in session ``k`` of a worker after ``rounds`` rounds (its start included)."""
    return 1 + rounds * (1 + k % 3)


@dataclass
class Seen:
    """What the reader saw, in the order it saw it."""

    positions: list[int] = field(default_factory=list)
    rows: dict[str, list[StoredEvent]] = field(default_factory=lambda: defaultdict(list))
    passes: int = 0


def follow(url: str, writers: list[subprocess.Popen[str]], seen: Seen) -> None:
    """Follow the journal until every writer has exited and nothing new is left."""
    with Journal.open(url) as reader:
        position = 0
        while True:
            finished = all(w.poll() is not None for w in writers)
            for row in reader.follow(position, idle_timeout=0.2):
                assert row.position is not None
                seen.positions.append(row.position)
                seen.rows[row.session_id].append(row)
                position = row.position
            seen.passes += 1
            if finished:  # this pass started after the last commit: it read everything
                return


def _gate_key(schema: PgSchema) -> int:
    return zlib.crc32(schema.name.encode()) & 0x7FFFFFFF


def _waiting_at_gate(conn: psycopg.Connection[tuple[int]], key: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = 0 AND objid = %s",
        (key,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _stored(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [int(pos) for (pos,) in conn.execute("SELECT pos FROM events ORDER BY pos")]


def _held_line(victim: subprocess.Popen[str], deadline: float) -> tuple[int, int]:
    """Wait for the victim's ``held FIRST LAST`` line."""
    assert victim.stdout is not None
    while not select.select([victim.stdout], [], [], 0.1)[0]:
        assert time.monotonic() < deadline, "the victim never stopped in its held append"
        assert victim.poll() is None, "the victim exited before its held append"
    word, first, last = victim.stdout.readline().split()
    assert word == "held"
    return int(first), int(last)


def _wait_until(check: Any, deadline: float, what: str) -> None:
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def hold_then_kill(url: str, victim: subprocess.Popen[str], seen: Seen) -> tuple[int, int]:
    """Once the victim is stopped mid-transaction and others committed after its positions,
    check that the reader read all before them and nothing after; then SIGKILL the victim."""
    deadline = time.monotonic() + 300
    first, last = _held_line(victim, deadline)
    _wait_until(lambda: _stored(url)[-1] > last, deadline, "nobody committed after the victim")

    def caught_up() -> bool:
        read = list(seen.positions)
        stored = _stored(url)  # a position below one read cannot commit later: checked now
        skipped = set(p for p in stored if read and p < read[-1]) - set(read)
        assert not skipped, f"the reader skipped {sorted(skipped)[:5]}"
        assert not read or read[-1] < first, "the reader read past a position in flight"
        return read == [p for p in stored if p < first]

    _wait_until(caught_up, deadline, "the reader did not read all before the victim's rows")
    victim.send_signal(signal.SIGKILL)
    return first, last


def drill(schema: PgSchema, sessions: int, rounds: int, hold_at: int) -> None:
    url = schema.url
    with Journal.open(url) as journal:
        journal.append(SHARED, [SessionStarted(agent="tests.test_pg_load:drill")])
    key = _gate_key(schema)
    seen = Seen()
    with psycopg.connect(url, autocommit=True) as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", (key,))
        writers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.test_pg_load", url]
                + [str(n), str(sessions), str(rounds), str(key), str(hold_at if n == 0 else -1)],
                cwd=REPO,
                text=True,
                stdout=subprocess.PIPE,
            )
            for n in range(WRITERS)
        ]
        try:
            deadline = time.monotonic() + 120
            while _waiting_at_gate(gate, key) < WRITERS:
                assert time.monotonic() < deadline, "the writers did not all reach the gate"
                assert all(w.poll() is None for w in writers), "a writer exited early"
                time.sleep(0.02)
            reader = threading.Thread(target=follow, args=(url, writers, seen))
            reader.start()
            gate.execute("SELECT pg_advisory_unlock(%s)", (key,))  # go: all write at once
            first, last = hold_then_kill(url, writers[0], seen)
            outputs = [w.communicate(timeout=600)[0] for w in writers]
        finally:
            for w in writers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
        reader.join(timeout=120)
    assert not reader.is_alive(), "the reader did not finish"
    assert [w.returncode for w in writers] == [-signal.SIGKILL] + [0] * (WRITERS - 1)

    per_writer = sum(own_events(k, rounds) for k in range(sessions)) + rounds
    assert [int(out) for out in outputs[1:]] == [per_writer] * (WRITERS - 1)
    stored = _stored(url)
    assert seen.positions == stored, "a position was skipped, repeated or read out of order"
    assert not set(range(first, last + 1)) & set(stored), "the victim's rows were committed"
    expected = {SHARED: 1 + (WRITERS - 1) * rounds + hold_at}
    expected |= {
        _own(n, k): own_events(k, rounds) for n in range(1, WRITERS) for k in range(sessions)
    }
    expected |= {_own(0, k): own_events(k, hold_at) for k in range(sessions) if hold_at}
    assert {sid: len(rows) for sid, rows in seen.rows.items()} == expected
    with Journal.open(url) as journal:
        for session_id, rows in seen.rows.items():
            assert [r.seq for r in rows] == list(range(expected[session_id])), session_id
            chain = GENESIS_HASH
            for row in rows:
                assert row.hash == chain_hash(chain, row.body.encode()), (session_id, row.seq)
                chain = row.hash
            stored_rows = list(journal.stored_events(session_id))
            assert [(s.seq, s.hash) for s in stored_rows] == [(r.seq, r.hash) for r in rows]
        shared = [e.event.text for e in journal.events(SHARED, start=1)]
        for n in range(WRITERS):
            assert [t for t in shared if t.startswith(f"w{n}-")] == [
                f"w{n}-{r}" for r in range(hold_at if n == 0 else rounds)
            ]
        report = journal.verify()
        assert report.ok, report.problems
        assert report.events == len(stored)


def test_eight_writer_processes_one_killed_and_a_following_reader(pg_schema: PgSchema) -> None:
    drill(pg_schema, sessions=4, rounds=6, hold_at=1)


@pytest.mark.slow
def test_eight_writer_processes_one_killed_and_a_following_reader_at_scale(
    pg_schema: PgSchema,
) -> None:
    drill(pg_schema, sessions=drill_size(10, 25), rounds=drill_size(30, 60), hold_at=10)


if __name__ == "__main__":
    url, worker, sessions, rounds, gate, hold_at = sys.argv[1:]
    print(write(url, int(worker), int(sessions), int(rounds), int(gate), int(hold_at)))
