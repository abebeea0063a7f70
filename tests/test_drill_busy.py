"""Locked and busy: readers and the TUI's follow mode keep up with heavy writers.

A writer process appends as fast as it can while reader processes stream the journal and
the TUI (headless, through ``App.run_test``) follows the session being written; the TUI
also follows a running ``agent-journal demo``. Nothing raises, every reader sees every
session's seqs dense and in order, and no read, append or screen update waits longer than
the busy timeout.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from textual.pilot import Pilot

from journal import Journal, UserInput
from journal.sqlite import SQLiteJournal
from tui.app import JournalApp
from tui.screens.session import SessionScreen
from tui.screens.sessions import SessionsList

from .helpers import REPO, foreign, make_journal, short_session, worker
from .tui_helpers import drive, wait_until

BUSY_TIMEOUT_S = 5.0
"""The journal's default busy timeout: no wait may be longer."""


class Drain:
    """Reads a writer's report lines in a thread, noting when each arrived."""

    def __init__(self, stream: TextIO) -> None:
        self.times: list[float] = []
        self.last = -1
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: TextIO) -> None:
        for line in stream:
            self.last = int(line)
            self.times.append(time.monotonic())

    def join(self) -> None:
        self._thread.join(timeout=30)

    @property
    def longest_gap(self) -> float:
        return max((b - a for a, b in zip(self.times, self.times[1:], strict=False)), default=0)


def _wait_for(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_reader_processes_and_the_tui_follow_a_heavy_writer(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    writer = worker("stream", db, "live", stdout=subprocess.PIPE)
    assert writer.stdout is not None
    reports = Drain(writer.stdout)
    _wait_for(lambda: reports.last >= 0)
    readers = [worker("read", db, 3, stdout=subprocess.PIPE) for _ in range(4)]
    caught_up: list[float] = []

    async def scenario(pilot: Pilot[Any]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, SessionScreen)
        await pilot.press("F")  # (not `press`: its settle waits on workers that following
        await pilot.pause()  # cancels and replaces as fast as the writer writes)
        assert screen.following
        start = screen.timeline.line_count
        await wait_until(pilot, lambda: screen.timeline.line_count > start + 200, BUSY_TIMEOUT_S)
        while any(reader.poll() is None for reader in readers):
            await pilot.pause(0.1)
        writer.kill()
        writer.wait(timeout=30)
        reports.join()
        with Journal.open(db) as journal:
            last = journal.last_seq("live")
        assert last is not None and last >= reports.last
        stopped = time.monotonic()
        await wait_until(pilot, lambda: screen.timeline.line_count == last + 1, BUSY_TIMEOUT_S)
        assert screen.timeline.seq == last  # following: the cursor is on the newest event
        caught_up.append(time.monotonic() - stopped)

    drive(JournalApp(db=db, session="live", poll=0.05, state_delay=0), scenario)
    assert writer.stdout is not None
    writer.stdout.close()
    for reader in readers:
        out, _ = reader.communicate(timeout=30)
        assert reader.returncode == 0
        rows, longest_ms = map(int, out.split())
        assert rows > 0 and longest_ms < BUSY_TIMEOUT_S * 1000
    assert reports.longest_gap < BUSY_TIMEOUT_S  # the writer never stalled behind the readers
    assert caught_up and caught_up[0] < BUSY_TIMEOUT_S
    with Journal.open(db) as journal:
        assert journal.verify().ok
    print(
        f"drill busy: 1 writer ({reports.last + 1} events confirmed, longest gap "
        f"{reports.longest_gap * 1000:.0f} ms), 4 reader processes, TUI caught up in "
        f"{caught_up[0] * 1000:.0f} ms"
    )


def test_the_tui_follows_a_running_demo(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    Journal.open(db).close()  # the app opens an existing journal
    sessions = 60
    demo = subprocess.Popen(
        [sys.executable, "-c", "from tui.cli import main; main()"]
        + ["demo", "--no-tui", "--sessions", str(sessions), "--db", str(db)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    async def scenario(pilot: Pilot[Any]) -> None:
        listing = pilot.app.screen.query_one(SessionsList)
        await wait_until(pilot, lambda: len(listing.rows) == sessions, 60)
        assert demo.wait(timeout=60) == 0

    drive(JournalApp(db=db, poll=0.05, state_delay=0), scenario)
    assert demo.stderr is not None
    assert demo.stderr.read() == ""
    demo.stderr.close()


def _hold_lock(db: Path, taken: threading.Event, seconds: float) -> None:
    with foreign(db) as lock:
        lock.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(seconds)
        lock.execute("ROLLBACK")


def test_a_lock_held_within_the_busy_timeout_is_waited_out_and_readers_never_wait(
    tmp_path: Path,
) -> None:
    db = make_journal(tmp_path / "journal.db", {"s": short_session()})
    taken = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(db, taken, 0.5))
    with SQLiteJournal(str(db), busy_timeout_ms=3000) as journal:
        holder.start()
        taken.wait(timeout=10)
        began = time.monotonic()
        with Journal.open(db) as reader:
            assert reader.verify().ok  # WAL: the reader does not wait for the writer's lock
        read = time.monotonic() - began
        assert journal.append("s", [UserInput(text="after the lock")]) == 5
        waited = time.monotonic() - began
    holder.join()
    assert read < 0.4 < waited < 3
