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

import contextlib
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentRuntime, LiveToolExecutor, ToolOutcome, counter_ids
from journal import (
    ActionProposed,
    Journal,
    SessionStarted,
    StoreError,
    ToolCall,
    UserInput,
    export_session,
)
from journal.sqlite import SQLiteJournal

from .drill_agent import build, drill_journal, run_session
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
INCREMENTAL = {"replay --save", "fork", "demo"}
"""Commands that write a session event by event, like the agent loop: a refused write ends
them, and what they wrote before it stays (a valid prefix). The others are one transaction."""


def assert_kept(before: Any, db: Path) -> None:
    """Nothing that was in the journal changed; what was added is valid and replays."""
    after = snapshot(db)
    assert isinstance(before, dict) and isinstance(after, dict)
    assert after["events"][: len(before["events"])] == before["events"]
    assert set(before["sessions"]) <= set(after["sessions"])
    with Journal.open(db) as journal:
        assert journal.verify().ok
        for summary in journal.sessions():
            if summary.replay_of is not None:
                check_prefix(journal, summary.session_id)


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


@pytest.mark.parametrize(
    ("fault", "command"),
    [
        (fault, command)
        for fault in ("full", "read_only_file")
        for command in sorted(WRITES)
        if (fault, command) != ("full", "erase")  # it frees pages: it goes through, rightly
    ],
)
def test_a_write_refused_by_the_store_is_one_line_and_changes_nothing(
    request: pytest.FixtureRequest, sources: dict[str, Path], fault: str, command: str
) -> None:
    db = request.getfixturevalue(fault)
    before = snapshot(db)
    result = run_cli(*WRITES[command](db, sources))
    if command == "copy":  # a tally on stdout, each session's failure on stderr
        assert (result.exit_code, result.stdout.count("1 failed")) == (2, 1)
        [line] = result.stderr.splitlines()
    else:
        line = one_error_line(result)
    assert line.startswith(f"agent-journal: {db}: ")
    assert ("is full" if fault == "full" else "read-only") in line
    if command in INCREMENTAL:
        assert_kept(before, db)
    else:
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
        preexec_fn=_limited(32768),  # no file may grow past 32 KB: the WAL fills up first
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"agent-journal: {db}: write failed: disk I/O error\n"
    if command in INCREMENTAL:
        assert_kept(before, db)
    else:
        assert snapshot(db) == before  # one transaction: all or nothing


# -- the agent loop is told, and runs no tool it could not journal first ---------------------


class FaultyJournal(SQLiteJournal):
    """A SQLite journal whose ``at``-th append meets ``fault`` first."""

    def __init__(self, path: Path, fault: Callable[[FaultyJournal], None], at: int) -> None:
        super().__init__(str(path))
        self.path, self.fault, self.at, self.appends = path, fault, at, 0
        self.undo = ExitStack()

    def append(self, session_id: str, events: Any, **options: Any) -> int:
        self.appends += 1
        if self.appends == self.at:
            self.fault(self)
        return super().append(session_id, events, **options)


