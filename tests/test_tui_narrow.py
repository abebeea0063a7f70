"""The terminal UI at 80 columns: the outcome stays, summaries say something, JSON folds
between words, and the state pane shows numbers as a person reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import Static

from journal import Journal, SessionStarted, UserInput
from tui.widgets.panes import Pane, fold_points, hang

from .tui_helpers import drive, open_app, screen_text, small_journal, type_in

NARROW = (80, 24)
INCIDENTS = "demo-incidents-s0"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


def pane_lines(pilot: Pilot[Any], name: str) -> list[str]:
    region = pilot.app.screen.query_one(f"#{name}", Pane).content_region
    lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
    return [line[region.x : region.right] for line in lines[region.y : region.bottom]]


def test_at_80_columns_the_list_keeps_the_outcome_and_lets_the_time_go(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        assert lines[1].split() == ["session", "status", "fail", "ok%", "cost", "outcome"]
        crash = next(line for line in lines if line.startswith("demo-discount-crash-s0"))
        assert "error: the guard" in crash  # why it failed, at 80 columns

    drive(open_app(db), scenario, size=NARROW)


def test_at_80_columns_the_timeline_gives_its_summaries_the_room_of_the_time(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        failed = next(line for line in lines if " 3 action_failed" in line)
        summary = failed.split("action_failed", 1)[1].split("│", 1)[0].strip()
        assert summary.startswith("infrastructure search_")  # not "infrastru…"
        assert cell_len(summary) >= 20
        assert "09:02:00" not in failed  # the event pane has the time

    drive(open_app(db, session=INCIDENTS), scenario, size=NARROW)


def test_at_120_columns_the_timeline_still_shows_the_time(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        assert any(" 3 09:02:00.003 action_failed       infrastructure" in x for x in lines)

    drive(open_app(db, session=INCIDENTS), scenario, size=(120, 40))


@pytest.mark.parametrize("size", [NARROW, (120, 40), (200, 50)])
def test_json_in_the_panes_folds_between_words(tmp_path: Path, size: tuple[int, int]) -> None:
    db = tmp_path / "words.db"
    words = [f"balance{i}" for i in range(40)]
    with Journal.open(db) as journal:
        journal.append("s", [SessionStarted(agent="x:y"), UserInput(text=" ".join(words))])

    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "colon", "1")
        pane = pilot.app.screen.query_one("#detail", Pane)
        lines = str(pane.query_one(Static).content).split("\n")  # as folded, all of it
        width = pane.scrollable_content_region.width
        assert max(cell_len(line) for line in lines) <= width
        start = next(i for i, line in enumerate(lines) if '"text"' in line)
        text = lines[
            start : start
            + 1
            + next(i for i, line in enumerate(lines[start + 1 :]) if not line.startswith("    "))
        ]
        assert len(text) > 1 or width > 400  # folded
        shown = [word.strip('",') for line in text for word in line.split()][1:]
        assert shown == words  # every word whole, on one line

    drive(open_app(db, session="s"), scenario, size=size)


def test_the_state_pane_shows_a_sum_of_costs_without_float_noise(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "colon", "4")
        state = " ".join(pane_lines(pilot, "state"))
        assert "cost: 0.0000535 → 0.0001465" in state  # not 0.00014649999999999998
        assert "99999" not in state

    drive(open_app(db, session="demo-crawler-s0"), scenario, size=(120, 40))


words = st.text(alphabet="ab 日", max_size=60)


@given(text=words, width=st.integers(4, 30), lead=st.integers(0, 6))
def test_a_fold_keeps_the_text_whole_and_cuts_a_word_only_when_no_line_holds_it(
    text: str, width: int, lead: int
) -> None:
    line = " " * lead + text
    folded = hang(Content(line), width).plain.split("\n")
    lead = len(line) - len(line.lstrip(" "))
    indent = min(lead + 2, width // 2)
    pieces = [folded[0]] + [piece[indent:] for piece in folded[1:]]
    assert "".join(pieces) == line  # exactly the text, spaces included
    assert all(cell_len(piece) <= width for piece in folded)
    for cut in fold_points(line, width, indent):
        word = line[:cut].split(" ")[-1] + line[cut:].split(" ")[0]
        if line[cut - 1] != " " and line[cut] != " ":
            # inside a word: only one no line could hold, or the first, with nowhere before it
            assert cell_len(word) > width - indent or " " not in line[lead:cut], (cut, folded)


def test_the_session_status_line_counts_the_failures_as_the_list_does(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        status = screen_text(pilot.app).splitlines()[0]  # type: ignore[arg-type]
        assert "fail 1" in status and "failures" not in status  # the crash counts: 0 + 1

    drive(open_app(db, session="demo-discount-crash-s0"), scenario, size=NARROW)
