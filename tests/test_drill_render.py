"""Rendering: terminal escape sequences and Rich markup in payloads are shown, never obeyed.

A session carries hostile text in every field a human reads: the agent reference, the
model, metadata, user input, tool names, arguments, results, reasoning, answers, failure
messages and halt reasons. The CLI (``show``, ``sessions``, ``state``, ``replay``, ``diff``)
prints it with control characters as visible escapes and markup as its characters; the TUI
does the same in the timeline, the event detail and the state pane.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from journal import Journal
from journal.events import (
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    SessionStarted,
    ToolCall,
    UserInput,
)
from tui.screens.session import SessionScreen
from tui.widgets.panes import Pane

from .helpers import TickingClock, run_cli
from .tui_helpers import drive, open_app, press, screen_text, wait_until

ESCAPES = {
    "CSI clear screen": "\x1b[2J",
    "CSI colour": "\x1b[31m",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example\x1b\\",
    "OSC 52 clipboard write": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "DCS": "\x1bP+q544e\x1b\\",
    "C1 CSI": "\x9b31m",
    "bell": "\x07",
    "backspace": "\x08",
    "carriage return": "\r",
    "NUL": "\x00",
    "DEL": "\x7f",
    "line separator": "\u2028",
}
MARKUP = [
    "[bold red]boom[/bold red]",
    "[link=file:///etc/passwd]open me[/link]",
    "[@click=app.quit]click me[/]",
    "[/]",
    ":skull:",
]
HOSTILE = " ".join([MARKUP[0], ESCAPES["CSI clear screen"], *MARKUP[1:], *ESCAPES.values()])
RAW = ["\x1b", "\x9b", "\x07", "\x08", "\r", "\x00", "\x7f", "\u2028"]
"""Characters that must never reach the terminal as they are."""


def _session(text: str) -> list[Any]:
    tool = f"tool{text}"
    return [
        SessionStarted(agent=f"evil:{text}", model=text, metadata={"note": text}),
        UserInput(text=text),
        ActionProposed(
            calls=[ToolCall(call_id="c1", tool=tool, args={"q": text})],
            text=text,
            reasoning=text,
        ),
        ActionFailed(call_id="c1", tool=tool, kind="business", message=text, args={"q": text}),
        AgentCompleted(answer=text),
        UserInput(text="again"),
        AgentHalted(rule="error", reason=text),
    ]


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Session ``evil`` full of hostile text, and ``evil2``, which differs in it."""
    db = tmp_path_factory.mktemp("render") / "journal.db"
    with Journal.open(db, clock=TickingClock()) as journal:
        journal.append("evil", _session(HOSTILE))
        journal.append("evil2", _session(HOSTILE + " [i]more[/i] \x1b[5m"))
    return db


def _assert_literal(output: str, *, whole: bool = True) -> None:
    """No raw control character; the markup as its characters (all of it, unless cut short)."""
    for raw in RAW:
        assert raw not in output, repr(raw)
    for markup in MARKUP if whole else MARKUP[:1]:
        assert markup in output, markup


@pytest.mark.parametrize(
    "args",
    [
        ["show", "evil"],
        ["sessions"],
        ["state", "evil"],
        ["state", "evil", "--at", "3"],
        ["replay", "evil", "--agent", "tests.drill_agent:build"],
        ["diff", "evil", "evil2"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_the_cli_prints_hostile_text_literally(hostile_db: Path, args: list[str]) -> None:
    result = run_cli(*args, "--db", hostile_db)
    assert result.exit_code in (0, 1), result.stderr
    assert result.stderr == ""
    _assert_literal(result.stdout, whole=args[0] != "state")  # state cuts long values short
    assert "\\x1b[2J" in result.stdout or "\\u001b[2J" in result.stdout  # escaped, visible


def test_an_error_naming_hostile_text_is_one_literal_line(hostile_db: Path) -> None:
    result = run_cli("show", f"nope{ESCAPES['CSI clear screen']}", "--db", hostile_db)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert "\x1b" not in line and "nope\\x1b[2J" in line


def _pane(pilot: Pilot[Any], name: str) -> str:
    return pilot.app.screen.query_one(f"#{name}", Pane).shown


def test_the_tui_shows_hostile_text_literally(hostile_db: Path) -> None:
    timelines: list[str] = []
    details: list[str] = []
    states: list[str] = []

    async def scenario(pilot: Pilot[Any]) -> None:
        assert isinstance(pilot.app.screen, SessionScreen)
        for seq in range(7):
            title = f"changed by seq {seq}:"
            await wait_until(pilot, lambda title=title: title in _pane(pilot, "state"))
            timelines.append(screen_text(pilot.app))  # type: ignore[arg-type]
            details.append(_pane(pilot, "detail"))
            states.append(_pane(pilot, "state"))
            await press(pilot, "j")

    drive(open_app(hostile_db, session="evil"), scenario, size=(400, 60))
    _assert_literal("\n".join(timelines), whole=False)
    _assert_literal("\n".join(details))
    _assert_literal("\n".join(states), whole=False)
