"""SVG snapshots of each screen, drawn from the checked-in journal (fixed timestamps).

Update after a deliberate change of the look with ``pytest tests/test_tui_snapshots.py
--snapshot-update`` and check the SVGs in ``tests/__snapshots__``. Nothing on these screens
depends on the clock, and the prompt's cursor does not blink.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from journal import Journal

from .tui_helpers import SIZE, open_app, settle, small_journal

Compare = Callable[..., bool]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


def steps(*keys: str | tuple[str, str]) -> Callable[[Pilot[Any]], Any]:
    """Press keys (a (key, text) pair opens a prompt and types text) settling after each."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        for key in keys:
            if isinstance(key, tuple):
                await pilot.press(key[0])
                await pilot.pause()
                prompt = pilot.app.screen.query_one(Input)
                prompt.cursor_blink = False
                prompt.value = key[1]
            else:
                await pilot.press(key)
            await settle(pilot)

    return run_before


def snap(
    snap_compare: Compare,
    db: Path,
    keys: Sequence[str | tuple[str, str]],
    size: tuple[int, int] = SIZE,
    **app: Any,
) -> bool:
    result: bool = snap_compare(open_app(db, **app), run_before=steps(*keys), terminal_size=size)
    return result


class TestSessions:
    def test_the_list(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, ["j", "j"])

    def test_filtered_to_halted_sessions(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, [("f", "halted"), "enter"])

    @pytest.mark.parametrize("width", [80, 160])
    def test_the_list_at_a_width(self, snap_compare: Compare, db: Path, width: int) -> None:
        assert snap(snap_compare, db, [], size=(width, 20))

    @pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
    def test_the_list_keeps_the_outcome(
        self, snap_compare: Compare, db: Path, size: tuple[int, int]
    ) -> None:
        assert snap(snap_compare, db, [], size=size)

    def test_an_empty_journal(
        self, snap_compare: Compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)  # the hint names the journal as given: the same each run
        Journal.open("empty.db").close()
        assert snap(snap_compare, Path("empty.db"), [], size=(100, 12))


class TestSession:
    def test_the_first_event(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, [], session="demo-incidents-s0")

    def test_a_failure_with_its_state_change(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, ["e", "e"], session="demo-incidents-s0")

    @pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
    def test_a_failure_and_its_state_at_a_size(
        self, snap_compare: Compare, db: Path, size: tuple[int, int]
    ) -> None:
        assert snap(snap_compare, db, ["e", "e"], size=size, session="demo-incidents-s0")

    @pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
    def test_a_cost_in_the_state_pane(
        self, snap_compare: Compare, db: Path, size: tuple[int, int]
    ) -> None:
        assert snap(
            snap_compare, db, [("colon", "4"), "enter"], size=size, session="demo-crawler-s0"
        )

    def test_filtered_to_failures(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, [("f", "failures"), "enter"], session="demo-crawler-s0")

    def test_the_search_prompt(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, [("slash", "INC-7")], session="demo-incidents-s0")

    def test_markup_in_payloads_is_shown_literally(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, ["j", "j", "j"], session="hostile-markup")

    def test_the_help(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, ["question_mark"], session="demo-incidents-s0")

    def test_a_long_value_folds_under_its_key(self, snap_compare: Compare, db: Path) -> None:
        assert snap(snap_compare, db, ["j", "j", "j"], session="demo-refund-buggy-s0")


class TestDiff:
    def test_a_replay_with_the_fixed_guard(self, snap_compare: Compare, db: Path) -> None:
        diff = ("demo-refund-buggy-s0", "demo-refund-buggy-s0.replay-1")
        assert snap(snap_compare, db, ["right_square_bracket"], diff=diff)

    def test_the_replay_picker(self, snap_compare: Compare, db: Path) -> None:
        from replay import Replayer

        with Journal.open(db) as journal:  # a second replay: d asks which
            Replayer(save=True).replay(journal, "demo-refund-buggy-s0")
        assert snap(snap_compare, db, ["d"], session="demo-refund-buggy-s0")
