"""Two saves of a replay of one session at once: two sessions, each reported as kept.

Both processes chose ``.replay-1`` (free when they looked); the one that imports second
used to find the same events there, write nothing and still say it saved ``.replay-1``.
Now the import checks, under the session's lock, that the id is still free, and the
second save takes ``.replay-2``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from agentloop.examples import run_demo
from journal import Journal, loads_strict
from replay._run import keep_replay

from .helpers import REPO
from .stores import PgSchema

SESSION = "demo-refund-buggy-s0"
WAITING = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE application_name = 'agent-journal' AND wait_event_type = 'Lock'"
)


def _replay_saving(url: str) -> subprocess.Popen[str]:
    command = "from tui.cli import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", command, "replay", SESSION, "--db", url, "--save", "--json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_waiters(conn: psycopg.Connection[tuple[int]], count: int) -> None:
    deadline = time.monotonic() + 60
    while (found := conn.execute(WAITING).fetchone()) is None or found[0] < count:
        assert time.monotonic() < deadline, "the two saves never both waited to write"
        time.sleep(0.05)


def test_two_processes_saving_one_replay_keep_two_sessions(pg_schema: PgSchema) -> None:
    url = pg_schema.url
    with Journal.open(url) as journal:
        run_demo(journal, seed=0, sessions=1)
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watch:
        holder.execute("LOCK TABLE events IN EXCLUSIVE MODE")  # reads go on, writes wait
        runs = [_replay_saving(url), _replay_saving(url)]
        try:
            _wait_for_waiters(watch, 2)  # both chose an id and replayed; both wait to keep it
        finally:
            holder.rollback()
        outputs = [run.communicate(timeout=120) for run in runs]
    for run, (_, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err  # replayed with its own agent: identical
    documents = [json.loads(out) for out, _ in outputs]
    kept = sorted(document["replay_session_id"] for document in documents)
    assert all(document["saved"] for document in documents)
    assert kept == [f"{SESSION}.replay-1", f"{SESSION}.replay-2"]
    with Journal.open(url) as journal:
        for replay_id in kept:
            summary = journal.summary(replay_id)
            assert summary is not None and summary.replay_of == SESSION
            assert summary.events == documents[0]["replayed_events"]
        assert journal.verify().ok


def test_a_replay_whose_id_was_taken_meanwhile_is_kept_under_the_next(tmp_path: Path) -> None:
    """In one process, on SQLite: the id is taken between choosing it and keeping the run."""
    chosen = f"{SESSION}.replay-1"
    with Journal.open(tmp_path / "j.db") as journal, Journal.open(":memory:") as scratch:
        run_demo(journal, seed=0, sessions=1)
        for target in (scratch, journal):  # the run, and another writer's identical session
            target.import_records(chosen, _renamed(journal, SESSION, chosen))
        assert keep_replay(scratch, journal, chosen) == f"{SESSION}.replay-2"
        kept = [item.event for item in journal.events(f"{SESSION}.replay-2")]
        assert kept == [item.event for item in journal.events(chosen)]
        assert journal.verify().ok


def _renamed(journal: Journal, session_id: str, new_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{session_id}: seq {row.seq}", {**loads_strict(row.body), "session_id": new_id})
        for row in journal.stored_events(session_id)
    ]
