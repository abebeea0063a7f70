"""The storage contract, written once and run on SQLite and on PostgreSQL alike.

Every test here takes ``any_store`` / ``any_journal``: a SQLite file, then a fresh schema on
the run's PostgreSQL server (tests/pg_server.py; an unreachable server fails, never
skips). PostgreSQL-only behaviour (concurrency, positions, LISTEN/NOTIFY) is in
test_postgres.py.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from journal import (
    DEFAULT_MAX_EVENT_BYTES,
    AgentCompleted,
    AgentHalted,
    ConflictError,
    EventTooLargeError,
    InvalidEventError,
    InvalidInputError,
    Journal,
    SessionConflictError,
    SessionNotFoundError,
    SessionStarted,
    UserInput,
    fold,
)
from journal.canonical import chain_hash, loads_strict
from journal.formats.jsonl import export_session
from journal.records import encode

from .helpers import TS0, sample_session, short_session
from .stores import StoreUnderTest, eventually, open_store


def _records(journal: Journal, session_id: str, stop: int | None = None) -> list[tuple[str, dict]]:
    rows = journal.stored_events(session_id, stop=stop)
    return [(f"row {row.seq}", {**loads_strict(row.body), "hash": row.hash}) for row in rows]


def _started(agent: str = "tests:contract") -> SessionStarted:
    return SessionStarted(agent=agent, model="m")


# -- the event size limit ---------------------------------------------------------------------

_LIMIT = 4096
_WIDE = UserInput(text="é" * 3000)  # about 3,000 characters but 6,000 bytes: over by bytes
_LONG = UserInput(text="a" * 1500)  # about 1,500 bytes: four times its characters is over


def _size(event: UserInput, seq: int, session_id: str = "s") -> int:
    return len(encode(session_id, seq, TS0, event, "0" * 64, chain_hash).body.encode())


def test_an_event_over_the_size_limit_is_refused_naming_it_and_nothing_is_written(
    any_store: StoreUnderTest,
) -> None:
    assert any_store.journal.max_event_bytes == DEFAULT_MAX_EVENT_BYTES == 16 * 1024 * 1024
    with Journal.open(any_store.target, max_event_bytes=_LIMIT) as small:
        small.append("s", [_started()], ts=TS0)
        with pytest.raises(EventTooLargeError) as caught:
            small.append("s", [UserInput(text="fits"), _WIDE], expected_seq=1, ts=TS0)
        size = _size(_WIDE, 2)
        assert size > _LIMIT > len(_WIDE.text)
        error = caught.value
        assert (error.session_id, error.seq, error.size, error.limit) == ("s", 2, size, _LIMIT)
        assert str(error) == (
            f"session s seq 2: the user_input event is {size:,} bytes of canonical JSON, over "
            "the journal's limit of 4,096 (max_event_bytes); nothing was written"
        )
        assert small.last_seq("s") == 0  # neither event of the refused call
        assert small.append("s", [_LONG], expected_seq=1) == 1  # 1,5xx bytes: it fits
    with Journal.open(any_store.target, max_event_bytes=None) as unlimited:
        assert unlimited.append("s", [_WIDE]) == 2
    assert [e.event for e in any_store.journal.events("s", start=1)] == [_LONG, _WIDE]


def test_an_import_over_the_size_limit_names_its_place_and_imports_nothing(
    any_store: StoreUnderTest,
) -> None:
    with Journal.open(":memory:") as source:
        source.append("fine", [_started(), UserInput(text="fits")], ts=TS0)
        source.append("wide", [_started(), UserInput(text="fits"), _WIDE], ts=TS0)
        fine, wide = _records(source, "fine"), _records(source, "wide")
    with Journal.open(any_store.target, max_event_bytes=_LIMIT) as small:
        message = (
            f"row 2: session wide seq 2: the user_input event is {_size(_WIDE, 2, 'wide'):,} "
            "bytes of canonical JSON, over the journal's limit of 4,096"
        )
        with pytest.raises(EventTooLargeError, match=f"^{re.escape(message)}"):
            small.import_records("wide", wide)
        with pytest.raises(EventTooLargeError, match=f"^{re.escape(message)}"):
            small.import_sessions([("fine", fine), ("wide", wide)])  # all or nothing
        assert small.summary("wide") is None and small.summary("fine") is None
        assert small.import_records("fine", fine) == 2


# -- appending ------------------------------------------------------------------------------


def test_append_assigns_dense_seqs_and_returns_the_last(any_journal: Journal) -> None:
    assert any_journal.append("s1", [_started(), UserInput(text="a")], ts=TS0) == 1
    assert any_journal.append("s1", [UserInput(text="b")], expected_seq=2) == 2
    assert any_journal.append("s1", [UserInput(text="c"), UserInput(text="d")]) == 4
    events = list(any_journal.events("s1"))
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert [e.event.text for e in events[1:]] == ["a", "b", "c", "d"]
    assert events[0].ts == events[1].ts == TS0
    assert any_journal.last_seq("s1") == 4
    assert any_journal.last_seq("nope") is None


def test_expected_seq_conflict_writes_nothing(any_journal: Journal) -> None:
    any_journal.append("s1", [_started(), UserInput(text="a")])
    head = any_journal.head_position()
    for wrong in (0, 1, 3):
        with pytest.raises(ConflictError, match="another writer"):
            any_journal.append("s1", [UserInput(text="late")], expected_seq=wrong)
    with pytest.raises(ConflictError):
        any_journal.append("s1", [_started()], expected_seq=0)
    assert any_journal.last_seq("s1") == 1
    assert any_journal.head_position() == head
    assert any_journal.verify().ok


def test_session_started_only_at_seq_zero(any_journal: Journal) -> None:
    with pytest.raises(InvalidEventError, match="must begin with session_started"):
        any_journal.append("s1", [UserInput(text="a")])
    any_journal.append("s1", [_started()])
    with pytest.raises(InvalidEventError, match="only allowed at seq 0"):
        any_journal.append("s1", [UserInput(text="a"), _started()])
    assert any_journal.last_seq("s1") == 0
    with pytest.raises(InvalidEventError, match="session id"):
        any_journal.append("bad id!", [_started()])


def test_events_stream_in_pages(any_journal: Journal) -> None:
    any_journal.PAGE_SIZE = 7
    any_journal.append("s1", [_started(), *(UserInput(text=str(n)) for n in range(39))])
    assert [e.seq for e in any_journal.events("s1")] == list(range(40))
    assert [e.seq for e in any_journal.events("s1", start=13, stop=29)] == list(range(13, 29))
    assert [r.seq for r in any_journal.stored_events("s1", start=35)] == list(range(35, 40))
    assert list(any_journal.events("other")) == []


def test_state_is_the_fold_of_the_events(any_journal: Journal) -> None:
    any_journal.append("s1", sample_session())
    state = any_journal.state("s1")
    assert state == fold(any_journal.events("s1"))
    assert state.status == "failed"
    with pytest.raises(SessionNotFoundError):
        any_journal.state("nope")


def test_sessions_lists_filters_and_summarises(any_journal: Journal) -> None:
    any_journal.append("a", sample_session(), ts="2026-01-01T00:00:00.000000Z")
    any_journal.append("b", short_session(), ts="2026-01-02T00:00:00.000000Z")
    any_journal.append("c", [_started("x:y")], ts="2026-01-03T00:00:00.000000Z")
    any_journal.append(
        "d", [_started("x:y"), AgentHalted(rule="step_limit", reason="too many")], ts=TS0
    )
    assert [s.session_id for s in any_journal.sessions()] == ["d", "c", "b", "a"]
    assert [s.session_id for s in any_journal.sessions(status="failed")] == ["a"]
    assert [s.session_id for s in any_journal.sessions(status="halted")] == ["d"]
    assert [s.session_id for s in any_journal.sessions(agent="x:y")] == ["d", "c"]
    assert [
        s.session_id
        for s in any_journal.sessions(
            since="2026-01-02T00:00:00.000000Z", until="2026-01-03T00:00:00.000000Z"
        )
    ] == ["b"]
    assert [s.session_id for s in any_journal.sessions(limit=2)] == ["d", "c"]
    a = any_journal.require("a")
    state = any_journal.state("a")
    assert (a.agent, a.status, a.events, a.last_seq) == (
        "tests.agents:build",
        "failed",
        len(sample_session()),
        len(sample_session()) - 1,
    )
    assert (a.steps, a.failures, a.tokens_in, a.cost) == (
        state.steps,
        state.failures,
        state.tokens_in,
        state.cost,
    )
    assert a.head_hash == list(any_journal.events("a"))[-1].hash
    assert a.started == "2026-01-01T00:00:00.000000Z"
    assert any_journal.summary("nope") is None
    with pytest.raises(SessionNotFoundError):
        any_journal.require("nope")


def test_last_summaries_are_each_sessions_last_event_in_one_line(any_journal: Journal) -> None:
    any_journal.append("a", sample_session())
    any_journal.append("b", [_started(), AgentHalted(rule="step_limit", reason="too many")])
    any_journal.append("c", [_started(), UserInput(text="hi")])
    for index in range(600):  # more than one IN (...) list
        any_journal.append(f"many-{index}", [_started(), UserInput(text=f"n{index}")])
    ids = [s.session_id for s in any_journal.sessions()]
    found = any_journal.last_summaries([*ids, "nope", "a"])
    expected = {}
    for session_id in ids:
        last = list(any_journal.stored_events(session_id))[-1]
        expected[session_id] = (last.type, last.summary)
    assert found == expected
    assert (found["b"], found["c"], found["many-599"]) == (
        ("agent_halted", "step_limit: too many"),
        ("user_input", "hi"),
        ("user_input", "n599"),
    )
    assert any_journal.last_summaries([]) == {}


# -- global positions and tailing ------------------------------------------------------------


def test_positions_grow_across_sessions(any_journal: Journal) -> None:
    assert any_journal.head_position() == 0
    assert any_journal.read_after(0) == []
    any_journal.append("a", [_started(), UserInput(text="1")])
    any_journal.append("b", [_started()])
    any_journal.append("a", [UserInput(text="2")])
    order = [("a", 0), ("a", 1), ("b", 0), ("a", 2)]
    eventually(lambda: [(r.session_id, r.seq) for r in any_journal.read_after(0)] == order)
    rows = any_journal.read_after(0)
    positions = [r.position for r in rows]
    assert positions == sorted(positions) and len(set(positions)) == 4
    assert any_journal.head_position() == positions[-1]
    assert any_journal.read_after(positions[1], limit=1) == [rows[2]]
    assert any_journal.read_after(positions[-1]) == []


def test_wait_for_events_and_follow(any_journal: Journal) -> None:
    any_journal.append("a", [_started()])
    head = any_journal.head_position()
    assert any_journal.wait_for_events(head - 1, timeout=5) is True
    began = time.monotonic()
    assert any_journal.wait_for_events(head, timeout=0.3) is False
    assert 0.25 <= time.monotonic() - began < 3

    def append_later(*texts: str) -> threading.Timer:
        batch = [UserInput(text=text) for text in texts]
        timer = threading.Timer(0.3, lambda: any_journal.append("a", batch))
        timer.start()
        return timer

    timer = append_later("1", "2", "3")
    began = time.monotonic()
    assert any_journal.wait_for_events(head, timeout=10) is True
    assert time.monotonic() - began < 5
    timer.join()
    timer = append_later("late")
    seen = []
    for row in any_journal.follow(0, idle_timeout=10):  # the last one arrives while following
        seen.append(row.seq)
        if len(seen) == 5:
            break
    timer.join()
    assert seen == [0, 1, 2, 3, 4]
    assert list(any_journal.follow(any_journal.head_position(), idle_timeout=0.1)) == []


# -- importing ------------------------------------------------------------------------------


def test_import_is_a_noop_an_extension_or_a_conflict(any_journal: Journal, tmp_path: Path) -> None:
    with Journal.open(tmp_path / "source.db") as source:
        source.append("s1", sample_session(), ts=TS0)
        source.append("s2", short_session(), ts=TS0)
        full, prefix = _records(source, "s1"), _records(source, "s1", stop=5)
        theirs = _records(source, "s2")
        lines = [row.line() for row in source.stored_events("s1")]
    assert any_journal.import_records("s1", prefix) == 5
    assert any_journal.import_records("s1", prefix) == 0
    assert any_journal.import_records("s1", full) == len(full) - 5
    assert any_journal.import_records("s1", full) == 0
    assert any_journal.import_records("s1", prefix) == 0  # an older, shorter copy
    assert [row.line() for row in any_journal.stored_events("s1")] == lines
    any_journal.append("s2", [_started(), UserInput(text="other")], ts=TS0)
    head = any_journal.head_position()
    with pytest.raises(SessionConflictError, match="different content"):
        any_journal.import_records("s2", theirs)
    assert any_journal.head_position() == head and any_journal.last_seq("s2") == 1
    assert any_journal.verify().ok


def test_import_rejects_a_broken_chain(any_journal: Journal, tmp_path: Path) -> None:
    with Journal.open(tmp_path / "source.db") as source:
        source.append("s1", short_session(), ts=TS0)
        records = _records(source, "s1")
    records[2][1]["hash"] = "0" * 64
    with pytest.raises(InvalidEventError, match="does not match the chain"):
        any_journal.import_records("s1", records)
    assert any_journal.summary("s1") is None and any_journal.head_position() == 0


# -- verify ---------------------------------------------------------------------------------


def _problems(journal: Journal) -> list[tuple[str | None, int | None, str]]:
    return [(p.session_id, p.seq, p.kind) for p in journal.verify().problems]


def test_verify_is_clean_on_an_intact_journal(any_journal: Journal) -> None:
    any_journal.append("s1", sample_session())
    any_journal.append("s2", short_session())
    report = any_journal.verify()
    assert report.ok and report.problems == []
    assert (report.sessions, report.events) == (2, len(sample_session()) + len(short_session()))
    assert any_journal.verify(["s2"]).events == len(short_session())
    with pytest.raises(SessionNotFoundError):
        any_journal.verify(["nope"])


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            "UPDATE events SET body = replace(body, 'refund order 7', 'refund order 8') "
            "WHERE session_id = 's1' AND seq = 1",
            ("s1", 1, "altered"),
        ),
        ("DELETE FROM events WHERE session_id = 's1' AND seq = 3", ("s1", 3, "removed")),
        (
            "UPDATE events SET body = (SELECT body FROM events WHERE session_id = 's1' AND seq = 2)"
            " WHERE session_id = 's1' AND seq = 4",
            ("s1", 4, "reordered"),
        ),
        ("DELETE FROM events WHERE session_id = 's1' AND seq = 13", ("s1", 13, "truncated")),
        ("DELETE FROM sessions WHERE session_id = 's1'", ("s1", None, "projection")),
    ],
    ids=["altered", "removed", "reordered", "truncated", "projection"],
)
def test_verify_finds_tampering(
    any_store: StoreUnderTest, statement: str, expected: tuple[str, int | None, str]
) -> None:
    any_store.journal.append("s1", sample_session())
    any_store.journal.append("s2", short_session())
    any_store.tamper(statement)
    assert _problems(any_store.journal) == [expected]


def test_verify_finds_missing_and_replaced_triggers(any_store: StoreUnderTest) -> None:
    any_store.journal.append("s1", short_session())
    any_store.drop_trigger("events_no_delete")
    any_store.replace_trigger("events_no_update")
    problems = any_store.journal.verify().problems
    assert [(p.kind, p.message.split(":")[0]) for p in problems] == [
        ("missing_trigger", "trigger events_no_update was replaced"),
        ("missing_trigger", "trigger events_no_delete is missing"),
    ]


# -- append-only against foreign connections --------------------------------------------------


def test_foreign_connections_cannot_rewrite_events(any_store: StoreUnderTest) -> None:
    any_store.journal.append("s1", short_session())
    before = [r.line() for r in any_store.journal.stored_events("s1")]
    row = next(any_store.journal.stored_events("s1", start=1))
    overwrite = (
        "INSERT OR REPLACE INTO events(session_id, seq, ts, type, v, body, hash, summary) "
        "VALUES ('s1', 1, 'x', 'user_input', 1, '{}', 'h', 's')"
        if any_store.kind == "sqlite"
        else "INSERT INTO events(pos, session_id, seq, ts, type, v, body, hash, summary) "
        "VALUES (999, 's1', 1, 'x', 'user_input', 1, '{}', 'h', 's') "
        "ON CONFLICT (session_id, seq) DO UPDATE SET body = excluded.body"
    )
    attacks = [
        "UPDATE events SET body = '{}' WHERE session_id = 's1' AND seq = 1",
        "DELETE FROM events WHERE session_id = 's1'",
        overwrite,
        "INSERT INTO erase_authorised(session_id) VALUES ('s1')",
    ]
    if any_store.kind == "postgres":
        attacks.append("TRUNCATE events")
    with any_store.raw() as raw:
        for attack in attacks:
            with pytest.raises(Exception, match="append-only|audit record") as caught:
                raw.run(attack)
            assert "agent-journal" in str(caught.value), attack
    assert [r.line() for r in any_store.journal.stored_events("s1")] == before
    assert row.hash == next(any_store.journal.stored_events("s1", start=1)).hash
    assert any_store.journal.verify().ok


# -- erase ----------------------------------------------------------------------------------


def test_erase_removes_a_session_and_keeps_an_audit_record(any_store: StoreUnderTest) -> None:
    journal = any_store.journal
    journal.append("s1", sample_session())
    journal.append("s2", short_session())
    head = journal.require("s1").head_hash
    erasure = journal.erase("s1", reason="user asked (GDPR art. 17)", erased_by="dpo")
    assert (erasure.session_id, erasure.events, erasure.head_hash, erasure.erased_by) == (
        "s1",
        len(sample_session()),
        head,
        "dpo",
    )
    assert journal.erasures() == [erasure] == journal.erasures("s1")
    assert journal.summary("s1") is None and list(journal.events("s1")) == []
    eventually(
        lambda: [r.session_id for r in journal.read_after(0)] == ["s2"] * len(short_session())
    )
    report = journal.verify()
    assert report.ok and report.sessions == 1
    assert journal.verify(["s1"]).ok
    with pytest.raises(SessionNotFoundError):
        journal.erase("s1", reason="again")
    with pytest.raises(InvalidInputError, match="needs a reason"):
        journal.erase("s2", reason="  ")
    journal.append("s1", [_started()])  # the id may be used again: a new session
    assert journal.verify().ok
    with any_store.raw() as raw:
        for attack in ("UPDATE erasures SET reason = 'x'", "DELETE FROM erasures"):
            with pytest.raises(Exception, match="erasures are append-only"):
                raw.run(attack)
        with pytest.raises(Exception, match="append-only"):
            raw.run("DELETE FROM events WHERE session_id = 's2'")
    assert journal.erasures() == [erasure]


def test_verify_reports_a_left_over_erase_authorisation(any_store: StoreUnderTest) -> None:
    any_store.journal.append("s1", short_session())
    any_store.tamper("INSERT INTO erase_authorised(session_id) VALUES ('s1')")
    assert _problems(any_store.journal) == [("s1", None, "missing_trigger")]


# -- schema ---------------------------------------------------------------------------------


def test_reopening_reports_an_up_to_date_schema(any_store: StoreUnderTest) -> None:
    assert any_store.journal.schema_setup.action == "created"
    any_store.journal.append("s1", [_started()])
    with Journal.open(any_store.target, create=False) as again:
        assert again.schema_setup.action == "current"
        assert again.schema_setup.version == any_store.journal.schema_setup.version
        assert again.last_seq("s1") == 0


def test_hmac_chain_needs_its_key(any_store: StoreUnderTest, tmp_path: Path) -> None:
    (tmp_path / "keyed").mkdir()
    with open_store(any_store.kind, tmp_path / "keyed", hmac_key=b"k") as keyed:
        keyed.journal.append("s1", short_session(), ts=TS0)
        assert keyed.journal.verify().ok
        plain = any_store.journal
        plain.append("s1", short_session(), ts=TS0)
        assert keyed.journal.require("s1").head_hash != plain.require("s1").head_hash
        with pytest.raises(Exception, match="open it with an HMAC key"):
            Journal.open(keyed.target)


# -- export is byte-identical from either store -----------------------------------------------


def test_export_is_byte_identical_from_sqlite_and_postgres(tmp_path: Path) -> None:
    exports = []
    for kind in ("sqlite", "postgres"):
        (tmp_path / kind).mkdir()
        with open_store(kind, tmp_path / kind) as store:
            store.journal.append("s1", sample_session()[:12], ts=TS0)
            store.journal.append(
                "s1",
                [UserInput(text="ünïcode ✓ \u2028"), AgentCompleted(answer="1e-7 0.1")],
                ts="2026-11-29T23:00:01.000001Z",
            )
            exports.append(export_session(store.journal, "s1"))
    assert exports[0] == exports[1]
    assert b'"cost":0.25' in exports[0]
