"""Load drill on one PostgreSQL journal: 8 writer processes and a reader following positions.

Each writer process appends to many sessions of its own, round-robin, one to three events
per append with the seq it expects, and each round one event to a session all writers
share (no seq named: they queue on its lock). All writers connect first and wait at a gate
(an advisory lock the test holds), so they really write at once. Meanwhile a reader in the
test follows the global position (``follow``, which waits on LISTEN/NOTIFY, and
``read_after`` under it). Checked: no event lost, none seen twice, positions seen in
increasing order and dense, every session's seqs dense and in order, the rows the reader
saw chain correctly and are the stored ones, and ``verify`` is ok.

A writer is this module run as a script: ``python -m tests.test_pg_load URL WORKER SESSIONS
ROUNDS GATE``; it prints the number of events it appended.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field

import psycopg
import pytest

from journal import Journal, SessionStarted, UserInput
from journal.canonical import GENESIS_HASH, chain_hash
from journal.records import StoredEvent

from .helpers import REPO
from .stores import PgSchema

WRITERS = 8
SHARED = "shared"


def _own(worker: int, k: int) -> str:
    return f"w{worker}-s{k}"


def write(url: str, worker: int, sessions: int, rounds: int, gate: int) -> int:
    """Append ``rounds`` rounds over ``sessions`` sessions of this worker; return the count."""
    written = 0
    with Journal.open(url) as journal, psycopg.connect(url, autocommit=True) as wait:
        wait.execute("SELECT pg_advisory_lock_shared(%s)", (gate,))  # until the test lets go
        for round_ in range(rounds):
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


def drill(schema: PgSchema, sessions: int, rounds: int) -> None:
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
                + [str(n), str(sessions), str(rounds), str(key)],
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
            outputs = [w.communicate(timeout=600)[0] for w in writers]
        finally:
            for w in writers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
        reader.join(timeout=120)
    assert not reader.is_alive(), "the reader did not finish"
    assert [w.returncode for w in writers] == [0] * WRITERS

    per_writer = sum(own_events(k, rounds) for k in range(sessions)) + rounds
    assert [int(out) for out in outputs] == [per_writer] * WRITERS
    total = 1 + WRITERS * per_writer
    assert seen.positions == list(range(1, total + 1)), "a position was skipped or repeated"
    expected = {SHARED: 1 + WRITERS * rounds} | {
        _own(n, k): own_events(k, rounds) for n in range(WRITERS) for k in range(sessions)
    }
    assert {sid: len(rows) for sid, rows in seen.rows.items()} == expected
    with Journal.open(url) as journal:
        for session_id, rows in seen.rows.items():
            assert [r.seq for r in rows] == list(range(expected[session_id])), session_id
            chain = GENESIS_HASH
            for row in rows:
                assert row.hash == chain_hash(chain, row.body.encode()), (session_id, row.seq)
                chain = row.hash
            stored = list(journal.stored_events(session_id))
            assert [(s.seq, s.hash) for s in stored] == [(r.seq, r.hash) for r in rows]
        shared = [e.event.text for e in journal.events(SHARED, start=1)]
        for n in range(WRITERS):
            assert [t for t in shared if t.startswith(f"w{n}-")] == [
                f"w{n}-{r}" for r in range(rounds)
            ]
        report = journal.verify()
        assert report.ok, report.problems
        assert report.events == total


def test_eight_writer_processes_and_a_following_reader(pg_schema: PgSchema) -> None:
    drill(pg_schema, sessions=4, rounds=5)


@pytest.mark.slow
def test_eight_writer_processes_and_a_following_reader_at_scale(pg_schema: PgSchema) -> None:
    drill(pg_schema, sessions=25, rounds=60)


if __name__ == "__main__":
    url, worker, sessions, rounds, gate = sys.argv[1:]
    print(write(url, int(worker), int(sessions), int(rounds), int(gate)))