class ProvingTools(LiveToolExecutor):
    """Runs the tools, first noting whether the call's proposal is in the journal already."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.ran: list[tuple[str, bool]] = []

    async def execute(self, tool: Any, call: ToolCall, *args: Any) -> ToolOutcome:
        journaled = any(
            isinstance(recorded.event, ActionProposed)
            and any(c.call_id == call.call_id for c in recorded.event.calls)
            for recorded in self.journal.events("s")
        )
        self.ran.append((call.call_id, journaled))
        return await super().execute(tool, call, *args)


def _cap(journal: FaultyJournal) -> None:
    journal._conn.execute("PRAGMA max_page_count = 1")


def _delete(journal: FaultyJournal) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{journal.path}{suffix}").unlink()


def _remove_directory(journal: FaultyJournal) -> None:
    shutil.rmtree(journal.path.parent)


def _freeze_wal(journal: FaultyJournal) -> None:
    if os.geteuid() != 0:  # (chmod does not stop a file already open; chattr needs root)
        pytest.skip("making an open WAL read-only needs chattr, which needs root")
    journal.undo.enter_context(read_only(Path(f"{journal.path}-wal")))


LOOP_FAULTS: dict[str, Callable[[FaultyJournal], None]] = {
    "full": _cap,
    "read-only WAL": _freeze_wal,
    "file deleted": _delete,
    "directory removed": _remove_directory,
}


def _run_with_fault(
    folder: Path, fault: str, at: int
) -> tuple[FaultyJournal, ProvingTools, StoreError | None]:
    folder.mkdir()
    journal = FaultyJournal(folder / "journal.db", LOOP_FAULTS[fault], at)
    tools = ProvingTools(journal)
    runtime = AgentRuntime(build(7), journal, tools=tools, ids=counter_ids("io"))
    try:
        run_session(runtime, "s", turns=2, seed=7)
    except StoreError as e:
        return journal, tools, e
    return journal, tools, None


REFUSED = {
    "full": "disk or database is full; write was not written",
    "read-only WAL": "write failed: disk I/O error",
    "file deleted": "the journal file was deleted or replaced while open; write was not written",
    "directory removed": "the journal file was deleted or replaced",
}


@pytest.mark.parametrize("fault", sorted(LOOP_FAULTS))
def test_a_refused_append_stops_the_loop_before_any_tool_it_could_not_journal(
    tmp_path: Path, fault: str
) -> None:
    reference, tools, told = _run_with_fault(tmp_path / "reference", fault, 0)
    reference.close()
    assert told is None and tools.ran
    refused = ran = 0
    for at in range(1, reference.appends + 1):
        journal, tools, told = _run_with_fault(tmp_path / f"at-{at}", fault, at)
        try:
            # every tool that ran found its proposal journaled before it started
            assert all(journaled for _, journaled in tools.ran), (at, tools.ran)
            ran += len(tools.ran)
            if told is None:
                assert fault == "full"  # what was left to write fitted in the free pages
                continue
            refused += 1
            assert str(told).startswith(f"{journal.path}: ") and REFUSED[fault] in str(told)
        finally:
            journal.undo.close()
            journal.close()
        if journal.path.exists():  # the fault is gone: the journal holds a valid prefix
            with Journal.open(journal.path) as reopened:
                assert reopened.verify().ok
                if reopened.summary("s") is not None:
                    check_prefix(reopened, "s")
    assert refused >= reference.appends // 2
    print(
        f"drill loop faults ({fault}): {reference.appends} faults injected, {refused} appends "
        f"refused, {ran} tools run, 0 without a journaled proposal"
    )


# -- files that vanish, directories that refuse ----------------------------------------------


def test_a_journal_deleted_under_a_running_import_is_an_error_not_a_silent_loss(
    db: Path, sources: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import journal.formats.jsonl

    read = journal.formats.jsonl._header

    def read_then_delete(raw: bytes, name: str) -> Any:
        header = read(raw, name)
        db.unlink()  # like a cleanup job, between opening the journal and writing to it
        return header

    monkeypatch.setattr(journal.formats.jsonl, "_header", read_then_delete)
    line = one_error_line(run_cli("import", sources["jsonl"], "--db", db))
    assert line == (
        f"agent-journal: {db}: the journal file was deleted or replaced while open; "
        "write was not written"
    )


def test_a_write_to_a_journal_in_a_read_only_directory_says_why(
    db: Path, sources: dict[str, Path]
) -> None:
    before = snapshot(db)
    with read_only(db.parent):
        line = one_error_line(run_cli(*WRITES["import"](db, sources)))
    assert line == (
        f"agent-journal: {db}: the journal is read-only (SQLite cannot create journal.db-wal "
        "and journal.db-shm beside it; opened read-only); write was not written"
    )
    assert snapshot(db) == before


# -- a read-only journal is read -------------------------------------------------------------


def _outputs(db: Path, sources: dict[str, Path]) -> dict[str, tuple[int, str]]:
    """Each reading command's exit code and standard output on the journal at ``db``."""
    outputs = {}
    for command in sorted(READS):
        result = run_cli(*READS[command](db, sources))
        assert result.stderr == "" or command == "replay", (command, result.stderr)
        outputs[command] = (result.exit_code, result.stdout)
    return outputs


