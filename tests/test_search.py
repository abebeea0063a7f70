"""Full-text search across sessions, on both stores: what is found, filters, the index's life.

The index is derived data: built by the first search, caught up by later ones, emptied of
an erased session, never written by an append, exported or verified.
"""

from __future__ import annotations

import json
import sqlite3
import string
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import (
    SEARCH_INDEX_TABLE,
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    InvalidInputError,
    Journal,
    SearchFilters,
    SessionStarted,
    ToolCall,
    UserInput,
    VerificationFailed,
)
from journal.search import SearchHit, query_parts, snippet

from .helpers import one_error_line, run_cli
from .stores import StoreUnderTest

T0 = "2026-11-30T10:00:00.000000Z"
T1 = "2026-11-30T12:00:00.000000Z"
T2 = "2026-11-30T14:00:00.000000Z"


def refund_session(order: str, amount: float) -> list[object]:
    """A completed refund: proposed, committed with a result, answered."""
    args = {"order_id": order, "amount": amount}
    return [
        SessionStarted(agent="app:refunds", metadata={"customer": "acme", "tier": 3}),
        UserInput(text=f"please refund order {order}"),
        ActionProposed(calls=[ToolCall(call_id="c1", tool="issue_refund", args=args)]),
        ActionCommitted(
            call_id="c1", tool="issue_refund", args=args, result={"refund_id": "rf_7731"}
        ),
        AgentCompleted(answer="Your refund is on its way"),
    ]


def halted_session() -> list[object]:
    """A session whose tool failed, whose call was rejected, and that halted on repeat."""
    return [
        SessionStarted(agent="app:poller", metadata={"customer": "globex", "vip": True}),
        UserInput(text="status of ticket T-4410"),
        ActionFailed(
            call_id="c1", tool="get_ticket", kind="business", message="ticket quarantined"
        ),
        VerificationFailed(
            call_id="c2", tool="get_ticket", stage="repeat", message="already asked twice"
        ),
        AgentHalted(rule="repeat", reason="the same call kept coming back"),
    ]


@pytest.fixture
def filled(any_journal: Journal) -> Journal:
    """Two refunds (ord_8812 at T0, ord_9000 at T1) and a halted poller (at T2)."""
    any_journal.append("refund-a", refund_session("ord_8812", 150.0), ts=T0)  # type: ignore[arg-type]
    any_journal.append("refund-b", refund_session("ord_9000", 20.0), ts=T1)  # type: ignore[arg-type]
    any_journal.append("poller", halted_session(), ts=T2)  # type: ignore[arg-type]
    return any_journal


def where(hits: list[SearchHit]) -> list[tuple[str, int]]:
    """The session and seq of each hit, in the order found."""
    return [(hit.session_id, hit.seq) for hit in hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("amount", {("refund-a", 2), ("refund-a", 3), ("refund-b", 2), ("refund-b", 3)}),
        ("rf_7731", {("refund-a", 3), ("refund-b", 3)}),  # a tool result
        ("ord_8812", {("refund-a", 1), ("refund-a", 2), ("refund-a", 3)}),  # input, args
        ("way", {("refund-a", 4), ("refund-b", 4)}),  # an answer
        ("quarantined", {("poller", 2)}),  # a tool's error message
        ("twice", {("poller", 3)}),  # the gate's message
        ("kept coming back", {("poller", 4)}),  # a halt reason
        ("globex", {("poller", 0)}),  # metadata
        ("T-4410", {("poller", 1)}),  # a user input
    ],
)
def test_every_kind_of_payload_is_found(
    filled: Journal, query: str, expected: set[tuple[str, int]]
) -> None:
    assert set(where(filled.search(query))) == expected


def test_a_hit_says_where_what_and_when_with_a_snippet(filled: Journal) -> None:
    [hit] = filled.search("quarantined")
    assert (hit.session_id, hit.seq, hit.type, hit.ts) == ("poller", 2, "action_failed", T2)
    assert hit.tools == ["get_ticket"]
    assert "ticket quarantined" in hit.snippet
    assert hit.rank > 0


