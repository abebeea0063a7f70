"""Derived data is checked, never trusted: the projection, summaries and snapshots.

A plain connection (or one with the triggers out of the way) changes what the journal
derives from its events; `verify` refolds each session and finds it, ``--quick`` does not
refold, and ``verify --repair`` rebuilds the projection and the snapshots from the events,
so the false state is not carried on by later appends or listings.
"""

from __future__ import annotations

import json

import pytest

from journal import FOLD_VERSION, AgentHalted, Journal, UserInput, fold
from replay import Timeline

from .helpers import run_cli, sample_session, short_session
from .stores import StoreUnderTest


def _kinds(journal: Journal, **options: object) -> list[tuple[str | None, int | None, str]]:
    return [(p.session_id, p.seq, p.kind) for p in journal.verify(**options).problems]  # type: ignore[arg-type]


def _failed_session() -> list[object]:
    return [*short_session(), UserInput(text="go on"), AgentHalted(rule="error", reason="boom")]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE sessions SET status = 'completed' WHERE session_id = 's1'",
        "UPDATE sessions SET steps = 0, failures = 0 WHERE session_id = 's1'",
        "UPDATE sessions SET agent = 'forged:agent' WHERE session_id = 's1'",
        "UPDATE sessions SET state = replace(state, '\"failed\"', '\"completed\"') "
        "WHERE session_id = 's1'",
    ],
    ids=["status", "counters", "agent", "state"],
)
def test_a_forged_projection_is_found_and_repaired(
    any_store: StoreUnderTest, statement: str
) -> None:
    journal = any_store.journal
    journal.append("s1", _failed_session())  # type: ignore[arg-type]
    journal.append("s2", short_session())
    truth = journal.summary("s1")
    any_store.tamper(statement)
    assert _kinds(journal) == [("s1", None, "projection")]
    assert journal.verify(quick=True).ok  # the quick mode does not refold
    with Journal.open(any_store.target) as other:  # a fresh connection: no cached head
        assert [p.kind for p in other.repair()] == ["projection"]
        assert other.verify().ok
        assert other.summary("s1") == truth
        assert other.state("s1") == fold(other.events("s1"))
        assert [s.session_id for s in other.sessions(status="failed")] == ["s1"]


@pytest.mark.parametrize(
    ("written_by", "forged", "found"),
    [
        (FOLD_VERSION - 1, "", False),
        (FOLD_VERSION - 1, ", status = 'completed'", True),
        (FOLD_VERSION + 1, "", True),
        (0, "", True),
    ],
    ids=["older-fold", "older-fold-forged-column", "future-fold", "no-such-fold"],
)
def test_a_projection_of_an_older_fold_is_stale_not_forged(
    any_store: StoreUnderTest, written_by: int, forged: str, found: bool
) -> None:
    """A journal written before the fold's version went up verifies clean; its columns are
    still checked, and a fold version that never was is a finding."""
    journal = any_store.journal
    journal.append("s1", _failed_session())  # type: ignore[arg-type]
    any_store.tamper(f"UPDATE sessions SET fold_version = {written_by}{forged}")
    with Journal.open(any_store.target) as other:  # a fresh connection: no cached head
        assert _kinds(other) == ([("s1", None, "projection")] if found else [])
        assert other.state("s1") == fold(other.events("s1"))


def test_a_forged_summary_is_found_and_not_repairable(any_store: StoreUnderTest) -> None:
    journal = any_store.journal
    journal.append("s1", sample_session())
    any_store.tamper("UPDATE events SET summary = 'all good' WHERE session_id = 's1' AND seq = 1")
    assert _kinds(journal) == [("s1", 1, "summary")]
    assert _kinds(journal, quick=True) == [("s1", 1, "summary")]  # no refold needed for it
    assert journal.repair() == []  # event rows are append-only: it stays a finding
    assert _kinds(journal) == [("s1", 1, "summary")]


def test_a_forged_snapshot_is_found_and_rebuilt(any_store: StoreUnderTest) -> None:
    journal = any_store.journal
    journal.append("s1", sample_session())
    timeline = Timeline(journal, "s1", interval=4)
    assert timeline.state_at(12) == fold(journal.events("s1", stop=13))
    assert journal.verify().ok
    any_store.tamper(
        "UPDATE snapshots SET state = (SELECT state FROM snapshots WHERE seq = 3) WHERE seq = 7"
    )
    any_store.tamper(
        "INSERT INTO snapshots(session_id, fold_version, seq, state) "
        "SELECT session_id, fold_version, 99, state FROM snapshots WHERE seq = 3"
    )
    assert _kinds(journal) == [("s1", 7, "snapshot"), ("s1", 99, "snapshot")]
    assert [p.kind for p in journal.repair()] == ["snapshot", "snapshot"]
    assert journal.verify().ok
    assert Timeline(journal, "s1", interval=4).state_at(7) == fold(journal.events("s1", stop=8))


def test_repair_leaves_sessions_whose_events_are_in_question(any_store: StoreUnderTest) -> None:
    journal = any_store.journal
    journal.append("s1", sample_session())
    any_store.tamper(
        "UPDATE sessions SET status = 'completed' WHERE session_id = 's1'",
        "DELETE FROM events WHERE session_id = 's1' AND seq = 13",
    )
    before = _kinds(journal)
    assert journal.repair() == []
    assert _kinds(journal) == before == [("s1", 13, "truncated")]


def test_cli_verify_repair_and_quick(any_store: StoreUnderTest) -> None:
    any_store.journal.append("s1", _failed_session())  # type: ignore[arg-type]
    any_store.tamper("UPDATE sessions SET status = 'completed' WHERE session_id = 's1'")
    db = any_store.target
    assert run_cli("verify", "--db", db, "--quick").exit_code == 0
    found = run_cli("verify", "--db", db)
    assert found.exit_code == 1
    assert "session s1: projection: the projection disagrees" in found.stdout
    assert "status 'completed' (the events say 'failed')" in found.stdout
    repaired = run_cli("verify", "--db", db, "--repair", "--json")
    assert repaired.exit_code == 0, repaired.stdout
    document = json.loads(repaired.stdout)
    assert document["ok"] is True
    assert [p["kind"] for p in document["repaired"]] == ["projection"]
    assert run_cli("verify", "--db", db).exit_code == 0