@pytest.mark.parametrize("locked", ["folder", "folder and file"])
def test_every_reading_command_reads_a_journal_in_a_read_only_folder(
    db: Path, sources: dict[str, Path], locked: str
) -> None:
    """Unwritable even for root (``chattr +i``): SQLite cannot create the WAL's files."""
    writable, before = _outputs(db, sources), snapshot(db)
    with contextlib.ExitStack() as stack:
        stack.enter_context(read_only(db.parent))
        if locked == "folder and file":
            stack.enter_context(read_only(db))
        assert _outputs(db, sources) == writable
    assert sorted(path.name for path in db.parent.iterdir()) == ["journal.db"]
    assert snapshot(db) == before


@contextlib.contextmanager
def _read_only_mount(folder: Path, files: dict[str, bytes]) -> Iterator[None]:
    """A tmpfs at ``folder`` holding ``files``, remounted read-only."""
    with _tmpfs(folder, "16m"):
        for name, data in files.items():
            (folder / name).write_bytes(data)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        yield


def _with_wal(db: Path) -> dict[str, bytes]:
    """The journal at ``db`` with one more session in its WAL, not checkpointed: the files
    a writer killed while running leaves (the main file, ``-wal`` and ``-shm``)."""
    code = (
        "import os, sys; from journal import Journal, SessionStarted;"
        "j = Journal.open(sys.argv[1]); j._conn.execute('PRAGMA wal_autocheckpoint = 0');"
        "j.append('in-wal', [SessionStarted(agent='a:b')]); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(db)], cwd=REPO, check=True, timeout=60)
    return {f"journal.db{end}": Path(f"{db}{end}").read_bytes() for end in ("", "-wal", "-shm")}


def test_every_reading_command_reads_a_journal_on_a_read_only_mount(
    db: Path, sources: dict[str, Path], tmp_path: Path
) -> None:
    writable = _outputs(db, sources)
    mount = tmp_path / "ro"
    with _read_only_mount(mount, {"journal.db": db.read_bytes()}):
        assert _outputs(mount / "journal.db", sources) == writable


def test_a_read_only_mount_with_a_wal_is_read_whole_or_refused_naming_the_fix(
    db: Path, tmp_path: Path
) -> None:
    """Commits in the WAL are read through its ``-shm``; without one, a clear refusal."""
    files = _with_wal(db)
    with _read_only_mount(tmp_path / "whole", files):
        result = run_cli("sessions", "--db", tmp_path / "whole" / "journal.db")
        assert (result.exit_code, result.stderr) == (0, "")
        assert "in-wal" in result.stdout
    del files["journal.db-shm"]
    target = tmp_path / "no-shm" / "journal.db"
    with _read_only_mount(target.parent, files):
        line = one_error_line(run_cli("sessions", "--db", target))
    assert line == (
        f"agent-journal: {target}: cannot open: unable to open database file (its folder is "
        "read-only and journal.db-wal holds commits that SQLite reads only through "
        "journal.db-shm, which it cannot create: open the journal once where its folder is "
        "writable, or copy journal.db with journal.db-wal to a writable folder)"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["export", "drill-1-0", "-o"],
        ["export", "drill-1-0", "drill-1-1", "--format", "otlp", "-o"],
        ["fixture", "drill-1-0", "-o"],
    ],
    ids=["jsonl", "otlp", "fixture"],
)
def test_an_export_into_a_read_only_directory_is_one_line_and_leaves_no_file(
    db: Path, tmp_path: Path, args: list[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with read_only(out):
        line = one_error_line(run_cli(*args, out / "x.jsonl", "--db", db))
    assert line.startswith(f"agent-journal: {out / 'x.jsonl'}: cannot write: ")
    assert list(out.iterdir()) == []


# -- a full disk under every command that writes a file --------------------------------------

FILE_WRITES: dict[str, tuple[list[str], int]] = {
    "export": (["export", "long", "-o"], 8192),
    "export otlp": (["export", "long", "drill-1-0", "--format", "otlp", "-o"], 8192),
    "export atif": (["export", "long", "--format", "atif", "-o"], 8192),
    "fixture": (["fixture", "long", "-o"], 8192),
    "share": (["share", "long", "-o"], 8192),
    "anchor": (["anchor", "-o"], 0),  # a few hundred bytes: only a disk with no room refuses it
}
"""Each command that writes a file (it ends in its ``-o``), and the room left on the disk:
less than the file needs, so the write fails part of the way through."""


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str) -> Iterator[None]:
    """A tmpfs of ``size`` mounted at ``folder`` (skipped where mounting is not allowed:
    the ``EFBIG`` and ``chattr`` tests cover the same paths without it)."""
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@contextlib.contextmanager
def _full_disk(folder: Path, free: int, old: Path) -> Iterator[None]:
    """A 64 KiB tmpfs at ``folder`` holding ``old`` (4 bytes), filled until ``free`` are left."""
    with _tmpfs(folder, "64k"):
        old.write_bytes(b"old\n")
        with (folder / "filler").open("wb", buffering=0) as filler:
            with contextlib.suppress(OSError):
                while True:
                    filler.write(b"\0" * 1024)
            filler.truncate(filler.tell() - free)
        yield


@pytest.mark.parametrize("command", sorted(FILE_WRITES))
def test_a_file_written_onto_a_full_disk_is_one_line_and_leaves_the_old_file(
    db: Path, tmp_path: Path, command: str
) -> None:
    args, free = FILE_WRITES[command]
    out = tmp_path / "full"
    target = out / "out.file"
    with _full_disk(out, free, target):
        line = one_error_line(run_cli(*args, target, "--db", db))
        assert line == f"agent-journal: {target}: cannot write: No space left on device"
        assert sorted(path.name for path in out.iterdir()) == ["filler", "out.file"]
        assert target.read_bytes() == b"old\n"


@pytest.mark.parametrize("command", sorted(set(FILE_WRITES) - {"anchor"}))
def test_a_file_past_the_size_limit_is_one_line_and_leaves_no_file(
    db: Path, tmp_path: Path, command: str
) -> None:
    """``EFBIG`` from the kernel (``RLIMIT_FSIZE``), in a real process: no mount needed."""
    target = tmp_path / "out" / "out.file"
    target.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", "from tui.cli import main; main()"]
        + [*FILE_WRITES[command][0], str(target), "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
        preexec_fn=_limited(32768),  # the export, the page and the fixture are larger
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"agent-journal: {target}: cannot write: File too large\n"
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize("locked", ["folder", "file"])
def test_search_reads_a_read_only_journal_with_its_index_or_names_the_fix(
    db: Path, tmp_path: Path, locked: str
) -> None:
    """Search keeps its index in the journal: a current one is read, a missing one refused."""
    unindexed = tmp_path / "unindexed" / "journal.db"
    unindexed.parent.mkdir()
    shutil.copyfile(db, unindexed)
    writable = run_cli("search", "line 550", "--db", db)  # builds the index
    assert (writable.exit_code, writable.stderr) == (0, ""), writable.stderr
    assert "long" in writable.stdout
    for journal in (db, unindexed):
        Journal.open(journal).close()  # a clean close: the WAL folded in
    with contextlib.ExitStack() as stack:
        for journal in (db, unindexed):
            stack.enter_context(read_only(journal.parent if locked == "folder" else journal))
        result = run_cli("search", "line 550", "--db", db)
        assert (result.exit_code, result.stdout, result.stderr) == (0, writable.stdout, "")
        line = one_error_line(run_cli("search", "line 550", "--db", unindexed))
    why = (
        "SQLite cannot create journal.db-wal and journal.db-shm beside it"
        if locked == "folder"
        else "journal.db is not writable"
    )
    assert line == (
        f"agent-journal: {unindexed}: search keeps its index in the journal and cannot build "
        f"or update it here: the journal is read-only ({why}; opened read-only); search a copy "
        "of it in a writable folder"
    )
