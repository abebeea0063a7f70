"""Streaming import and copy: rows equal to an append's, all or nothing, idempotent, flat memory.

Sessions here are longer than `IMPORT_BATCH`, so every import writes several batches inside
its one transaction before it can fail or finish.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal import (
    ActionCommitted,
    ActionProposed,
    AgentCompleted,
    InvalidEventError,
    InvalidInputError,
    Journal,
    SessionConflictError,
    SessionStarted,
    ToolCall,
    UserInput,
    import_file,
    write_jsonl,
)
from journal._planner import IMPORT_BATCH
from journal.events import AgentEvent
from journal.formats import copy_session
from journal.records import StoredEvent

TS = "2026-11-29T23:00:00.123456Z"
SESSION = "long"


def long_session(count: int) -> Iterator[AgentEvent]:
    """``count`` events: a start, then answered turns with one committed tool call each."""
    yield SessionStarted(agent="tests.agents:long", model="model-1")
    made, turn = 1, 0
    while True:
        call = ToolCall(call_id=f"c{turn}", tool="lookup", args={"turn": turn})
        for event in (
            UserInput(text=f"question {turn}"),
            ActionProposed(calls=[call], text="looking it up"),
            ActionCommitted(call_id=call.call_id, tool="lookup", args=call.args, result=turn),
            AgentCompleted(answer=f"answer {turn}"),
        ):
            if made == count:
                return
            yield event
            made += 1
        turn += 1


def appended(path: Path, count: int) -> Journal:
    """A SQLite journal at ``path`` holding ``long_session(count)``, appended in chunks."""
    journal = Journal.open(path)
    events = list(long_session(count))
    for start in range(0, count, 500):
        journal.append(SESSION, events[start : start + 500], ts=TS)
    return journal


def exported(tmp_path: Path, count: int, name: str = "long.jsonl") -> Path:
    """A JSONL export of ``long_session(count)``."""
    target = tmp_path / name
    with appended(tmp_path / f"{name}.db", count) as journal:
        write_jsonl(journal, SESSION, target)
    return target


def rows(journal: Journal) -> list[StoredEvent]:
    """The session's stored rows without their global positions (store-specific)."""
    return [row._replace(position=None) for row in journal.stored_events(SESSION)]


COUNT = 2 * IMPORT_BATCH + 345


def test_a_streamed_import_stores_the_rows_an_append_stores(
    any_journal: Journal, tmp_path: Path
) -> None:
    with appended(tmp_path / "appended.db", COUNT) as source:
        write_jsonl(source, SESSION, tmp_path / "long.jsonl")
        result = import_file(any_journal, tmp_path / "long.jsonl", whole=True)
        assert result.new_events == COUNT
        assert rows(any_journal) == rows(source)
        assert any_journal.summary(SESSION) == source.summary(SESSION)
        assert any_journal.state(SESSION) == source.state(SESSION)
    assert any_journal.verify().ok


def test_a_streamed_copy_stores_the_rows_of_its_source(
    any_journal: Journal, tmp_path: Path
) -> None:
    with appended(tmp_path / "appended.db", COUNT) as source:
        assert copy_session(source, any_journal, SESSION) == COUNT
        assert rows(any_journal) == rows(source)
        assert any_journal.summary(SESSION) == source.summary(SESSION)
    assert any_journal.verify().ok


def test_a_bad_line_after_several_batches_writes_nothing(
    any_journal: Journal, tmp_path: Path
) -> None:
    source = exported(tmp_path, COUNT)
    lines = source.read_bytes().split(b"\n")
    bad_line = 2 * IMPORT_BATCH + 100  # 1-based: the header is line 1
    lines[bad_line - 1] = lines[bad_line - 1].replace(b'"seq":', b'"seq":1', 1)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"\n".join(lines))
    with pytest.raises(InvalidInputError, match=f"^{broken}:{bad_line}: "):
        import_file(any_journal, broken)
    assert any_journal.summary(SESSION) is None
    assert rows(any_journal) == []
    assert any_journal.read_after(0) == []


def test_a_cut_file_is_refused_whole_after_its_batches_are_written(
    any_journal: Journal, tmp_path: Path
) -> None:
    source = exported(tmp_path, COUNT)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"\n".join(source.read_bytes().split(b"\n")[: COUNT - 1]) + b"\n")
    with pytest.raises(InvalidInputError, match="the file was cut short or edited"):
        import_file(any_journal, cut, whole=True)
    assert any_journal.summary(SESSION) is None
    assert any_journal.read_after(0) == []


def test_import_is_idempotent_appends_a_longer_recording_and_refuses_other_content(
    any_journal: Journal, tmp_path: Path
) -> None:
    whole = exported(tmp_path, COUNT)
    prefix = exported(tmp_path, IMPORT_BATCH + 10, "prefix.jsonl")
    assert import_file(any_journal, prefix).new_events == IMPORT_BATCH + 10
    assert import_file(any_journal, prefix).new_events == 0
    assert import_file(any_journal, whole).new_events == COUNT - IMPORT_BATCH - 10
    assert import_file(any_journal, whole).new_events == 0
    assert import_file(any_journal, prefix).new_events == 0  # a prefix of what is stored
    with Journal.open(tmp_path / "whole.db") as reference:
        import_file(reference, whole)
        assert rows(any_journal) == rows(reference)
        assert any_journal.summary(SESSION) == reference.summary(SESSION)
        assert any_journal.state(SESSION) == reference.state(SESSION)
    other = tmp_path / "other.jsonl"
    with appended(tmp_path / "other.db", COUNT) as journal:
        journal.append(SESSION, [UserInput(text="one more")], ts=TS)
        write_jsonl(journal, SESSION, other)
    lines = other.read_bytes().split(b"\n")
    # Same seqs as the stored session up to its head, then a different event there.
    edited = tmp_path / "edited.jsonl"
    with appended(tmp_path / "edited.db", COUNT - 1) as journal:
        journal.append(SESSION, [UserInput(text="not the stored event")], ts=TS)
        write_jsonl(journal, SESSION, edited)
    before = rows(any_journal)
    with pytest.raises(SessionConflictError, match=f"^{edited}: "):
        import_file(any_journal, edited)
    assert import_file(any_journal, other).new_events == 1  # the longer recording's tail
    assert rows(any_journal)[: len(before)] == before
    assert len(lines) == COUNT + 3  # header, events, the one more, the final newline
    assert any_journal.verify().ok