def test_every_word_must_be_there_in_any_case_and_a_quoted_phrase_in_order(
    filled: Journal,
) -> None:
    assert where(filled.search("REFUND ord_9000 PLEASE")) == [("refund-b", 1)]
    assert where(filled.search("refund nothing-like-this")) == []
    assert where(filled.search('"order ord_9000 refund"')) == []
    assert where(filled.search('"refund order ord_9000"')) == [("refund-b", 1)]


def test_words_that_look_like_query_syntax_are_only_words(filled: Journal) -> None:
    for query in ("NOT", "ord_8812 OR", "a:b", "(x", "col:value NEAR", '"unclosed', "x*"):
        filled.search(query)  # no syntax error on either store


def test_filters_combine(filled: Journal) -> None:
    assert set(where(filled.search("ord_8812", SearchFilters(tool="issue_refund")))) == {
        ("refund-a", 2),
        ("refund-a", 3),
    }
    only = SearchFilters(tool="issue_refund", type="action_committed")
    assert where(filled.search("amount", only)) in (
        [("refund-a", 3), ("refund-b", 3)],
        [("refund-b", 3), ("refund-a", 3)],
    )
    timed = SearchFilters(tool="issue_refund", type="action_committed", since=T1)
    assert where(filled.search("amount", timed)) == [("refund-b", 3)]
    assert where(filled.search("amount", timed.model_copy(update={"until": T1}))) == []
    assert where(filled.search("amount", SearchFilters(until=T1, type="user_input"))) == []
    assert where(filled.search("refund", SearchFilters(session_id="refund-b", type="user_input")))
    halted = SearchFilters(status="halted", rule="repeat")
    assert set(where(filled.search("ticket", halted))) == {("poller", n) for n in (1, 2, 3)}
    assert where(filled.search("ticket", SearchFilters(status="completed"))) == []
    assert where(filled.search("ticket", SearchFilters(rule="step_limit"))) == []
    assert where(filled.search("way", SearchFilters(meta={"customer": "acme", "tier": "3"})))
    assert where(filled.search("way", SearchFilters(meta={"tier": "4"}))) == []
    assert where(filled.search("ticket", SearchFilters(meta={"vip": "true", "type": "x"}))) == []
    assert len(filled.search("ticket", SearchFilters(meta={"vip": "true"}))) == 3
    assert len(filled.search("amount", limit=1)) == 1


def test_the_tool_filter_takes_a_name_literally(any_journal: Journal) -> None:
    call = ToolCall(call_id="c", tool="issue%refund", args={})
    any_journal.append("s", [SessionStarted(), ActionProposed(calls=[call], text="note")])
    assert where(any_journal.search("note", SearchFilters(tool="issue_refund"))) == []
    assert where(any_journal.search("note", SearchFilters(tool="issue%refund"))) == [("s", 1)]
    assert where(any_journal.search("note", SearchFilters(tool="issue"))) == []


def test_the_index_is_built_by_a_search_never_by_an_append(
    any_store: StoreUnderTest, filled: Journal
) -> None:
    with any_store.raw() as raw:
        tables = (
            "SELECT count(*) FROM sqlite_master WHERE name = 'search_index'"
            if any_store.schema is None
            else "SELECT count(*) FROM pg_tables WHERE tablename = 'search_index' "
            "AND schemaname = current_schema()"
        )
        assert raw.value(tables) == 0
        assert filled.refresh_search_index() == 15
        assert filled.refresh_search_index() == 0
        filled.append("late", [SessionStarted(), UserInput(text="zanzibar")])
        assert raw.value(f"SELECT count(*) FROM {SEARCH_INDEX_TABLE}") == 15  # not by the append
    assert where(filled.search("zanzibar")) == [("late", 1)]  # caught up by the search
    assert filled.verify().ok


def test_a_session_appended_after_the_index_was_built_is_found(filled: Journal) -> None:
    assert where(filled.search("ord_9000", SearchFilters(type="user_input"))) == [("refund-b", 1)]
    filled.append("refund-c", refund_session("ord_9000", 5.0), ts=T2)  # type: ignore[arg-type]
    filled.append("refund-b", [UserInput(text="and ord_9000 again")])
    found = where(filled.search("ord_9000", SearchFilters(type="user_input")))
    assert set(found) == {("refund-b", 1), ("refund-b", 5), ("refund-c", 1)}


