"""Helpers of the fault drills (tests/test_drill_*.py): the fork server, the checks, the faults.

Nothing here asserts on its own, except `Zygote`, which fails a drill whose child hangs.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from journal import Journal
from replay import Replayer

from .helpers import foreign, worker

KILLED = -signal.SIGKILL

DRILL_SIZE_VARIABLE = "AGENT_JOURNAL_DRILLS"
"""``full`` runs the slow drills at the counts docs/drills.md reports; unset, at CI's."""


def drill_size(ci: int, full: int) -> int:
    """How many kills, inputs or runs a slow drill takes.

    ``ci`` by default (what `.ci/run` runs with ``-m slow``, sized so that CI stays within
    its 15 minutes on 2 cores), ``full`` with ``AGENT_JOURNAL_DRILLS=full`` (the counts of
    docs/drills.md). Any other value of the variable is an error, not a silent default.
    """
    chosen = os.environ.get(DRILL_SIZE_VARIABLE, "ci")
    if chosen not in ("ci", "full"):
        raise ValueError(f"{DRILL_SIZE_VARIABLE}={chosen!r}: expected 'ci' or 'full'")
    return full if chosen == "full" else ci


@dataclass
class Run:
    """One child of the fork server: what it reported, and how it ended."""

    reports: list[str]
    exit: int
    log: Path
    elapsed: float
    """Seconds from the awaited reports to the child's end."""

    @property
    def killed(self) -> bool:
        """True when the SIGKILL ended it (rather than its own exit)."""
        return self.exit == KILLED

    def output(self) -> str:
        """What the child printed (its log)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Zygote:
    """The test side of ``python -m tests.workers zygote``: fork a child, kill it, reap it."""

    def __init__(self) -> None:
        self.process = worker("zygote", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdout is not None and self.process.stdin is not None
        self._out = self.process.stdout.fileno()
        self._buffer = b""

    def close(self) -> None:
        """End the fork server."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()

    def _line(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._out], [], [], max(left, 0))
            assert ready, "the drill's child stalled"
            chunk = os.read(self._out, 65536)
            assert chunk, "the fork server died"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def kill_after(
        self, command: list[object], log: Path, *, reports: int = 0, delay: float | None = 0.0
    ) -> Run:
        """Run ``command`` in a fresh child; SIGKILL it after ``reports`` reports and ``delay`` s.

        A child that ends by itself before the kill (a CLI command that finished) is reaped
        as it is: its `Run.exit` is its own exit code. ``delay=None`` never kills: the child
        runs to its end.
        """
        import json

        self._send(json.dumps([str(part) for part in command]))
        pid: int | None = None
        got: list[str] = []
        while pid is None or len(got) < reports:
            line = self._line()
            if line.startswith("pid "):
                pid = int(line[4:])
            else:
                got.append(line[2:])
        began = time.monotonic()
        if delay is not None:
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
        self._send("reap")
        while not (line := self._line()).startswith("exit "):
            got.append(line[2:])
        return Run(reports=got, exit=int(line[5:]), log=log, elapsed=time.monotonic() - began)


@contextmanager
def zygote() -> Iterator[Zygote]:
    """A fork server for the length of a drill."""
    server = Zygote()
    try:
        yield server
    finally:
        server.close()


@dataclass
class Figures:
    """What a drill did, for the README's table."""

    kills: int = 0
    finished: int = 0
    sessions: int = 0
    events: int = 0
    confirmed: int = 0
    lost: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def line(self, name: str) -> str:
        """One line of figures (the drills print it; ``pytest -s`` shows it)."""
        parts = [
            f"{self.kills} kills",
            f"{self.finished} finished first",
            f"{self.sessions} sessions checked",
            f"{self.events} events",
            f"{self.confirmed} confirmed appends",
            f"{self.lost} lost",
            *(f"{value} {key}" for key, value in self.extra.items()),
        ]
        return f"drill {name}: " + ", ".join(parts)


def integrity_ok(path: Path) -> bool:
    """SQLite's own check of the file, by a foreign connection."""
    with foreign(path) as conn:
        return bool(conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)])


def check_prefix(journal: Journal, session_id: str) -> int:
    """Check one session is a valid prefix that replays; return its event count.

    Valid: seqs dense from 0 (the chain is verify's); replayable: the `Replayer` on the
    session is identical (a recording without a terminal event replays to its end).
    """
    seqs = [row.seq for row in journal.stored_events(session_id)]
    assert seqs == list(range(len(seqs))), session_id
    result = Replayer().replay(journal, session_id)
    assert result.identical, (session_id, result.first_divergence)
    return len(seqs)


def missing(journal: Journal, reports: list[str]) -> int:
    """How many reported appends (``SESSION LAST_SEQ``) the journal does not hold."""
    lost = 0
    for report in reports:
        session_id, seq = report.split()
        found = journal.last_seq(session_id)
        lost += found is None or found < int(seq)
    return lost


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make a file or a directory unwritable, even for root (``chattr +i``), then undo it."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    import pytest

    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot make {path.name} read-only for root: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
