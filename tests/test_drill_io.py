"""Full disk and I/O errors: a clear error, the journal unchanged, and the agent loop told.

Faults: a full database (SQLite's ``max_page_count``), a file the process may not grow
(``RLIMIT_FSIZE``: a real ``EFBIG`` from the kernel), a read-only journal file or WAL
(``chattr +i``, which binds root too), a journal file deleted while open, its directory
removed, and read-only directories for journals and exports. Every CLI command that
writes fails with one line and exit 2 and leaves the journal as it was; the commands that
only read go on working. The agent loop is told by the append that failed, and never runs
a tool whose proposal could not be journaled first: the drill's tools record each call, and
every recorded call is in a journaled ``action_proposed``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentloop import AgentRuntime, counter_ids
from journal import (
    ActionProposed,
    Journal,
    SessionStarted,
    StoreError,
    UserInput,
    export_session,
)
from journal.sqlite import SQLiteJournal

from .drill_agent import build, drill_journal
from .drill_helpers import check_prefix, read_only
from .helpers import REPO, one_error_line, run_cli, snapshot
from .openai_helpers import assistant, user, write_json


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A journal to fault (two drill sessions, one of 600 events) and files to bring in."""
    folder = tmp_path_factory.mktemp("io-drill")
    db = folder / "journal.db"
    drill_journal(db, sessions=2, turns=4, seed=1)
    with Journal.open(db) as journal:
        inputs = [UserInput(text=f"line {n}") for n in range(600)]
        journal.append("long", [SessionStarted(agent="tests.drill_agent:build"), *inputs])
    other = folder / "other.db"
    [session_id] = drill_journal(other, sessions=1, turns=12, seed=2)
    jsonl = folder / f"{session_id}.jsonl"
    with Journal.open(other) as journal:
        jsonl.write_bytes(export_session(journal, session_id))
    chat = [user("hello"), assistant("hi there " * 2000)]
    openai = write_json(folder / "chat.json", {"messages": chat, "metadata": {"id": "chat-1"}})
    return {"db": db, "other": other, "jsonl": jsonl, "openai": openai}


@pytest.fixture
def db(sources: dict[str, Path], tmp_path: Path) -> Path:
    """A fresh copy of the journal to fault (no WAL beside it: it was closed cleanly)."""
    target = tmp_path / "journal.db"
    shutil.copyfile(sources["db"], target)
    return target


Args = Callable[[Path, dict[str, Path]], list[object]]

WRITES: dict[str, Args] = {
    "import": lambda db, src: ["import", src["jsonl"], "--db", db],
    "import openai": lambda db, src: ["import", "--format", "openai", src["openai"], "--db", db],
    "replay --save": lambda db, src: ["replay", "drill-1-0", "--save", "--db", db],
    "fork": lambda db, src: ["fork", "drill-1-0", "--at", "3", "--db", db],
    "demo": lambda db, src: ["demo", "--no-tui", "--sessions", "1", "--db", db],
    "copy": lambda db, src: ["copy", "--from", src["other"], "--to", db],
    "erase": lambda db, src: ["erase", "drill-1-1", "--reason", "drill", "--yes", "--db", db],
}
READS: dict[str, Args] = {
    "sessions": lambda db, src: ["sessions", "--db", db],
    "show": lambda db, src: ["show", "drill-1-0", "--db", db],
    "verify": lambda db, src: ["verify", "--db", db],
    "state (snapshots)": lambda db, src: ["state", "long", "--at", "550", "--db", db],
    "diff": lambda db, src: ["diff", "drill-1-0", "drill-1-1", "--db", db],
    "export": lambda db, src: ["export", "drill-1-0", "--db", db],
    "replay": lambda db, src: ["replay", "drill-1-0", "--db", db],
}


@pytest.fixture
def full(db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The journal at ``db`` cannot grow: every connection to it caps its page count."""
    connect = sqlite3.connect

    def capped(path: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(path, *args, **kwargs)
        if str(path) == str(db):
            conn.execute("PRAGMA max_page_count = 1")  # raised to the current size
        return conn

    monkeypatch.setattr(sqlite3, "connect", capped)
    return db


@pytest.fixture
def read_only_file(db: Path) -> Iterator[Path]:
    """The journal file may not be written, not even by root."""
    with read_only(db):
        yield db


@pytest.mark.parametrize("fault", ["full", "read_only_file"])
@pytest.mark.parametrize("command", sorted(WRITES))
def test_a_write_refused_by_the_store_is_one_line_and_changes_nothing(
    request: pytest.FixtureRequest, sources: dict[str, Path], fault: str, command: str
) -> None:
    if (fault, command) == ("full", "erase"):
        pytest.skip("an erase frees pages: it goes through on a full journal, as it should")
    db = request.getfixturevalue(fault)
    before = snapshot(db)
    line = one_error_line(run_cli(*WRITES[command](db, sources)))
    assert str(db) in line
    assert ("is full" if fault == "full" else "read-only") in line
    assert snapshot(db) == before


@pytest.mark.parametrize("fault", ["full", "read_only_file"])
@pytest.mark.parametrize("command", sorted(READS))
def test_reads_go_on_when_the_store_refuses_writes(
    request: pytest.FixtureRequest, sources: dict[str, Path], fault: str, command: str
) -> None:
    db = request.getfixturevalue(fault)
    before = snapshot(db)
    result = run_cli(*READS[command](db, sources))
    assert result.exit_code in (0, 1), result.stderr  # diff: the two sessions differ
    assert result.stderr == "" or command == "replay"
    assert snapshot(db) == before


def _limited(size: int) -> Callable[[], None]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


@pytest.mark.parametrize("command", ["import", "import openai", "replay --save"])
def test_an_io_error_from_the_kernel_is_one_line_and_leaves_a_valid_journal(
    db: Path, sources: dict[str, Path], command: str
) -> None:
    before = snapshot(db)
    done = subprocess.run(
        [sys.executable, "-c", "from tui.cli import main; main()"]
        + [str(arg) for arg in WRITES[command](db, sources)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
        preexec_fn=_limited(db.stat().st_size + 16384),  # the WAL may grow 16 KB
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"agent-journal: {db}: write failed: disk I/O error\n"
    after = snapshot(db)
    assert isinstance(before, dict) and isinstance(after, dict)
    if command != "replay --save":
        assert after == before  # one transaction: all or nothing
        return
    # a replay is saved event by event: what made it in is a valid prefix, nothing else moved
    assert after["events"][: len(before["events"])] == before["events"]
    assert set(before["sessions"]) <= set(after["sessions"])
    with Journal.open(db) as journal:
        assert journal.verify().ok
        for summary in journal.sessions():
            if summary.replay_of is not None:
                check_prefix(journal, summary.session_id)