def test_an_erased_session_disappears_and_its_rows_with_it(
    any_store: StoreUnderTest, filled: Journal
) -> None:
    assert {h.session_id for h in filled.search("refund")} == {"refund-a", "refund-b"}
    filled.erase("refund-a", reason="retention")
    assert {h.session_id for h in filled.search("refund")} == {"refund-b"}
    with any_store.raw() as raw:
        query = f"SELECT count(*) FROM {SEARCH_INDEX_TABLE} WHERE session_id = 'refund-a'"
        assert raw.value(query) == 0
    filled.append("refund-a", refund_session("ord_1", 1.0))  # type: ignore[arg-type]
    assert where(filled.search("ord_8812")) == []  # the new session of that id only
    assert len(filled.search("ord_1")) == 3


def test_an_erase_before_any_search_leaves_nothing_behind(filled: Journal) -> None:
    filled.erase("poller", reason="retention")
    assert filled.search("ticket") == []


def test_bad_queries_are_refused(filled: Journal) -> None:
    for query in ("", "   ", '""', "-- !"):
        with pytest.raises(InvalidInputError, match="at least one word"):
            filled.search(query)
    with pytest.raises(InvalidInputError, match="limit"):
        filled.search("refund", limit=0)


def test_sessions_filter_by_halt_rule_and_metadata(filled: Journal) -> None:
    assert [s.session_id for s in filled.sessions(rule="repeat")] == ["poller"]
    assert [s.session_id for s in filled.sessions(meta={"customer": "acme"})] == [
        "refund-b",
        "refund-a",
    ]
    assert [s.session_id for s in filled.sessions(meta={"customer": "acme", "tier": "3"})] == [
        "refund-b",
        "refund-a",
    ]
    assert filled.sessions(meta={"customer": "acme", "tier": "4"}) == []
    assert [s.session_id for s in filled.sessions(meta={"vip": "true"}, rule="repeat")] == [
        "poller"
    ]
    assert filled.sessions(meta={"customer": "acme"}, rule="repeat") == []
    assert len(filled.sessions(meta={"customer": "acme"}, limit=1)) == 1


def test_session_details_are_the_metadata_and_the_halt_reason(filled: Journal) -> None:
    details = filled.session_details(["poller", "refund-a", "missing"])
    assert set(details) == {"poller", "refund-a"}
    assert details["poller"].metadata == {"customer": "globex", "vip": True}
    assert details["poller"].halt_reason == "the same call kept coming back"
    assert details["refund-a"].halt_reason is None


def test_query_parts_and_snippets() -> None:
    assert query_parts('refund "order 12" x') == ["refund", "order 12", "x"]
    assert query_parts('"unclosed phrase') == ["unclosed phrase"]
    text = "a" * 300 + " the refund of ord_8812 went through " + "b" * 300
    cut = snippet(text, ["ord_8812"])
    assert cut.startswith("…") and cut.endswith("…") and "ord_8812" in cut
    assert snippet("no match here", ["zebra"]) == "no match here"


