"""The projection's state JSON is written every `STATE_EVERY` events, and folded on on read.

An append on a connection's cached head updates the projection's columns and writes the
(growing) state JSON only when its last seq reaches another multiple of `STATE_EVERY`; a
connection without the cached head folds the events after the stored state's own
``last_seq``; verify compares that state with the fold at its seq, and repair mends it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal, SessionStarted, UserInput, fold
from journal._sqlstore import STATE_EVERY

from .stores import StoreUnderTest


def _stored_state(store: StoreUnderTest, session_id: str) -> dict[str, Any]:
    with store.raw() as raw:
        text = raw.value(f"SELECT state FROM sessions WHERE session_id = '{session_id}'")
    state: dict[str, Any] = json.loads(text)
    return state


def _one_event_appends(journal: Journal, session_id: str, count: int) -> None:
    journal.append(session_id, [SessionStarted(agent="a")])
    for n in range(1, count):
        journal.append(session_id, [UserInput(text=f"message {n}")])


def test_the_state_json_is_written_when_an_append_reaches_a_multiple_of_state_every(
    any_store: StoreUnderTest,
) -> None:
    last = STATE_EVERY + 8
    _one_event_appends(any_store.journal, "s", last + 1)
    stored = _stored_state(any_store, "s")
    assert stored["last_seq"] == STATE_EVERY  # not rewritten by the 8 appends after it
    assert stored == json.loads(
        fold(any_store.journal.events("s", stop=STATE_EVERY + 1)).model_dump_json()
    )
    any_store.journal.append("s", [UserInput(text="one more")])
    assert _stored_state(any_store, "s")["last_seq"] == STATE_EVERY
    assert any_store.journal.sessions()[0].events == last + 2  # the columns are current


def test_another_connection_folds_on_from_the_stored_state(any_store: StoreUnderTest) -> None:
    _one_event_appends(any_store.journal, "s", STATE_EVERY + 10)
    with Journal.open(any_store.target) as other:
        assert other.state("s") == fold(other.events("s"))
        other.append("s", [UserInput(text="from the other connection")])
        assert other.state("s").events == STATE_EVERY + 11
    # the first connection's cached head is stale now: it plans on the stored one
    any_store.journal.append("s", [UserInput(text="back on the first")])
    assert any_store.journal.state("s") == fold(any_store.journal.events("s"))
    assert any_store.journal.verify().ok


def test_verify_checks_an_older_state_json_at_its_own_seq_and_repair_mends_it(
    any_store: StoreUnderTest,
) -> None:
    _one_event_appends(any_store.journal, "s", STATE_EVERY + 5)
    assert any_store.journal.verify().ok  # the state is behind the last event, and right
    forged = _stored_state(any_store, "s")
    assert forged["turns"] == STATE_EVERY
    forged["turns"] = 1
    text = json.dumps(forged, separators=(",", ":")).replace("'", "''")
    any_store.tamper(f"UPDATE sessions SET state = '{text}' WHERE session_id = 's'")
    problems = any_store.journal.verify().problems
    assert [(p.session_id, p.seq, p.kind) for p in problems] == [("s", STATE_EVERY, "projection")]
    assert "state JSON (folded to seq" in problems[0].message
    assert [p.kind for p in any_store.journal.repair()] == ["projection"]
    assert any_store.journal.verify().ok
    with Journal.open(any_store.target) as other:
        assert other.state("s").turns == STATE_EVERY + 4


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=2 * STATE_EVERY), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_any_appends_and_reopenings_fold_to_the_state_of_the_events(
    tmp_path_factory: Any, appends: list[tuple[int, bool]]
) -> None:
    path: Path = tmp_path_factory.mktemp("state") / "j.db"
    journal = Journal.open(path)
    try:
        journal.append("s", [SessionStarted(agent="a")])
        for size, reopen in appends:
            journal.append("s", [UserInput(text=str(n)) for n in range(size)])
            if reopen:
                journal.close()
                journal = Journal.open(path)
        assert journal.state("s") == fold(journal.events("s"))
        report = journal.verify()
        assert report.ok, report.problems
    finally:
        journal.close()


def test_a_stored_state_past_the_last_event_is_not_folded_on(any_store: StoreUnderTest) -> None:
    _one_event_appends(any_store.journal, "s", STATE_EVERY + 5)
    forged = _stored_state(any_store, "s")
    forged["last_seq"], forged["turns"] = 10**6, 10**6
    text = json.dumps(forged, separators=(",", ":")).replace("'", "''")
    any_store.tamper(f"UPDATE sessions SET state = '{text}' WHERE session_id = 's'")
    with Journal.open(any_store.target) as other:
        assert other.state("s") == fold(other.events("s"))  # refolded, the claim ignored
    assert [p.kind for p in any_store.journal.verify().problems] == ["projection"]
