"""The Session screen: every key, the three panes, and untrusted text shown literally."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from rich.color import Color
from textual.pilot import Pilot
from textual.widgets import Input

from journal import AgentHalted, Journal, SessionStarted, UserInput
from tui.screens.dialogs import ChoiceScreen, PromptScreen
from tui.screens.diff import DiffScreen
from tui.screens.session import SessionScreen, parse_types
from tui.screens.sessions import SessionsList, SessionsScreen
from tui.widgets.lines import LineList
from tui.widgets.panes import Pane
from tui.widgets.timeline import TimelineView

from .stores import PgSchema
from .tui_helpers import (
    HOSTILE,
    drive,
    open_app,
    press,
    screen_text,
    settle,
    small_journal,
    type_in,
)

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
        {
            "verification_failed",
            "action_failed",
            "agent_halted",
            "circuit_opened",
            "model_call_failed",
            "user_input",
        }
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


def test_searching_back_in_a_filter_that_shows_nothing_finds_nothing(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "f", "repair_applied")  # the session has none
        assert timeline(pilot).seq == -1
        await type_in(pilot, "slash", "search_incidents")
        await press(pilot, "N")
        await settle(pilot)
        assert [n.message for n in pilot.app._notifications] == ["not found: search_incidents"] * 2

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


SERVED = (
    "5 model replies and 4 tool results served from the recording (search_cache and "
    "search_incidents not run: --live-tool NAME runs one)"
)


def test_r_replays_now_and_offers_the_diff(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert dialog.question == (
            f"replay of {INCIDENTS}: identical (16 events: {SERVED})\nsaved as {INCIDENTS}.replay-1"
        )
        await press(pilot, "enter")
        assert isinstance(pilot.app.screen, DiffScreen)
        assert (pilot.app.screen.a, pilot.app.screen.b) == (INCIDENTS, f"{INCIDENTS}.replay-1")

    drive(open_app(db, session=INCIDENTS), scenario)


def test_a_read_only_app_replays_and_saves_nothing(db: Path) -> None:
    """`agent-journal serve` without --writable: r shows the verdict, the journal stays."""
    with Journal.open(db) as journal:
        before = [s.session_id for s in journal.sessions()]

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert dialog.question == (
            f"replay of {INCIDENTS}: identical (16 events: {SERVED})\n"
            "read-only: the replay is not saved"
        )

    drive(open_app(db, session=INCIDENTS, read_only=True), scenario)
    with Journal.open(db) as journal:
        assert [s.session_id for s in journal.sessions()] == before


def test_a_replay_that_cannot_run_is_a_notification(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        assert isinstance(pilot.app.screen, SessionScreen)
        messages = [n.message for n in pilot.app._notifications]
        assert any("replay of hostile-markup: AgentLoadError" in m for m in messages), messages

    drive(open_app(db, session=HOSTILE), scenario)


def test_a_recorded_agent_off_the_trust_list_asks_which_agent_to_run(db: Path) -> None:
    with Journal.open(db) as journal:
        events = [item.event for item in journal.events(INCIDENTS)]
        head = events[0].model_copy(update={"agent": "evil.payload:build"})
        journal.append("untrusted", [head, *events[1:]])

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        assert isinstance(pilot.app.screen, PromptScreen)
        messages = [n.message for n in pilot.app._notifications]
        assert any(
            "names 'evil.payload:build', which is not on the trust list" in m for m in messages
        )
        pilot.app.screen.query_one(Input).value = "agentloop.examples.incidents:build"
        await press(pilot, "enter")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert (
            dialog.question
            == f"replay of untrusted: identical (16 events: {SERVED})\nsaved as untrusted.replay-1"
        )

    drive(open_app(db, session="untrusted"), scenario)


def test_a_session_without_an_agent_reference_asks_which_agent_to_run(db: Path) -> None:
    """An imported transcript names no agent: r asks for one instead of failing."""
    with Journal.open(db) as journal:
        events = [item.event for item in journal.events(INCIDENTS)]
        head = events[0].model_copy(
            update={"agent": None, "metadata": {"imported_from": "openai"}}  # as an importer
        )
        journal.append("imported", [head, *events[1:]])

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        assert isinstance(pilot.app.screen, PromptScreen)
        messages = [n.message for n in pilot.app._notifications]
        assert messages[-1] == "session imported records no agent reference: name the agent to run"
        pilot.app.screen.query_one(Input).value = "agentloop.examples.incidents:build"
        await press(pilot, "enter")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert dialog.question.splitlines()[1] == "saved as imported.replay-1"

    drive(open_app(db, session="imported"), scenario)


def test_a_replay_that_is_not_saved_says_why_and_offers_no_diff(db: Path) -> None:
    with Journal.open(db) as journal:
        events = [item.event for item in journal.events(INCIDENTS)]
        head = events[0].model_copy(update={"system_prompt": "An older prompt."})
        journal.append("reprompted", [head, *events[1:]])

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "r")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        question = dialog.question.splitlines()
        assert question[0] == (
            "replay of reprompted: diverged at seq 0: session_started: the configuration "
            "changed (system_prompt)"
        )
        assert question[1].startswith("not saved: the configuration changed")
        await press(pilot, "enter")
        assert isinstance(pilot.app.screen, SessionScreen)  # closed: there is nothing to diff
        with Journal.open(db) as journal:
            assert journal.summary("reprompted.replay-1") is None

    drive(open_app(db, session="reprompted"), scenario)


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
        journal.append(  # a saved run of another agent that halted: a lineage and an ending
            f"{INCIDENTS}.replay-2",
            [
                SessionStarted(
                    agent="agentloop.examples.incidents:build_no_fallback", replay_of=INCIDENTS
                ),
                UserInput(text="database disk alerts"),
                AgentHalted(rule="circuit_open", reason="search_incidents is unavailable"),
            ],
        )

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "d")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChoiceScreen)
        assert dialog.answers == [  # newest first, as in the sessions list
            (
                f"{INCIDENTS}.replay-2",
                f"{INCIDENTS}.replay-2\n  agentloop.examples.incidents:build_no_fallback\n"
                "  halted (circuit_open), 3 events; this one completed, 16 events",
            ),
            (
                f"{INCIDENTS}.replay-1",
                f"{INCIDENTS}.replay-1\n  agentloop.examples.incidents:build\n"
                "  completed, 16 events, as this one",
            ),
        ]
        text = screen_text(pilot.app)  # type: ignore[arg-type]
        assert all(line in text for _, label in dialog.answers for line in label.split("\n"))
        await press(pilot, "down", "enter")
        assert isinstance(pilot.app.screen, DiffScreen)
        assert pilot.app.screen.b == f"{INCIDENTS}.replay-1"
        await press(pilot, "q", "d", "j", "k", "j", "enter")  # j and k move as in every list
        assert isinstance(pilot.app.screen, DiffScreen)
        assert pilot.app.screen.b == f"{INCIDENTS}.replay-1"

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


# -- edges: the cursor, long values, the state pane, scans that take a while -------------------


def _luminance(color: Color) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = color.get_truecolor()
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(fg: Color, bg: Color) -> float:
    """The WCAG contrast ratio of two colours (1 to 21; 4.5 is the floor for text)."""
    high, low = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def cursor_contrast(pilot: Pilot[Any], lines: LineList) -> float:
    """The lowest contrast of any character drawn on the cursor row of ``lines``."""
    region = lines.content_region
    y = region.y + lines.cursor - lines.scroll_offset.y
    ratios, x = [], 0
    for segment in pilot.app.screen._compositor.render_strips()[y]:
        style = segment.style
        inside = region.x <= x < region.right
        x += segment.cell_length
        if inside and segment.text.strip() and style and style.color and style.bgcolor:
            ratios.append(contrast(style.color, style.bgcolor))
    assert ratios
    return min(ratios)


def test_the_cursor_row_is_readable_in_the_default_theme(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert pilot.app.theme == "textual-dark"
        await press(pilot, "j", "j", "j")  # seq 3: a failure, red in the timeline
        focused = cursor_contrast(pilot, timeline(pilot))
        await press(pilot, "tab")  # the timeline keeps its cursor, unfocused
        assert min(focused, cursor_contrast(pilot, timeline(pilot))) >= 4.5
        await press(pilot, "q")  # the sessions list: the same cursor
        assert cursor_contrast(pilot, pilot.app.screen.query_one(SessionsList)) >= 4.5

    drive(open_app(db, session=INCIDENTS), scenario)


def pane_lines(pilot: Pilot[Any], name: str) -> list[str]:
    """The lines a pane shows on screen, inside its border and padding."""
    region = pilot.app.screen.query_one(f"#{name}", Pane).content_region
    lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
    return [line[region.x : region.right] for line in lines[region.y : region.bottom]]


def test_long_values_fold_under_their_key_in_the_event_and_state_panes(tmp_path: Path) -> None:
    from journal import SessionStarted

    db = tmp_path / "long-values.db"
    long_text = " ".join(f"word{i}" for i in range(60))
    with Journal.open(db) as journal:
        journal.append("s", [SessionStarted(agent="x:y"), UserInput(text=long_text)])

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "j")
        detail = pane_lines(pilot, "detail")
        first = next(i for i, line in enumerate(detail) if '"text": "word0' in line)
        key = detail[first].index('"text"')
        folded = [detail[first]]
        for line in detail[first + 1 :]:
            if not line.startswith(" " * (key + 2)) or not line.strip():
                break
            folded.append(line)
        assert len(folded) > 2  # folded, and every continuation under the key, not at 0
        assert "".join("".join(folded).split()) == "".join(f'"text": "{long_text}",'.split())
        state = pane_lines(pilot, "state")
        guard = next(i for i, line in enumerate(state) if line.startswith("  guardrails"))
        assert state[guard + 1].startswith("    ") and state[guard + 1].strip()

    drive(open_app(db, session="s"), scenario, size=(110, 60))


def test_the_state_pane_says_at_once_which_seq_it_is_folding(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        state = pilot.app.screen.query_one("#state", Pane)
        assert str(state.border_title) == "state after seq 0"
        pilot.app.state_delay = 3600  # the cursor rests an hour before a fold starts
        await press(pilot, "j")
        assert str(state.border_title) == "state after seq 0 · folding seq 1…"
        assert "changed by seq 0:" in state.shown  # and the content is still seq 0's
        pilot.app.state_delay = 0
        await press(pilot, "j")
        assert str(state.border_title) == "state after seq 2"
        assert "changed by seq 2:" in state.shown

    drive(open_app(db, session=INCIDENTS), scenario)


@pytest.fixture
def pg_long(pg_schema: PgSchema) -> str:
    """A PostgreSQL journal with one 300-event session ``long``: a failure every 10 seqs."""
    from journal import SessionStarted, VerificationFailed

    with Journal.open(pg_schema.url) as journal:
        events: list[Any] = [SessionStarted(agent="x:y")]
        for seq in range(1, 300):
            if seq % 10:
                events.append(UserInput(text=f"message {seq}"))
            else:
                events.append(
                    VerificationFailed(call_id=f"c{seq}", tool="t", stage="schema", message="no")
                )
        journal.append("long", events)
    return pg_schema.url


@contextmanager
def reads_blocked(url: str) -> Iterator[None]:
    """Hold an exclusive lock on the events table: every read of an event waits for it."""
    with psycopg.connect(url) as conn:
        conn.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


async def answer(pilot: Pilot[Any], key: str, text: str) -> None:
    """Open a prompt and answer it, without waiting for what the answer starts."""
    await pilot.press(key)
    await pilot.pause()
    pilot.app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await pilot.pause()


def test_g_while_the_filter_scans_stays_at_the_end_when_the_scan_is_done(pg_long: str) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "colon", "150")
        view = timeline(pilot)
        with reads_blocked(pg_long):
            await answer(pilot, "f", "failures")  # the scan waits on the lock
            assert view.filter is not None and len(view.filter) == 0
            await pilot.press("G")
            await pilot.pause()
        await settle(pilot)
        assert len(view.filter) == 29
        assert (view.cursor, view.seq) == (28, 290)  # where G went, not back to seq 150

    drive(open_app(pg_long, session="long"), scenario)


def test_a_search_says_how_far_it_got_while_it_runs(pg_long: str) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        with reads_blocked(pg_long):
            await answer(pilot, "slash", "message 299")  # the scan waits on the lock
            status = screen_text(pilot.app).splitlines()[0]  # type: ignore[arg-type]
            assert "/message 299  searching… 0 of 300 events" in status
        await settle(pilot)
        assert timeline(pilot).seq == 299
        assert "searching" not in screen_text(pilot.app).splitlines()[0]  # type: ignore[arg-type]

    drive(open_app(pg_long, session="long"), scenario)