@settings(
    max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(words=st.lists(st.text(string.ascii_letters + string.digits, min_size=1, max_size=12)))
def test_any_word_of_a_user_input_finds_it(tmp_path: Path, words: list[str]) -> None:
    session = uuid.uuid4().hex
    with Journal.open(tmp_path / "prop.db") as journal:
        journal.append(session, [SessionStarted(), UserInput(text=" ".join(words))])
        for word in words:
            assert (session, 1) in where(journal.search(word, SearchFilters(session_id=session)))


# -- the command line ------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite journal with the two refunds and the poller."""
    path = tmp_path / "search.db"
    with Journal.open(path) as journal:
        journal.append("refund-a", refund_session("ord_8812", 150.0), ts=T0)  # type: ignore[arg-type]
        journal.append("poller", halted_session(), ts=T2)  # type: ignore[arg-type]
    return path


def test_cli_search_prints_one_line_per_hit(db: Path) -> None:
    result = run_cli("search", "quarantined", "--db", db)
    assert (result.exit_code, result.stderr) == (0, "")
    [line] = result.stdout.splitlines()
    assert line.split()[:5] == ["poller", "2", "2026-11-30", "14:00:00", "action_failed"]
    assert "ticket quarantined" in line


def test_cli_search_json_and_filters(db: Path) -> None:
    result = run_cli(
        "search",
        "ord_8812",
        "--db",
        db,
        "--tool",
        "issue_refund",
        "--type",
        "action_committed",
        "--status",
        "completed",
        "--meta",
        "customer=acme",
        "--since",
        "2026-11-30",
        "--until",
        "2026-12-01T00:00:00Z",
        "--session",
        "refund-a",
        "--limit",
        "5",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    [hit] = json.loads(result.stdout)
    assert {k: hit[k] for k in ("session_id", "seq", "type", "tools")} == {
        "session_id": "refund-a",
        "seq": 3,
        "type": "action_committed",
        "tools": ["issue_refund"],
    }
    assert set(hit) == {"session_id", "seq", "type", "ts", "tools", "snippet", "rank"}
    halted = run_cli("search", "ticket", "--db", db, "--rule", "repeat", "--since", "1000w")
    assert len(halted.stdout.splitlines()) == 3
    none = run_cli("search", "zebra", "--db", db, "--json")
    assert (none.exit_code, json.loads(none.stdout)) == (0, [])
    nothing = run_cli("search", "zebra", "--db", db)
    assert (nothing.exit_code, nothing.stdout, nothing.stderr) == (0, "", "no matches\n")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["   "], "at least one word"),
        (["x", "--meta", "customer"], "KEY=VALUE"),
        (["x", "--meta", "=acme"], "KEY=VALUE"),
        (["x", "--meta", "a=1", "--meta", "a=2"], "twice"),
        (["x", "--since", "monday"], "is not a time"),
        (["x", "--until", "2026-11-30T10:00:00"], "no time zone"),
        (["x", "--type", "nonsense"], "--type"),
        (["x", "--status", "nonsense"], "--status"),
        (["x", "--limit", "0"], "--limit"),
        (["x", "--session", "nope"], "session nope: not in "),
    ],
)
def test_cli_search_bad_input_is_one_line_and_exit_2(db: Path, args: list[str], says: str) -> None:
    assert says in one_error_line(run_cli("search", *args, "--db", db))


def test_cli_search_needs_a_journal(tmp_path: Path) -> None:
    line = one_error_line(run_cli("search", "x", "--db", tmp_path / "missing.db"))
    assert "no journal here" in line


def test_cli_sessions_filter_by_rule_and_meta(db: Path) -> None:
    result = run_cli("sessions", "--db", db, "--rule", "repeat", "--json")
    [row] = json.loads(result.stdout)
    assert (row["session_id"], row["halt_rule"], row["halt_reason"]) == (
        "poller",
        "repeat",
        "the same call kept coming back",
    )
    assert row["metadata"] == {"customer": "globex", "vip": True}
    table = run_cli("sessions", "--db", db, "--meta", "customer=acme", "--meta", "tier=3")
    [_, line] = table.stdout.splitlines()
    assert line.startswith("refund-a") and line.endswith("customer=acme tier=3")
    assert "--meta" in one_error_line(run_cli("sessions", "--db", db, "--meta", "tier"))


def test_two_writers_catching_up_at_once_index_each_event_once(
    any_store: StoreUnderTest, filled: Journal
) -> None:
    with Journal.open(any_store.target) as other:
        other.append("other", [SessionStarted(), UserInput(text="from the other connection")])
        assert where(filled.search("other connection")) == [("other", 1)]
        assert where(other.search("other connection")) == [("other", 1)]
        filled.append("mine", [SessionStarted(), UserInput(text="connection of mine")])
        assert {h.session_id for h in other.search("connection")} == {"other", "mine"}
    with any_store.raw() as raw:
        assert raw.value(f"SELECT count(*) FROM {SEARCH_INDEX_TABLE}") == 19
        assert raw.value(f"SELECT count(DISTINCT pos) FROM {SEARCH_INDEX_TABLE}") == 19


