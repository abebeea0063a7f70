"""Crash drill under group commit: SIGKILL a process appending to 8 sessions at once.

From 8 threads sharing one `Journal` (their appends share commits), or from 8 coroutines of
one event loop awaiting `Journal.append_async` (a pool thread writes them in batches); each
reports ``SESSION SEQ`` on a pipe once its append returned (`tests.drill_grouped`). After
every kill: SQLite's integrity check and `verify` pass, and every reported append is there.
The default run does a bounded number of kills; the slow run more
(``AGENT_JOURNAL_DRILLS=full``: the count of docs/drills.md).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from journal import Journal

from .drill_helpers import Figures, drill_size, integrity_ok, missing, zygote


def _grouped_drill(tmp_path: Path, writer: str, kills: int, seed: int) -> Figures:
    """SIGKILL a process appending to 8 sessions at once (``writer``: the zygote's command,
    ``grouped`` for threads or ``grouped-async`` for coroutines; reports after each return),
    then check nothing acknowledged is lost and the journal verifies."""
    figures = Figures()
    log = tmp_path / "child.log"
    rng = random.Random(seed)
    db = tmp_path / "grouped.db"
    with zygote() as server:
        for round_ in range(kills):
            prefix = f"r{round_}"
            run = server.kill_after(
                [writer, db, prefix, 8, log],
                log,
                reports=rng.randint(1, 400),
                delay=rng.random() * 0.02,
            )
            assert run.killed, run.output()
            figures.kills += 1
            assert integrity_ok(db)
            with Journal.open(db) as journal:
                report = journal.verify()
                assert report.ok, report.problems
                figures.confirmed += len(run.reports)
                figures.lost += missing(journal, run.reports)
                figures.sessions = len(journal.sessions())
                figures.events = report.events
    print(figures.line(f"group commit ({writer})"))
    return figures


@pytest.mark.parametrize("writer", ["grouped", "grouped-async"])
@pytest.mark.parametrize(
    "kills",
    [
        pytest.param(6, id="bounded"),
        pytest.param(drill_size(30, 60), id="full", marks=pytest.mark.slow),
    ],
)
def test_a_process_killed_under_group_commit_loses_no_acknowledged_append(
    tmp_path: Path, writer: str, kills: int
) -> None:
    figures = _grouped_drill(tmp_path, writer, kills, seed=kills)
    assert figures.kills == kills and figures.lost == 0
    assert figures.confirmed >= kills
