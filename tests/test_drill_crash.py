"""Crash drill: SIGKILL a journal writer at random points, hundreds of times, and lose nothing.

Three writers are killed: the agent loop writing sessions (a scripted agent, several
sessions, each append reported on a pipe once it returned), ``agent-journal import`` (JSONL
and OpenAI transcripts) and ``agent-journal replay --save``. Children come from a fork
server (`tests.drill_helpers.Zygote`), so a kill costs milliseconds, not an interpreter
start. After every kill: SQLite's integrity check passes, `verify` passes, every append
that returned is there, every session is a valid prefix that replays identically, an
import is there whole or not at all. The default run does a bounded number of kills; the
full counts run with ``pytest -m slow tests/test_drill_*.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, export_session
from journal.formats.openai_import import import_openai
from replay import compare

from .drill_agent import drill_journal
from .drill_helpers import (
    Figures,
    Run,
    check_prefix,
    drill_size,
    integrity_ok,
    missing,
    zygote,
)
from .helpers import run_cli
from .openai_helpers import assistant, call, tool, user, write_json

KILLS = [
    pytest.param(20, id="bounded"),
    pytest.param(drill_size(60, 200), id="full", marks=pytest.mark.slow),
]
"""Kills of a CLI command: in the default run, and in the slow one."""


def _journal_checks(db: Path) -> Journal:
    """Open the journal after a kill: the file is intact and verify passes."""
    assert integrity_ok(db)
    journal = Journal.open(db)
    report = journal.verify()
    assert report.ok, report.problems
    return journal


# -- the agent loop ------------------------------------------------------------------------


def _loop_drill(tmp_path: Path, seeds: range, kills: int) -> Figures:
    figures = Figures()
    log = tmp_path / "child.log"
    with zygote() as server:
        for seed in seeds:
            db = tmp_path / f"loop-{seed}.db"
            rng = random.Random(seed)
            for round_ in range(kills):
                prefix = f"s{seed}r{round_}"
                wanted = 0 if rng.random() < 0.1 else rng.randint(1, 80)
                run = server.kill_after(
                    ["sessions", db, prefix, seed, log],
                    log,
                    reports=wanted,
                    delay=rng.random() * 0.01,
                )
                assert run.killed, run.output()
                figures.kills += 1
                if not db.exists():
                    assert not run.reports
                    continue
                with _journal_checks(db) as journal:
                    figures.confirmed += len(run.reports)
                    figures.lost += missing(journal, run.reports)
                    for summary in journal.sessions():
                        if summary.session_id.startswith(f"{prefix}-"):
                            figures.sessions += 1
                            figures.events += check_prefix(journal, summary.session_id)
            assert run_cli("verify", "--db", db).exit_code == 0
    print(figures.line("agent loop"))
    return figures


@pytest.mark.parametrize(
    ("seeds", "kills"),
    [
        pytest.param(range(2), 15, id="bounded"),
        pytest.param(range(10, 10 + drill_size(3, 10)), 30, id="full", marks=pytest.mark.slow),
    ],
)
def test_a_loop_killed_anywhere_leaves_valid_replayable_prefixes(
    tmp_path: Path, seeds: range, kills: int
) -> None:
    figures = _loop_drill(tmp_path, seeds, kills)
    assert figures.kills == len(seeds) * kills and figures.lost == 0
    assert figures.sessions > figures.kills  # kills landed in the middle of later sessions


# -- killed CLI commands ----------------------------------------------------------------------


def _cli_drill(
    tmp_path: Path,
    kills: int,
    commands: list[list[object]],
    check: Callable[[Path, Run], None],
    figures: Figures,
) -> None:
    """Kill each command in turn (round robin) at a random time within its usual run.

    ``check`` sees the journal after every run; a run that ended by itself counts too.
    """
    rng = random.Random(kills)
    log = tmp_path / "child.log"
    with zygote() as server:
        window = []
        for command in commands:
            run = server.kill_after(["cli", log, *command], log, reports=1, delay=None)
            window.append(run.elapsed)
            assert run.exit in (0, 1), run.output()
            check(tmp_path, run)
        for round_ in range(kills):
            index = round_ % len(commands)
            run = server.kill_after(
                ["cli", log, *commands[index]],
                log,
                reports=1,
                delay=rng.uniform(0, window[index]),
            )
            assert run.killed or run.exit in (0, 1), run.output()
            assert "Traceback" not in run.output()
            figures.kills += run.killed
            figures.finished += not run.killed
            # the window follows the command's real length, so kills land all along it
            window[index] *= 1.05 if run.killed else 0.7
            check(tmp_path, run)


def _transcripts(folder: Path, files: int, conversations: int) -> list[Path]:
    """OpenAI transcript files of many conversations, each with a session id and big results."""
    paths = []
    for f in range(files):
        items = []
        for c in range(conversations):
            messages: list[dict[str, Any]] = [user(f"question {c}")]
            for step in range(6):
                messages.append(assistant(None, call(f"c{step}", "fetch", {"page": step})))
                messages.append(tool(f"c{step}", f"page {step} " + "lorem ipsum " * 200))
            messages.append(assistant(f"answer {c}"))
            items.append({"messages": messages, "metadata": {"session_id": f"oa{f}-{c}"}})
        paths.append(write_json(folder / f"transcripts-{f}.json", items, indent=None))
    return paths


@pytest.fixture(scope="module")
def import_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Six big JSONL sessions and three OpenAI files, with what a whole import gives."""
    folder = tmp_path_factory.mktemp("import-drill")
    source = folder / "source.db"
    ids = drill_journal(source, sessions=6, turns=8, seed=3)
    jsonl = []
    with Journal.open(source) as journal:
        for session_id in ids:
            path = folder / f"{session_id}.jsonl"
            path.write_bytes(export_session(journal, session_id))
            jsonl.append(path)
    openai = _transcripts(folder, files=3, conversations=30)
    expected: dict[str, dict[str, int]] = {}
    with Journal.open(":memory:") as scratch:
        for item in import_openai(scratch, openai).files:
            expected[item["path"]] = {
                sid: scratch.require(sid).events for sid in item["session_ids"]
            }
    return {"jsonl": jsonl, "openai": openai, "expected": expected}