def test_a_body_garbled_outside_agent_journal_is_indexed_by_its_summary(
    journal: Journal, db_path: Path
) -> None:
    journal.append("s", [SessionStarted(), UserInput(text="fine")])
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary) "
            "VALUES ('s', 2, ?, 'user_input', 1, 'not json', 'x', 'garbled summary')",
            (T0,),
        )
    assert where(journal.search("garbled")) == [("s", 2)]
    assert where(journal.search("fine")) == [("s", 1)]


def test_an_index_setup_cut_short_is_completed_by_the_next_journal(
    journal: Journal, db_path: Path
) -> None:
    journal.append("s", [SessionStarted(), UserInput(text="alpha")])
    assert where(journal.search("alpha")) == [("s", 1)]
    with sqlite3.connect(db_path) as conn:  # as if the process died inside enable_fts
        conn.execute("DROP TRIGGER search_index_ai")
        conn.execute("DROP TABLE search_index_fts")
    journal.append("t", [SessionStarted(), UserInput(text="alpha again")])
    with Journal.open(db_path) as again:
        assert set(where(again.search("alpha"))) == {("s", 1), ("t", 1)}


# -- a poisoned index: rows changed, planted or removed by a writer of the database ----------


def _poison(store: StoreUnderTest, statement: str) -> None:
    with store.raw() as raw:
        raw.run(statement)


def _index_findings(journal: Journal) -> list[tuple[str | None, int | None, str]]:
    return [
        (p.session_id, p.seq, p.message.split(":")[0])
        for p in journal.verify().problems
        if p.kind == "search_index"
    ]


def test_a_changed_index_row_is_never_shown_and_verify_reports_it(
    any_store: StoreUnderTest, filled: Journal
) -> None:
    """The row says 15.0 where the event holds 150.0: no search shows the lie."""
    filled.refresh_search_index()
    _poison(
        any_store,
        f"UPDATE {SEARCH_INDEX_TABLE} SET text = replace(text, '150.0', '15.0') "
        "WHERE session_id = 'refund-a' AND seq = 2",
    )
    assert _index_findings(filled) == [
        ("refund-a", 2, "the search index row at position 3 does not match the events")
    ]
    assert filled.search("15.0") == []  # dropped, and the row put right
    assert where(filled.search("150.0")) == [("refund-a", 2), ("refund-a", 3)]
    assert filled.verify().ok


def test_a_planted_index_row_is_never_shown_and_verify_reports_it(
    any_store: StoreUnderTest, filled: Journal
) -> None:
    filled.refresh_search_index()
    _poison(
        any_store,
        f"INSERT INTO {SEARCH_INDEX_TABLE}(pos, session_id, seq, type, tools, ts, text) "
        f"VALUES (999999, 'refund-b', 1, 'user_input', '', '{T1}', 'send it to attacker')",
    )
    [(session, seq, message)] = _index_findings(filled)
    assert (session, seq, message) == (
        "refund-b",
        1,
        "the search index row at position 999999 does not match the events",
    )
    assert filled.search("attacker") == []
    assert filled.verify().ok  # the search removed the planted row


def test_a_hidden_event_is_reported_by_verify_and_found_after_repair(
    any_store: StoreUnderTest, filled: Journal
) -> None:
    filled.refresh_search_index()
    _poison(
        any_store,
        f"DELETE FROM {SEARCH_INDEX_TABLE} WHERE session_id = 'refund-b' AND seq = 1",
    )
    assert where(filled.search("ord_9000", SearchFilters(type="user_input"))) == []
    assert [(s, q) for s, q, _ in _index_findings(filled)] == [("refund-b", 1)]
    assert [p.kind for p in filled.repair()] == ["search_index"]
    assert filled.verify().ok
    assert where(filled.search("ord_9000", SearchFilters(type="user_input"))) == [("refund-b", 1)]
