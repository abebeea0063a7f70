"""The timeline: the state after any seq equals the fold of the prefix, through snapshots kept
in a derived table that is built on first need, reused, rebuilt for a new fold version,
never exported, never verified, and erased with its session."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import (
    FOLD_VERSION,
    InvalidInputError,
    Journal,
    SessionState,
    UserInput,
    export_session,
    fold,
)
from replay import SNAPSHOT_INTERVAL, Timeline, state_changes

from . import replay_helpers as rh
from .helpers import foreign, make_journal, sample_session
from .strategies import sessions

INTERVAL = 4


def snapshot_rows(journal: Journal, session_id: str | None = None) -> list[tuple[int, int]]:
    """(fold_version, seq) of the stored snapshots, of one session or all."""
    tables = journal._query(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'snapshots'"
        if journal.target.startswith("postgresql")
        else "SELECT count(*) FROM sqlite_master WHERE name = 'snapshots'"
    )
    if not tables[0][0]:
        return []
    where, params = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
    return [
        (int(version), int(seq))
        for version, seq in journal._query(
            f"SELECT fold_version, seq FROM snapshots {where} ORDER BY fold_version, seq", params
        )
    ]


@pytest.fixture
def long_session(journal: Journal) -> Iterator[Journal]:
    """Session ``long``: the sample session then 60 more turns of input (about 74 events)."""
    events = sample_session()[:12] + [UserInput(text=f"turn {i}") for i in range(60)]
    journal.append("long", events)
    yield journal


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=sessions(max_turns=4, max_proposals=3), data=st.data())
def test_state_at_any_seq_is_the_fold_of_the_prefix(events: list, data: st.DataObject) -> None:
    with Journal.open(":memory:") as journal:
        journal.append("s", events)
        timeline = Timeline(journal, "s", interval=INTERVAL, cache=2)
        recorded = list(journal.events("s"))
        seqs = data.draw(st.lists(st.integers(-1, len(events) - 1), min_size=1, max_size=12))
        for seq in seqs:
            assert timeline.state_at(seq) == fold(recorded[: seq + 1]), seq
        # a fresh timeline (empty cache) starts from the stored snapshots and agrees
        again = Timeline(journal, "s", interval=INTERVAL)
        for seq in seqs:
            assert again.state_at(seq) == fold(recorded[: seq + 1]), seq


def test_state_before_any_event_and_outside_the_session(long_session: Journal) -> None:
    timeline = Timeline(long_session, "long", interval=INTERVAL)
    assert timeline.state_at(-1) == SessionState()
    last = timeline.last_seq
    with pytest.raises(InvalidInputError, match=rf"seq {last + 1} is outside 0..{last}"):
        timeline.state_at(last + 1)
    with pytest.raises(InvalidInputError):
        timeline.state_at(-2)


def test_a_timeline_follows_a_growing_session(long_session: Journal) -> None:
    timeline = Timeline(long_session, "long", interval=INTERVAL)
    last = timeline.last_seq
    long_session.append("long", [UserInput(text="one more")])
    assert timeline.state_at(last + 1).last_seq == last + 1
    assert timeline.last_seq == last + 1


def test_snapshots_are_built_on_first_need(any_journal: Journal) -> None:
    events = sample_session()[:12] + [UserInput(text=f"turn {i}") for i in range(60)]
    any_journal.append("long", events)
    any_journal.append("other", sample_session())
    assert snapshot_rows(any_journal) == []  # appending builds none
    timeline = Timeline(any_journal, "long", interval=INTERVAL)
    timeline.state_at(10)
    assert snapshot_rows(any_journal) == [(FOLD_VERSION, 3), (FOLD_VERSION, 7)]
    timeline.state_at(len(events) - 1)
    expected = [(FOLD_VERSION, s) for s in range(INTERVAL - 1, len(events), INTERVAL)]
    assert snapshot_rows(any_journal, "long") == expected
    assert snapshot_rows(any_journal, "other") == []
    # asking again stores nothing new
    Timeline(any_journal, "long", interval=INTERVAL).state_at(len(events) - 1)
    assert snapshot_rows(any_journal, "long") == expected
    # never verified, never exported, erased with the session
    assert any_journal.verify().ok
    any_journal.erase("long", reason="test")
    assert snapshot_rows(any_journal) == []


def test_snapshots_are_reused_not_refolded(long_session: Journal) -> None:
    last = long_session.require("long").last_seq
    Timeline(long_session, "long", interval=INTERVAL).state_at(last)
    rng = random.Random(4)
    for seq in [rng.randint(0, last) for _ in range(25)]:
        counting = rh.CountingJournal(long_session)
        state = Timeline(counting, "long", interval=INTERVAL).state_at(seq)
        assert counting.read <= INTERVAL - 1, (seq, counting.read)
        assert counting.read == (seq + 1) % INTERVAL
        assert state.last_seq == seq


def test_the_first_question_folds_once_and_later_ones_use_the_cache(long_session: Journal) -> None:
    counting = rh.CountingJournal(long_session)
    timeline = Timeline(counting, "long", interval=INTERVAL)
    last = timeline.last_seq
    timeline.state_at(last)
    assert counting.read == last + 1
    timeline.state_at(last)
    timeline.state_at(last - 1)
    assert counting.read == last + 1 + (last % INTERVAL)


def test_snapshots_of_another_fold_version_are_rebuilt(
    long_session: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    last = long_session.require("long").last_seq
    Timeline(long_session, "long", interval=INTERVAL).state_at(last)
    old = snapshot_rows(long_session)
    monkeypatch.setattr("replay.timeline.FOLD_VERSION", FOLD_VERSION + 1)
    counting = rh.CountingJournal(long_session)
    state = Timeline(counting, "long", interval=INTERVAL).state_at(last)
    assert counting.read == last + 1  # nothing of the old version was used
    assert state == fold(long_session.events("long"))
    new = [row for row in snapshot_rows(long_session) if row[0] == FOLD_VERSION + 1]
    assert [seq for _, seq in new] == [seq for _, seq in old]


def test_snapshots_are_not_exported_but_verified(long_session: Journal, db_path: Path) -> None:
    before = export_session(long_session, "long")
    Timeline(long_session, "long", interval=INTERVAL).state_at(50)
    assert snapshot_rows(long_session)
    assert export_session(long_session, "long") == before
    assert long_session.verify().ok
    # a snapshot garbled by hand is a finding: derived data is checked, not trusted
    with foreign(db_path) as conn:
        conn.execute("UPDATE snapshots SET state = '{}' WHERE seq = 3")
    report = long_session.verify()
    assert [(p.seq, p.kind) for p in report.problems] == [(3, "snapshot")]
    assert long_session.verify(quick=True).ok  # the quick mode does not refold


def test_the_default_interval() -> None:
    assert SNAPSHOT_INTERVAL == 256


def test_changes_at_names_what_an_event_changed(tmp_path: Path) -> None:
    path = make_journal(tmp_path / "j.db", {"s": sample_session()})
    with Journal.open(path) as journal:
        timeline = Timeline(journal, "s")
        paths = {change.path: (change.before, change.after) for change in timeline.changes_at(3)}
        assert paths["committed"] == (0, 1)
        assert paths["last_seq"] == (2, 3)
        assert set(paths) >= {"events", "last_seq", "committed", "steps"}
        first = {change.path for change in timeline.changes_at(0)}
        assert {"agent", "events", "started"} <= first
        before, after = timeline.state_at(2), timeline.state_at(3)
        assert state_changes(before, before) == []
        assert state_changes(before, after) == timeline.changes_at(3)
