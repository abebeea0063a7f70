"""The Diff screen: two runs aligned side by side, ] and [ between differences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from journal import Journal
from replay import diff_records
from tui.screens.diff import DiffScreen, DiffView, LazyRecords
from tui.screens.sessions import SessionsScreen
from tui.widgets.panes import Pane

from .tui_helpers import drive, open_app, press, screen_text, small_journal

BUGGY = "demo-refund-buggy-s0"
REPLAY = "demo-refund-buggy-s0.replay-1"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


def view(pilot: Pilot[Any]) -> DiffView:
    return pilot.app.screen.query_one(DiffView)


def test_the_diff_opens_on_the_first_difference_with_both_sides(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert isinstance(pilot.app.screen, DiffScreen)
        rows = view(pilot)
        # (the agent reference differs at seq 0: an address, not compared)
        assert (rows.line_count, rows.differences, rows.cursor) == (8, [5], 5)
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        assert lines[0].split()[:8] == ["A", BUGGY, "(8", "events)", "vs", "B", REPLAY, "(8"]
        assert "1 difference(s)" in lines[0]
        assert lines[7].startswith("~    5 action_committed    issue_refund")
        assert "│   5 verification_failed guard issue_refund" in lines[7]
        changes = pilot.app.screen.query_one(Pane).shown
        assert changes.startswith("changed: A seq 5 ↔ B seq 5\n  args (removed): ")

    drive(open_app(db, diff=(BUGGY, REPLAY)), scenario, size=(140, 30))


def test_brackets_jump_between_differences_and_stop_at_the_ends(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        seen = []
        for key in ["right_square_bracket", "left_square_bracket", "k", "left_square_bracket"]:
            await press(pilot, key)
            seen.append(view(pilot).cursor)
        await press(pilot, "right_square_bracket")
        seen.append(view(pilot).cursor)
        assert seen == [5, 5, 4, 4, 5]
        messages = [n.message for n in pilot.app._notifications]
        assert messages == [
            "no difference after this row",
            "no difference before this row",
            "no difference before this row",
        ]
        await press(pilot, "g")
        assert pilot.app.screen.query_one(Pane).shown.startswith("equal: A seq 0 ↔ B seq 0\n{")
        await press(pilot, "q")
        assert isinstance(pilot.app.screen, SessionsScreen)

    drive(open_app(db, diff=(BUGGY, REPLAY)), scenario)


GUARD = (
    "amount ($150) exceeds the order's refundable balance ($100); propose a refund of at most $100"
)


def test_a_changed_row_lists_each_field_that_differs_with_whole_values(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "right_square_bracket")
        assert pilot.app.screen.query_one(Pane).shown.splitlines()[:4] == [
            "changed: A seq 5 ↔ B seq 5",
            '  args (removed): {"amount":150.0,"order_id":"2210"} → null',
            f'  message (added): null → "{GUARD}"',
            '  result (removed): {"amount":150.0,"refund_id":"rf-2210-1"} → null',
        ]
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        assert any(f'null → "{GUARD}"' in line for line in lines)  # the key phrase shows

    drive(open_app(db, diff=(BUGGY, REPLAY)), scenario, size=(150, 40))


def test_a_value_wider_than_the_pane_folds_under_its_field_not_at_column_0(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "right_square_bracket")
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        start = next(i for i, line in enumerate(lines) if "message (added)" in line)
        first, more = lines[start], lines[start + 1]
        text = first.index("│ ") + 2  # the pane's border and padding
        assert first[text:].startswith('  message (added): null → "amount ($150)')
        assert more[text : text + 4] == "    " and more[text + 4] != " "
        folded = "".join(line[text:].rstrip(" │").strip() for line in (first, more))
        assert folded.startswith(f'message (added): null → "{GUARD[:40]}')

    drive(open_app(db, diff=(BUGGY, REPLAY)), scenario, size=(80, 40))


def test_an_event_on_one_side_only_is_shown_there_with_its_json(db: Path) -> None:
    with Journal.open(db) as journal:
        events = [item.event for item in journal.events(BUGGY) if item.seq != 3]
        journal.append("cut", events)

    async def scenario(pilot: Pilot[Any]) -> None:
        rows = view(pilot)
        assert rows.differences == [3]
        assert rows.cursor == 3
        line = screen_text(pilot.app).splitlines()[5]  # type: ignore[arg-type]
        assert line.startswith("-    3 action_committed    lookup_order -> ")
        assert line.rstrip().endswith("│")  # nothing on the right
        assert pilot.app.screen.query_one(Pane).shown.startswith("removed: A seq 3\n{")

    drive(open_app(db, diff=(BUGGY, "cut")), scenario, size=(140, 30))


def test_a_session_against_itself_is_identical(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        rows = view(pilot)
        assert (rows.line_count, rows.differences) == (16, [])
        assert "identical (volatile fields ignored)" in screen_text(pilot.app)  # type: ignore[arg-type]

    drive(open_app(db, diff=("demo-incidents-s0", "demo-incidents-s0")), scenario)


def test_lazy_records_decode_on_access_like_a_list(db: Path) -> None:
    with Journal.open(db) as journal:
        rows = list(journal.stored_events(BUGGY))
    records = LazyRecords(rows)
    assert (len(records), records[1:3]) == (8, [records[1], records[2]])
    assert diff_records(records, list(records)).identical
