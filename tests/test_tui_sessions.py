"""The Sessions screen: the list, sort, filter, search, and opening a session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.content import Content
from textual.pilot import Pilot

from journal import Journal, SessionStarted
from tui.screens.dialogs import ChoiceScreen
from tui.screens.diff import DiffScreen
from tui.screens.session import SessionScreen
from tui.screens.sessions import SessionsList, SessionsScreen
from tui.text import format_cost, format_time

from .tui_helpers import drive, open_app, press, screen_text, small_journal, type_in, wait_until

NEWEST_FIRST = [
    "hostile-markup",
    "demo-refund-buggy-s0.replay-1",
    "demo-travel-chat-s0",
    "demo-discount-crash-s0",
    "demo-shipping-sloppy-s0",
    "demo-research-s0",
    "demo-inventory-storm-s0",
    "demo-crawler-s0",
    "demo-ticket-poller-s0",
    "demo-incidents-no-fallback-s0",
    "demo-incidents-s0",
    "demo-refund-fixed-s0",
    "demo-refund-buggy-s0",
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return small_journal(tmp_path / "journal.db")


def listing(pilot: Pilot[Any]) -> SessionsList:
    return pilot.app.screen.query_one(SessionsList)


def shown(pilot: Pilot[Any]) -> list[str]:
    return [row.summary.session_id for row in listing(pilot).rows]


def current(pilot: Pilot[Any]) -> str:
    screen = pilot.app.screen
    assert isinstance(screen, SessionsScreen)
    assert screen.current is not None
    return screen.current


def test_every_session_is_listed_newest_first_with_its_columns(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert shown(pilot) == NEWEST_FIRST
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        assert lines[0].split() == ["journal.db", "13", "of", "13", "sessions", "sorted", "by"] + [
            "started",
            "↓",
        ]
        assert lines[1].split() == [
            *("session", "status", "events", "steps", "fail", "ok%", "rep", "tokens", "cache%"),
            *("cost", "lat", "ms", "started", "outcome", "lineage"),
        ]
        assert lines[3].split() == [
            *("demo-refund-buggy-s0.replay-1", "completed", "8", "2", "1", "50%", "0", "727"),
            *("10%", "$0.0004", "1", "2026-11-29", "09:11:00", "Done:", "refunded", "$150.0"),
            *("for", "order", "2210.", "replay", "of", "demo-refund-buggy-s0"),
        ]

    drive(open_app(db), scenario, size=(200, 24))


WIDTHS = {
    80: ["session", "status", "fail", "ok%", "cost", "outcome"],  # why, before when
    120: ["session", "status", "fail", "ok%", "cost", "started", "outcome"],
    160: [
        *("session", "status", "steps", "fail", "ok%", "rep", "cost", "started"),
        *("outcome", "lineage"),
    ],
}


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_the_columns_give_way_by_priority_and_never_cut_the_kept_ones(db: Path, width: int) -> None:
    with Journal.open(db) as journal:
        summaries = {s.session_id: s for s in journal.sessions()}

    async def scenario(pilot: Pilot[Any]) -> None:
        lines = screen_text(pilot.app).splitlines()  # type: ignore[arg-type]
        header, rows = lines[1], lines[2:15]
        assert header.replace("lat ms", "lat-ms").split() == WIDTHS[width]
        outcome = header.find("outcome")
        lineage = header.find("lineage")
        for line, session_id in zip(rows, NEWEST_FIRST, strict=True):
            summary = summaries[session_id]
            kept = [session_id, summary.status, format_cost(summary.cost)]
            if "started" in header:
                kept.append(format_time(summary.started))
            assert all(f" {cell} " in f" {line} " for cell in kept)
            # only an outcome is ever cut here: no stray … elsewhere, a lineage whole or absent
            outside = (
                line
                if outcome < 0
                else line[:outcome] + line[lineage if lineage > 0 else len(line) :]
            )
            assert "…" not in outside, line
            if lineage > 0:
                assert line[lineage:].rstrip() == (
                    f"replay of {summary.replay_of}" if summary.replay_of else ""
                )
        assert all(len(line) <= width for line in lines)

    drive(open_app(db), scenario, size=(width, 24))


def test_an_empty_journal_says_how_to_get_sessions(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    Journal.open(db).close()

    async def scenario(pilot: Pilot[Any]) -> None:
        text = screen_text(pilot.app)  # type: ignore[arg-type]
        assert "0 of 0 sessions" in text
        assert "no sessions in this journal yet." in text
        assert f"  agent-journal demo --db {db}  " in text
        with Journal.open(db) as writer:
            writer.append("first", [SessionStarted(agent="later:agent")])
        await wait_until(pilot, lambda: shown(pilot) == ["first"])
        assert "no sessions in this journal yet" not in screen_text(pilot.app)  # type: ignore[arg-type]

    drive(open_app(db, follow=True, poll=0.05), scenario, size=(200, 24))


def test_a_filter_that_matches_nothing_says_so(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "f", "agent:nobody")
        assert shown(pilot) == []
        text = screen_text(pilot.app)  # type: ignore[arg-type]
        assert "no session matches the filter: f changes it (empty shows all)" in text

    drive(open_app(db), scenario)


def test_keys_move_the_cursor_and_enter_opens_the_session(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        seen = []
        for keys in (["j", "j"], ["k"], ["G"], ["g"], ["ctrl+d"], ["ctrl+u"], ["end"], ["home"]):
            await press(pilot, *keys)
            seen.append(NEWEST_FIRST.index(current(pilot)))
        half = listing(pilot).page_height // 2
        assert seen == [2, 1, 12, 0, min(half, 12), 0, 12, 0]
        await press(pilot, "j", "enter")
        screen = pilot.app.screen
        assert isinstance(screen, SessionScreen)
        assert screen.session_id == NEWEST_FIRST[1]

    drive(open_app(db), scenario)


def test_s_sorts_by_the_next_column_and_shift_s_reverses(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "s", "s")  # outcome, then lineage: the replay first, then the newest
        assert shown(pilot)[:2] == ["demo-refund-buggy-s0.replay-1", "hostile-markup"]
        await press(pilot, "s", "s", "s", "s", "s")  # session, agent, status, events, steps
        assert shown(pilot)[0] == "demo-crawler-s0"  # 10 steps
        await press(pilot, "S")
        assert shown(pilot)[-1] == "demo-crawler-s0"
        assert "sorted by steps ↑" in screen_text(pilot.app)  # type: ignore[arg-type]

    drive(open_app(db), scenario)


def test_f_filters_by_status_and_agent_and_keeps_the_cursor_on_its_session(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "G")  # demo-refund-buggy-s0
        await type_in(pilot, "f", "agent:refund")
        assert shown(pilot) == [
            "demo-refund-buggy-s0.replay-1",
            "demo-refund-fixed-s0",
            "demo-refund-buggy-s0",
        ]
        assert current(pilot) == "demo-refund-buggy-s0"
        await type_in(pilot, "f", "halted")
        assert shown(pilot) == [
            "demo-inventory-storm-s0",
            "demo-crawler-s0",
            "demo-ticket-poller-s0",
            "demo-incidents-no-fallback-s0",
        ]
        await type_in(pilot, "f", "status:failed crashy")
        assert shown(pilot) == ["demo-discount-crash-s0"]
        assert "filter: status=failed agent~crashy" in screen_text(pilot.app)  # type: ignore[arg-type]
        await type_in(pilot, "f", "status:exploded")
        assert shown(pilot) == ["demo-discount-crash-s0"]  # unchanged, and said why
        assert "unknown status exploded" in str([n.message for n in pilot.app._notifications])
        await type_in(pilot, "f", "")
        assert shown(pilot) == NEWEST_FIRST

    drive(open_app(db), scenario)


def test_slash_searches_and_n_and_shift_n_move_between_matches(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await type_in(pilot, "slash", "incidents")
        assert current(pilot) == "demo-incidents-no-fallback-s0"
        await press(pilot, "n")
        assert current(pilot) == "demo-incidents-s0"
        await press(pilot, "n")
        assert current(pilot) == "demo-incidents-no-fallback-s0"  # wrapped
        await press(pilot, "N")
        assert current(pilot) == "demo-incidents-s0"
        await type_in(pilot, "slash", "replay of")
        assert current(pilot) == "demo-refund-buggy-s0.replay-1"
        await type_in(pilot, "slash", "zzz")
        assert current(pilot) == "demo-refund-buggy-s0.replay-1"
        assert "not found: zzz" in str([n.message for n in pilot.app._notifications])

    drive(open_app(db), scenario)


def test_r_and_d_work_on_the_session_under_the_cursor(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "G", "d")
        assert isinstance(pilot.app.screen, DiffScreen)
        await press(pilot, "q", "k", "r")  # demo-refund-fixed-s0
        assert isinstance(pilot.app.screen, ChoiceScreen)
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, SessionsScreen)
        await wait_until(pilot, lambda: "demo-refund-fixed-s0.replay-1" in shown(pilot))

    drive(open_app(db, follow=True, poll=0.05), scenario)


def test_new_sessions_appear_while_the_list_is_open(db: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        with Journal.open(db) as writer:
            writer.append("zz-new", [SessionStarted(agent="later:agent")])
        await wait_until(pilot, lambda: "zz-new" in shown(pilot))
        assert shown(pilot)[0] == "zz-new"  # started now: newest

    drive(open_app(db, follow=True, poll=0.05), scenario)


def test_palette_commands_built_from_data_show_markup_literally(db: Path) -> None:
    agent = "[bold red]evil[/bold red]:x"
    with Journal.open(db) as writer:
        writer.append("evil", [SessionStarted(agent=agent)])

    async def scenario(pilot: Pilot[Any]) -> None:
        app = pilot.app
        commands = list(app.get_system_commands(app.screen))
        titles = [Content.from_markup(c.title).plain for c in commands]
        assert f"filter: agent {agent}" in titles
        assert {"sort: by cost", "filter: status halted", "filter: clear"} <= set(titles)
        [evil] = [c for c in commands if agent in Content.from_markup(c.title).plain]
        evil.callback()
        await press(pilot)
        assert shown(pilot) == ["evil"]
        assert agent in screen_text(app)  # type: ignore[arg-type]

    drive(open_app(db), scenario, size=(160, 24))
