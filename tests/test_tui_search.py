"""The TUI's search across sessions: F on the sessions screen, the hits, enter opens one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tui.screens.search import HitsList, SearchScreen
from tui.screens.session import SessionScreen
from tui.screens.sessions import SessionsScreen

from .tui_helpers import drive, open_app, press, screen_text, small_journal, type_in, wait_until


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


def hits(pilot: Pilot[Any]) -> HitsList:
    return pilot.app.screen.query_one(HitsList)


def test_f_searches_payloads_and_enter_opens_the_session_at_the_hit(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "F", "refused")  # in tool error messages only
        assert isinstance(pilot.app.screen, SearchScreen)
        await wait_until(pilot, lambda: pilot.app.screen.found is not None)  # type: ignore[attr-defined]
        found = hits(pilot).hits
        assert found and all("refused" in hit.snippet.lower() for hit in found)
        assert "refused" in screen_text(pilot.app)  # type: ignore[arg-type]
        target = found[0]
        assert target.seq > 0
        await press(pilot, "enter")
        screen = pilot.app.screen
        assert isinstance(screen, SessionScreen)
        assert (screen.session_id, screen.timeline.seq) == (target.session_id, target.seq)
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, SearchScreen)
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, SessionsScreen)

    drive(open_app(db), scenario)


def test_a_search_without_hits_says_so_and_f_searches_again_in_place(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "F", "?!")  # no word: said at once, no search
        assert isinstance(pilot.app.screen, SessionsScreen)
        await type_in(pilot, "F", "zyzzyva")
        await wait_until(pilot, lambda: pilot.app.screen.found is not None)  # type: ignore[attr-defined]
        assert "no event has: zyzzyva" in screen_text(pilot.app)  # type: ignore[arg-type]
        await type_in(pilot, "F", "refund")
        await wait_until(pilot, lambda: bool(pilot.app.screen.found))  # type: ignore[attr-defined]
        assert hits(pilot).hits
        await press(pilot, "escape")  # the first search was replaced, not stacked
        assert isinstance(pilot.app.screen, SessionsScreen)

    drive(open_app(db), scenario)
