"""The app as a whole: help, the command palette, bindings, follow mode, and the tui command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.binding import Binding
from textual.command import CommandInput, CommandPalette
from textual.pilot import Pilot

from journal import (
    AgentCompleted,
    Journal,
    SessionNotFoundError,
    SessionStarted,
    UserInput,
)
from tui.app import JournalApp
from tui.keys import declared_bindings, title_of
from tui.screens.base import JournalScreen
from tui.screens.dialogs import ChoiceScreen, HelpScreen, PromptScreen
from tui.screens.diff import DiffScreen
from tui.screens.session import SessionScreen
from tui.screens.sessions import SessionsScreen
from tui.widgets.lines import LineList
from tui.widgets.panes import Pane
from tui.widgets.timeline import TimelineView

from .helpers import run_cli
from .stores import StoreUnderTest
from .tui_helpers import drive, open_app, press, small_journal, wait_until

BOUND = [
    JournalApp,
    JournalScreen,
    SessionsScreen,
    SessionScreen,
    DiffScreen,
    LineList,
    Pane,
    PromptScreen,
    HelpScreen,
    ChoiceScreen,
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


@pytest.mark.parametrize("cls", BOUND, ids=lambda cls: cls.__name__)
def test_every_binding_has_an_id_and_a_description(cls: type) -> None:
    bindings = cls.__dict__["BINDINGS"]
    assert bindings
    ids = []
    for binding in bindings:
        assert isinstance(binding, Binding)
        assert binding.id and binding.description, binding
        category, _, name = binding.id.partition(".")
        assert category and name and binding.id == binding.id.lower(), binding.id
        ids.append(binding.id)
    assert len(ids) == len(set(ids))


def test_the_palette_has_every_key_titled_category_action_and_runs_them(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, JournalApp)
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        titles = [command.title for command in app.get_system_commands(screen)]
        assert all(": " in title for title in titles), titles
        nodes = [screen, *screen.query(TimelineView), *screen.query(Pane), app]
        for node in nodes:
            for binding in declared_bindings(node):
                assert title_of(binding) in titles
        assert {"search: search for text", "go: next failure", "filter: failures"} <= set(titles)
        assert {"replay: replay the session now", "app: show every key"} <= set(titles)
        assert {"filter: type agent_halted", "scroll: half a page down"} <= set(titles)
        assert len(titles) == len(set(titles))
        await press(pilot, "ctrl+p")
        palette = pilot.app.screen
        assert isinstance(palette, CommandPalette)
        palette.query_one(CommandInput).value = "go: next failure"
        await pilot.pause(0.3)
        await press(pilot, "enter")
        assert pilot.app.screen is screen
        assert screen.timeline.seq == 3

    drive(open_app(db, session="demo-incidents-s0"), scenario)


def test_question_mark_shows_every_key_of_the_screen_and_closes_again(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "question_mark")
        help_screen = pilot.app.screen
        assert isinstance(help_screen, HelpScreen)
        text = help_screen.content.plain
        for line in (
            "  /                     search for text",
            "  e                     next failure",
            "  :                     go to a seq",
            "  j, ↓                  line down",
            "  tab                   next pane",
            "  q                     back (quit on the sessions list)",
        ):
            assert line in text
        await press(pilot, "question_mark")
        assert isinstance(pilot.app.screen, SessionScreen)
        await press(pilot, "question_mark", "escape")
        assert isinstance(pilot.app.screen, SessionScreen)

    drive(open_app(db, session="demo-incidents-s0"), scenario)


def test_q_on_the_sessions_list_quits_and_shift_q_quits_anywhere(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "Q")
        assert not pilot.app.is_running

    drive(open_app(db, session="demo-incidents-s0"), scenario)


@pytest.mark.parametrize("any_store", ["sqlite", "postgres"], indirect=True)
def test_follow_mode_shows_new_events_live(any_store: StoreUnderTest) -> None:
    writer = any_store.journal
    writer.append("live", [SessionStarted(agent="x:y"), UserInput(text="first")])

    async def scenario(pilot: Pilot[Any]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, SessionScreen)
        await press(pilot, "F")
        assert screen.following and screen.timeline.seq == 1
        writer.append("live", [UserInput(text=f"more {i}") for i in range(3)])
        await wait_until(pilot, lambda: screen.timeline.line_count == 5)
        assert screen.timeline.seq == 4
        await press(pilot, "F", "g")
        writer.append("live", [AgentCompleted(answer="done")])
        await wait_until(pilot, lambda: screen.timeline.line_count == 6)
        assert (screen.following, screen.timeline.seq) == (False, 0)

    app = JournalApp(db=any_store.target, session="live", poll=0.05, state_delay=0)
    drive(app, scenario)


def test_follow_mode_extends_a_type_filter(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, SessionScreen)
        screen.set_type_filter({"user_input"})
        await wait_until(pilot, lambda: list(screen.timeline.filter or ()) == [1])
        with Journal.open(db) as writer:
            writer.append("demo-discount-crash-s0", [UserInput(text="again")])
        await wait_until(pilot, lambda: list(screen.timeline.filter or ()) == [1, 4])

    drive(open_app(db, session="demo-discount-crash-s0", follow=True, poll=0.05), scenario)


def test_the_app_takes_an_open_journal_and_leaves_it_open(db: Path) -> None:
    with Journal.open(db) as journal:

        async def scenario(pilot: Pilot[Any]) -> None:
            await press(pilot, "q")

        drive(JournalApp(db=journal, follow=True, poll=0.05), scenario)
        assert journal.require("demo-crawler-s0").last_seq == 24


def test_bad_input_fails_before_anything_is_drawn(db: Path, tmp_path: Path) -> None:
    with pytest.raises(SessionNotFoundError, match="session nope: not in"):
        JournalApp(db=db, session="nope")
    with pytest.raises(SessionNotFoundError, match="session nope: not in"):
        JournalApp(db=db, diff=("demo-crawler-s0", "nope"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "agent-journal: session nope: not in {db}\n"),
        (["--diff", "demo-crawler-s0", "nope"], "agent-journal: session nope: not in {db}\n"),
        (
            ["--diff", "demo-crawler-s0", "--db", "{db}"],
            "agent-journal: Invalid value for '--diff': takes two sessions (--diff A B), and "
            "--db is an option, not a session (see agent-journal tui --help)\n",
        ),
        (
            ["--db", "{missing}"],
            "agent-journal: {missing}: no journal here (the file does not exist)\n",
        ),
        ([], "agent-journal: the terminal UI needs a terminal (scripts: show, state, diff)\n"),
    ],
)
def test_the_tui_command_says_what_is_wrong_in_one_line(
    db: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    missing = tmp_path / "missing.db"
    fill = {"db": db, "missing": missing}
    result = run_cli("tui", "--db", db, *[arg.format(**fill) for arg in args])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message.format(**fill))


def test_the_tui_command_runs_the_app_on_a_terminal(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[JournalApp] = []
    monkeypatch.setattr("tui.cli_tui.has_terminal", lambda: True)
    monkeypatch.setattr(JournalApp, "run", lambda self: ran.append(self))
    result = run_cli("tui", "--db", db, "demo-crawler-s0", "--no-follow")
    assert result.exit_code == 0, result.stderr
    [app] = ran
    assert (app.start_session, app.start_diff, app.follow) == ("demo-crawler-s0", None, False)
    app.journal.close()


def test_the_cli_starts_without_importing_textual() -> None:
    code = "import sys, tui.cli; print(sorted(m for m in sys.modules if m.startswith('textual')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"
