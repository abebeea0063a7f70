"""`RowSource`: rows read lazily in keyset pages, an LRU of pages, scans both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from journal import Journal, SessionStarted, UserInput
from tui.source import Row, RowSource


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal.open(tmp_path / "rows.db") as journal:
        journal.append("s", [SessionStarted(agent="x:y")], ts="2026-11-29T09:00:00.000000Z")
        journal.append(
            "s", [UserInput(text=f"m{i}") for i in range(1, 1000)], ts="2026-11-29T09:00:01.000000Z"
        )
        yield journal


def test_rows_are_read_a_page_at_a_time_and_kept_in_an_lru(journal: Journal) -> None:
    source = RowSource(journal, "s", page=100, pages=2)
    assert source.last_seq == 999
    assert source.row(999) == Row(999, "2026-11-29T09:00:01.000000Z", "user_input", "m999")
    assert source.row(950) is not None and source.row(900) is not None
    assert source.queries == 1
    source.row(0)
    source.row(500)
    assert source.queries == 3
    source.row(999)  # its page was evicted by the two before
    assert source.queries == 4
    assert (source.row(-1), source.row(1000)) == (None, None)


def test_scans_walk_forwards_and_backwards_between_bounds(journal: Journal) -> None:
    source = RowSource(journal, "s", page=64)
    assert [row.seq for row in source.scan(995)] == [995, 996, 997, 998, 999]
    assert [row.seq for row in source.scan(3, backward=True)] == [3, 2, 1, 0]
    assert [row.seq for row in source.scan(10, stop=13)] == [10, 11, 12]
    assert [row.seq for row in source.scan(999, backward=True, stop=996)] == [999, 998, 997]
    assert len(list(source.scan(0))) == len(list(source.scan(999, backward=True))) == 1000
    assert list(source.scan(0, cancelled=lambda: True)) == []
    assert source.queries == 0  # scans never touch the drawing cache


def test_refresh_sees_new_events_and_rereads_the_tail_page(journal: Journal) -> None:
    source = RowSource(journal, "s", page=128)
    assert source.row(1000) is None
    source.row(999)
    assert not source.refresh()
    journal.append("s", [UserInput(text="late")])
    assert source.refresh()
    assert (source.last_seq, source.row(1000)) == (
        1000,
        Row(1000, source.row(1000).ts, "user_input", "late"),  # type: ignore[union-attr]
    )
    stored = source.stored(1000)
    assert stored is not None and '"text":"late"' in stored.body