def _import_peak(tmp_path: Path, count: int) -> int:
    """tracemalloc's peak, in bytes, while one export of ``count`` events is imported."""
    source = exported(tmp_path, count, f"peak-{count}.jsonl")
    with Journal.open(tmp_path / f"peak-{count}.db") as journal:
        tracemalloc.start()
        try:
            import_file(journal, source, whole=True)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_import_memory_is_flat_in_the_session_size(tmp_path: Path) -> None:
    small, large = _import_peak(tmp_path, 2_000), _import_peak(tmp_path, 20_000)
    assert large - small < 5 * 2**20, (small, large)


def records_of(journal: Journal, session_id: str = SESSION) -> Iterator[tuple[str, dict[str, Any]]]:
    """A stored session's flat records, streamed (what a copy reads)."""
    for row in journal.stored_events(session_id):
        yield f"{session_id}:{row.seq}", row.record()


def renamed(
    records: list[tuple[str, dict[str, Any]]], session_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """``records`` as another session's (their hashes left to be computed)."""
    return [
        (at, {k: v for k, v in record.items() if k != "hash"} | {"session_id": session_id})
        for at, record in records
    ]


def two_sessions(path: Path, count: int) -> Journal:
    """A journal holding ``long_session(count)`` as SESSION and as "other"."""
    journal = appended(path, count)
    events = list(long_session(count))
    for start in range(0, count, 500):
        journal.append("other", events[start : start + 500], ts=TS)
    return journal


def test_import_sessions_streams_several_sessions_in_one_transaction(
    any_journal: Journal, tmp_path: Path
) -> None:
    with two_sessions(tmp_path / "source.db", COUNT) as source:
        sessions = [(SESSION, records_of(source)), ("other", records_of(source, "other"))]
        assert any_journal.import_sessions(sessions) == [COUNT, COUNT]
        for session_id in (SESSION, "other"):
            assert [r._replace(position=None) for r in any_journal.stored_events(session_id)] == [
                r._replace(position=None) for r in source.stored_events(session_id)
            ]
            assert any_journal.summary(session_id) == source.summary(session_id)
        again = [(SESSION, records_of(source)), ("other", records_of(source, "other"))]
        assert any_journal.import_sessions(again) == [0, 0]
    assert any_journal.verify().ok


def test_import_sessions_writes_nothing_when_a_later_session_fails_after_its_batches(
    any_journal: Journal, tmp_path: Path
) -> None:
    bad_seq = 2 * IMPORT_BATCH + 100

    def broken(records: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, Any]]:
        for at, record in records:
            yield at, (record | {"ts": "yesterday"} if record["seq"] == bad_seq else record)

    with two_sessions(tmp_path / "source.db", COUNT) as source:
        sessions = [(SESSION, records_of(source)), ("other", broken(records_of(source, "other")))]
        with pytest.raises(InvalidEventError, match=f"^other:{bad_seq}: timestamp"):
            any_journal.import_sessions(sessions)
    assert any_journal.sessions() == []
    assert any_journal.read_after(0) == []


def test_import_sessions_plans_a_session_named_twice_on_its_first_import(
    any_journal: Journal, tmp_path: Path
) -> None:
    with appended(tmp_path / "source.db", COUNT) as source:
        whole = list(records_of(source))
        cut = IMPORT_BATCH + 10
        assert any_journal.import_sessions([(SESSION, whole[:cut]), (SESSION, whole)]) == [
            cut,
            COUNT - cut,
        ]
        assert rows(any_journal) == rows(source)
        assert any_journal.summary(SESSION) == source.summary(SESSION)
    # Named after a longer recording of itself, a prefix is a no-op (its hash is found among
    # the rows the first one planned, not yet written on PostgreSQL) and a changed one a
    # conflict that writes nothing.
    again = renamed(whole, "again")
    assert any_journal.import_sessions([("again", again), ("again", again[:cut])]) == [COUNT, 0]
    third = renamed(whole, "third")
    changed = [*third[: cut - 1], (third[cut - 1][0], third[cut - 1][1] | {"ts": TS[:-2] + "9Z"})]
    with pytest.raises(SessionConflictError, match="exists already with different content"):
        any_journal.import_sessions([("third", third), ("third", changed)])
    assert any_journal.summary("third") is None
    assert any_journal.verify().ok


def _sessions_peak(tmp_path: Path, count: int) -> int:
    """tracemalloc's peak, in bytes, while two sessions of ``count`` events are imported."""
    with two_sessions(tmp_path / f"two-{count}.db", count) as source:
        with Journal.open(tmp_path / f"into-{count}.db") as journal:
            sessions = [(SESSION, records_of(source)), ("other", records_of(source, "other"))]
            tracemalloc.start()
            try:
                journal.import_sessions(sessions)
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()


def test_import_sessions_memory_is_flat_in_the_sessions_size(tmp_path: Path) -> None:
    small, large = _sessions_peak(tmp_path, 2_000), _sessions_peak(tmp_path, 12_000)
    assert large - small < 5 * 2**20, (small, large)
