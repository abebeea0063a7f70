"""`verify` on a journal being written: one snapshot per session, so no false findings.

Writers on connections of their own append to several sessions while `verify` runs again
and again on another; every run must come back clean. The slow drill does it with 8
writer threads and many more runs and prints the figures the README's fault drills quote.
"""

from __future__ import annotations

import threading
import time

import pytest

from journal import Journal, JournalBusyError, SessionStarted, UserInput

from .drill_helpers import drill_size
from .stores import StoreUnderTest


def _write(target: str, session_id: str, stop: threading.Event, counts: list[int]) -> None:
    """Append until stopped; ``counts`` holds [appends, appends that waited past the busy
    timeout and were tried again] (8 writers of one SQLite file on 2 cores starve one now
    and then: SQLite's busy handler is not fair; it has nothing to do with verify)."""
    with Journal.open(target) as journal:
        journal.append(session_id, [SessionStarted(agent="drill:agent")])
        while not stop.is_set():
            try:
                journal.append(session_id, [UserInput(text=f"n{counts[0]}")])
            except JournalBusyError:
                counts[1] += 1
                continue
            counts[0] += 1


def verify_under_load(
    store: StoreUnderTest, *, writers: int, runs: int, min_appends: int
) -> tuple[int, int, list[str]]:
    """Run ``verify`` ``runs`` times while ``writers`` threads append; return (runs, appends,
    the findings of every run that was not clean)."""
    stop = threading.Event()
    counts = [[0, 0] for _ in range(writers)]
    threads = [
        threading.Thread(target=_write, args=(store.target, f"w{index}", stop, counts[index]))
        for index in range(writers)
    ]
    for thread in threads:
        thread.start()
    findings: list[str] = []
    done = 0
    try:
        while sum(c[0] for c in counts) < writers:  # every writer has a session
            time.sleep(0.01)
        while done < runs or sum(c[0] for c in counts) < min_appends:
            report = store.journal.verify()
            findings += [f"{p.session_id}@{p.seq} {p.kind}: {p.message}" for p in report.problems]
            done += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    return done, sum(c[0] for c in counts), findings


def test_verify_while_others_append_finds_nothing(any_store: StoreUnderTest) -> None:
    runs, appends, findings = verify_under_load(any_store, writers=2, runs=20, min_appends=200)
    assert findings == []
    assert runs >= 20 and appends >= 200
    assert any_store.journal.verify().ok


@pytest.mark.slow
def test_drill_verify_under_an_eight_writer_load(any_store: StoreUnderTest) -> None:
    runs, appends, findings = verify_under_load(
        any_store, writers=8, runs=drill_size(30, 100), min_appends=drill_size(1200, 4000)
    )
    print(
        f"\n{any_store.kind}: verify runs {runs}, appends {appends}, false findings {len(findings)}"
    )
    assert findings == []