def _check_import(files: dict[str, Any], figures: Figures) -> Callable[[Path, Run], None]:
    rng = random.Random(0)

    def check(tmp_path: Path, run: Run) -> None:
        db = tmp_path / "target.db"
        if not db.exists():
            return
        complete, before = True, figures.sessions
        with _journal_checks(db) as journal:
            for path in files["jsonl"]:
                lines = path.read_bytes().splitlines()[1:]
                session_id = path.stem
                stored = [row.line() for row in journal.stored_events(session_id)]
                assert stored in ([], lines), f"{path.name}: {len(stored)} of {len(lines)} events"
                figures.sessions += bool(stored)
                figures.events += len(stored)
                complete &= bool(stored)
            for path, sessions in files["expected"].items():
                counts = {sid: journal.last_seq(sid) for sid in sessions}
                present = {sid: seq is not None for sid, seq in counts.items()}
                assert len(set(present.values())) == 1, f"{path}: split import {present}"
                if all(present.values()):
                    found = {sid: (seq or 0) + 1 for sid, seq in counts.items()}
                    assert found == sessions, path
                    figures.sessions += len(sessions)
                    figures.events += sum(sessions.values())
                complete &= all(present.values())
        figures.extra["whole journals"] = figures.extra.get("whole journals", 0) + complete
        if run.killed and figures.sessions > before and not complete:
            figures.extra["cut imports"] = figures.extra.get("cut imports", 0) + 1
        if complete or rng.random() < 0.6:  # mostly start again, sometimes go on from a cut
            for leftover in tmp_path.glob("target.db*"):
                leftover.unlink()

    return check


@pytest.mark.parametrize("kills", KILLS)
def test_a_killed_import_leaves_each_file_whole_or_absent(
    tmp_path: Path, import_files: dict[str, Any], kills: int
) -> None:
    db = tmp_path / "target.db"
    commands: list[list[object]] = [
        ["import", *import_files["jsonl"], "--db", db],
        ["import", "--format", "openai", *import_files["openai"], "--db", db],
    ]
    figures = Figures()
    _cli_drill(tmp_path, kills, commands, _check_import(import_files, figures), figures)
    print(figures.line("import"))
    assert figures.kills > kills // 2 and figures.lost == 0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A journal of three long drill sessions (ten turns each) to replay."""
    db = tmp_path_factory.mktemp("replay-drill") / "recorded.db"
    return db, drill_journal(db, sessions=3, turns=10, seed=5)


def _check_replays(
    originals: dict[str, list[Any]], figures: Figures
) -> Callable[[Path, Run], None]:
    seen: set[str] = set()

    def check(tmp_path: Path, run: Run) -> None:
        with _journal_checks(tmp_path / "recorded.db") as journal:
            for session_id, events in originals.items():
                assert list(journal.events(session_id)) == events  # the recording is untouched
            for summary in journal.sessions():
                if summary.replay_of is None or summary.session_id in seen:
                    continue
                seen.add(summary.session_id)
                replayed = list(journal.events(summary.session_id))
                original = originals[summary.replay_of]
                # a prefix of what the recording holds, and it replays identically in turn
                assert compare(original[: len(replayed)], replayed) is None
                if len(replayed) < len(original):
                    figures.extra["cut replays"] = figures.extra.get("cut replays", 0) + 1
                figures.sessions += 1
                figures.events += check_prefix(journal, summary.session_id)

    return check


@pytest.mark.parametrize("kills", KILLS)
def test_a_killed_replay_save_leaves_a_replayable_prefix(
    tmp_path: Path, recorded: tuple[Path, list[str]], kills: int
) -> None:
    source, ids = recorded
    db = tmp_path / "recorded.db"
    db.write_bytes(source.read_bytes())
    with Journal.open(db) as journal:
        originals = {session_id: list(journal.events(session_id)) for session_id in ids}
    commands: list[list[object]] = [
        ["replay", session_id, "--db", db, "--save"] for session_id in ids
    ]
    figures = Figures()
    _cli_drill(tmp_path, kills, commands, _check_replays(originals, figures), figures)
    print(figures.line("replay --save"))
    assert figures.kills > kills // 2 and figures.lost == 0
