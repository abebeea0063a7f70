"""The Session screen: every key, the three panes, and untrusted text shown literally."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from journal import Journal, UserInput
from tui.screens.dialogs import ChoiceScreen
from tui.screens.diff import DiffScreen
from tui.screens.session import SessionScreen, parse_types
from tui.screens.sessions import SessionsScreen
from tui.widgets.panes import Pane
from tui.widgets.timeline import TimelineView

from .tui_helpers import HOSTILE, drive, open_app, press, screen_text, small_journal, type_in

INCIDENTS = "demo-incidents-s0"  # 16 events; failures at 3, 5, 8, 9, 11


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


@pytest.fixture
def long_db(tmp_path: Path) -> Path:
    """A journal with one 1,000-event session (``long``)."""
    from journal import SessionStarted

    path = tmp_path / "long.db"
    with Journal.open(path) as journal:
        journal.append("long", [SessionStarted(agent="x:y")])
        journal.append("long", [UserInput(text=f"message {i}") for i in range(1, 1000)])
    return path


def timeline(pilot: Pilot[Any]) -> TimelineView:
    return pilot.app.screen.query_one(TimelineView)


def pane(pilot: Pilot[Any], name: str) -> str:
    return pilot.app.screen.query_one(f"#{name}", Pane).shown


def test_the_session_opens_on_its_first_event_with_detail_and_state(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert isinstance(pilot.app.screen, SessionScreen)
        assert (timeline(pilot).line_count, timeline(pilot).seq) == (16, 0)
        assert '"type": "session_started"' in pane(pilot, "detail")
        assert "changed by seq 0:" in pane(pilot, "state")
        assert re.search(r'^  session_id +"demo-incidents-s0"$', pane(pilot, "state"), re.M)

    drive(open_app(db, session=INCIDENTS), scenario)


def test_vim_keys_move_the_cursor_and_the_panes_follow(long_db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        view = timeline(pilot)
        seen = []
        for keys in (
            ["j", "j", "down"],
            ["k", "up"],
            ["G"],
            ["g"],
            ["end"],
            ["home"],
            ["ctrl+d"],
            ["ctrl+d", "ctrl+u"],
            ["pagedown"],
            ["pageup"],
        ):
            await press(pilot, *keys)
            seen.append(view.seq)
        half, page = view.page_height // 2, view.page_height
        assert seen == [3, 1, 999, 0, 999, 0, half, half, half + page, half]
        assert '"text": "message 0"' not in pane(pilot, "detail")
        assert f'"seq": {half}' in pane(pilot, "detail")
        assert f"state after seq {half}" in screen_text(pilot.app)  # type: ignore[arg-type]

    drive(open_app(long_db, session="long"), scenario)


def test_the_timeline_marks_failures_halts_and_repairs_in_the_gutter(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        marked = {line[:1]: line[2:].split()[2] for line in lines[1:17] if line[:1] != " "}
        assert marked == {
            "✗": "verification_failed",
            "!": "circuit_opened",
            "≡": "context_compacted",
            "↪": "fallback_invoked",
            "✓": "agent_completed",
        }

    drive(open_app(db, session=INCIDENTS), scenario, size=(140, 32))


def test_e_and_shift_e_walk_the_failures(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        seqs = []
        for key in ["e", "e", "e", "e", "e", "e", "E", "E"]:
            await press(pilot, key)
            seqs.append(timeline(pilot).seq)
        assert seqs == [3, 5, 8, 9, 11, 11, 9, 8]

    drive(open_app(db, session=INCIDENTS), scenario)


def test_slash_searches_type_summary_and_payload_and_n_wraps(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "slash", "INC-7")  # only in results and the answer
        first = timeline(pilot).seq
        await press(pilot, "n")
        second = timeline(pilot).seq
        await press(pilot, "n", "n", "n")
        wrapped = timeline(pilot).seq
        await press(pilot, "N")
        back = timeline(pilot).seq
        assert (first, second, wrapped, back) == (13, 14, 14, 13)
        assert "/INC-7" in screen_text(pilot.app)  # type: ignore[arg-type]
        await type_in(pilot, "slash", "no such text anywhere")
        assert timeline(pilot).seq == 13

    drive(open_app(db, session=INCIDENTS), scenario)


def test_f_filters_by_type_and_an_empty_answer_shows_everything(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "j", "j", "j", "j", "j", "j")  # seq 6
        await type_in(pilot, "f", "action_failed,circuit_opened")
        view = timeline(pilot)
        assert (list(view.filter or ()), view.seq) == ([3, 5, 8, 9], 8)
        await press(pilot, "G")
        assert view.seq == 9
        assert "filter: action_failed,circuit_opened (4 shown)" in screen_text(pilot.app)  # type: ignore[arg-type]
        await type_in(pilot, "f", "")
        assert (view.filter, view.line_count, view.seq) == (None, 16, 9)

    drive(open_app(db, session=INCIDENTS), scenario)


def test_a_filter_naming_an_unknown_type_changes_nothing() -> None:
    assert parse_types("failures user_input") == frozenset(
        {"verification_failed", "action_failed", "agent_halted", "circuit_opened", "user_input"}
    )
    with pytest.raises(ValueError, match="unknown event type 'nope'"):
        parse_types("user_input,nope")


def test_search_and_failures_respect_the_type_filter(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "f", "action_proposed")
        await type_in(pilot, "slash", "search_incidents")
        assert timeline(pilot).seq == 4  # the filter put the cursor on seq 2 already
        await press(pilot, "e")
        assert timeline(pilot).seq == 4  # failures are hidden by the filter

    drive(open_app(db, session=INCIDENTS), scenario)


def test_colon_goes_to_a_seq(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "colon", "12")
        assert timeline(pilot).seq == 12
        assert "event 12 · fallback_invoked" in screen_text(pilot.app)  # type: ignore[arg-type]
        await type_in(pilot, "colon", "999")
        assert timeline(pilot).seq == 15
        await type_in(pilot, "colon", "twelve")
        assert timeline(pilot).seq == 15

    drive(open_app(db, session=INCIDENTS), scenario)


def test_tab_moves_between_the_panes_and_keys_scroll_the_focused_one(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        focused = []
        for key in ["tab", "tab", "tab", "shift+tab"]:
            await press(pilot, key)
            focused.append(pilot.app.focused.id if pilot.app.focused else None)
        assert focused == ["detail", "state", "timeline", "state"]
        await press(pilot, "shift+tab")
        detail = pilot.app.screen.query_one("#detail", Pane)
        await press(pilot, "j", "j")
        assert (detail.scroll_y, timeline(pilot).seq) == (2, 0)
        await press(pilot, "G")
        assert detail.scroll_y == detail.max_scroll_y > 2
        await press(pilot, "g")
        assert detail.scroll_y == 0
        await press(pilot, "tab", "tab", "enter")  # enter on the timeline opens the event
        assert pilot.app.focused is detail

    drive(open_app(db, session=INCIDENTS), scenario)


def test_q_goes_back_to_the_sessions_and_q_again_quits(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, SessionsScreen)
        await press(pilot, "escape")  # escape never quits
        assert pilot.app.is_running
        await press(pilot, "enter")
        assert isinstance(pilot.app.screen, SessionScreen)
        await press(pilot, "q")
        assert isinstance(pilot.app.screen, SessionsScreen)
        await press(pilot, "q")
        assert not pilot.app.is_running

    drive(open_app(db, session=INCIDENTS), scenario)


def test_r_replays_now_and_offers_the_diff(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert dialog.question == (
            f"replay of {INCIDENTS}: identical (16 events)\nsaved as {INCIDENTS}.replay-1"
        )
        await press(pilot, "enter")
        assert isinstance(pilot.app.screen, DiffScreen)
        assert (pilot.app.screen.a, pilot.app.screen.b) == (INCIDENTS, f"{INCIDENTS}.replay-1")

    drive(open_app(db, session=INCIDENTS), scenario)


def test_a_replay_that_cannot_run_is_a_notification(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        assert isinstance(pilot.app.screen, SessionScreen)
        messages = [n.message for n in pilot.app._notifications]
        assert any("replay of hostile-markup: AgentLoadError" in m for m in messages), messages

    drive(open_app(db, session=HOSTILE), scenario)


def test_d_opens_the_saved_replay_and_from_a_replay_its_original(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "d")
        assert isinstance(pilot.app.screen, DiffScreen)
        assert (pilot.app.screen.a, pilot.app.screen.b) == (
            "demo-refund-buggy-s0",
            "demo-refund-buggy-s0.replay-1",
        )
        await press(pilot, "q", "q", "j", "enter")  # the sessions list: the replay is second
        assert pilot.app.screen.session_id == "demo-refund-buggy-s0.replay-1"  # type: ignore[attr-defined]
        await press(pilot, "d")
        assert isinstance(pilot.app.screen, DiffScreen)
        assert pilot.app.screen.b == "demo-refund-buggy-s0"

    drive(open_app(db, session="demo-refund-buggy-s0"), scenario)


def test_d_without_a_saved_replay_says_so(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "d")
        assert isinstance(pilot.app.screen, SessionScreen)
        assert [n.message for n in pilot.app._notifications] == [
            "no saved replay of demo-travel-chat-s0: press r to replay it now"
        ]

    drive(open_app(db, session="demo-travel-chat-s0"), scenario)


def test_d_on_a_session_with_several_replays_names_each_with_its_agent_and_ending(
    db: Path,
) -> None:
    from replay import Replayer

    with Journal.open(db) as journal:
        Replayer(save=True).replay(journal, INCIDENTS)
        other = "agentloop.examples.incidents:build_no_fallback"
        Replayer(save=True, agent=other).replay(journal, INCIDENTS)

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "d")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert dialog.answers == [
            (
                f"{INCIDENTS}.replay-1",
                f"{INCIDENTS}.replay-1\n  agentloop.examples.incidents:build\n"
                "  completed, 16 events, as this one",
            ),
            (
                f"{INCIDENTS}.replay-2",
                f"{INCIDENTS}.replay-2\n  agentloop.examples.incidents:build_no_fallback\n"
                "  halted (circuit_open), 13 events; this one completed, 16 events",
            ),
        ]
        text = screen_text(pilot.app)  # type: ignore[arg-type]
        assert all(line in text for _, label in dialog.answers for line in label.split("\n"))
        await press(pilot, "down", "enter")
        assert isinstance(pilot.app.screen, DiffScreen)
        assert pilot.app.screen.b == f"{INCIDENTS}.replay-2"

    drive(open_app(db, session=INCIDENTS), scenario)


def test_markup_and_escapes_in_payloads_are_shown_as_characters(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "j")
        text = screen_text(pilot.app)  # type: ignore[arg-type]
        assert "[bold red]boom[/bold red] [link=https://evil.example]click[/link]" in text
        assert "\\x1b[31mred\\x1b[0m \\x07bell" in text  # in the timeline's summary
        assert "\x1b" not in text and "\x07" not in text
        await press(pilot, "j", "j")
        detail = pane(pilot, "detail")
        assert '"html": "[bold red]pwned[/] \\u001b]8;;https://evil\\u0007link' in detail
        await press(pilot, "G")
        assert "[b]done[/b] \\u2028 [reverse]x" in pane(pilot, "detail")

    drive(open_app(db, session=HOSTILE), scenario, size=(260, 32))


def test_the_state_of_a_late_seq_comes_from_snapshots(long_db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "G")
        assert re.search(r"^  events +1000$", pane(pilot, "state"), re.M)
        assert "last_seq: 998 → 999" in pane(pilot, "state")

    drive(open_app(long_db, session="long"), scenario)
    with Journal.open(long_db) as journal:
        from journal import FOLD_VERSION

        assert journal.load_snapshot("long", 999, FOLD_VERSION) is not None
