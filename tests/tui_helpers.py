"""Helpers of the TUI tests: the small checked-in journal, driving the app, reading the screen.

The journal the TUI tests and snapshots look at is a set of JSONL files in
``tests/data/tui`` (one session each, fixed timestamps), imported into a fresh SQLite file
per test. Rebuild them (after a change to the example agents) with::

    python -m tests.tui_helpers
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from textual.pilot import Pilot
from textual.widgets import Input

from journal import (
    ActionCommitted,
    ActionProposed,
    AgentCompleted,
    Journal,
    SessionStarted,
    ToolCall,
    UserInput,
    import_file,
)
from journal.canonical import dumps_canonical, format_ts
from tui.app import JournalApp

DATA = Path(__file__).parent / "data" / "tui"
T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
HOSTILE = "hostile-markup"
HOSTILE_TEXT = (
    "[bold red]boom[/bold red] [link=https://evil.example]click[/link] \x1b[31mred\x1b[0m"
)
SIZE = (120, 32)

Scenario = Callable[[Pilot[Any]], Awaitable[None]]


_TEMPLATE: list[Path] = []


def small_journal(path: Path) -> Path:
    """A new SQLite journal at ``path`` holding the checked-in sessions.

    They are imported once per test run into a template file, which each test copies.
    """
    if not _TEMPLATE:
        folder = tempfile.mkdtemp(prefix="tui-journal-")
        atexit.register(shutil.rmtree, folder, True)
        template = Path(folder) / "journal.db"
        with Journal.open(template) as journal:
            for file in sorted(DATA.glob("*.jsonl")):
                import_file(journal, file)
        _TEMPLATE.append(template)
    shutil.copyfile(_TEMPLATE[0], path)
    return path


async def settle(pilot: Pilot[Any]) -> None:
    """Let every worker but the follower finish, until the app stays quiet for two rounds."""
    app = pilot.app
    quiet = 0
    for _ in range(100):
        await pilot.pause()
        busy = [w for w in app.workers if w.group != "follow" and not w.is_finished]
        if busy:
            quiet = 0
            await app.workers.wait_for_complete(busy)
        else:
            quiet += 1
            if quiet == 2:
                return


def open_app(db: Path, **options: Any) -> JournalApp:
    """The app on ``db``, not following the journal, folding states at once."""
    options.setdefault("follow", False)
    return JournalApp(db=db, state_delay=0.0, **options)


def drive(app: JournalApp, scenario: Scenario, size: tuple[int, int] = SIZE) -> None:
    """Run ``app`` headless, settle it, then run ``scenario`` with its pilot."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await scenario(pilot)

    asyncio.run(main())


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Press keys, then settle."""
    await pilot.press(*keys)
    await settle(pilot)


async def type_in(pilot: Pilot[Any], key: str, text: str) -> None:
    """Open a prompt with ``key``, put ``text`` in it and press enter, then settle.

    The text is set, not typed key by key: each simulated key costs a render.
    """
    await pilot.press(key)
    await pilot.pause()
    pilot.app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await settle(pilot)


async def wait_until(pilot: Pilot[Any], condition: Callable[[], bool], timeout: float = 5) -> None:
    """Pause until ``condition()`` holds (the follower and reload timers work in their time)."""
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    assert condition(), "timed out"


def screen_text(app: JournalApp) -> str:
    """What the terminal shows, as plain text."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


# -- building the checked-in sessions (python -m tests.tui_helpers) ---------------------------


def _hostile(journal: Journal) -> None:
    journal.append(
        HOSTILE,
        [
            SessionStarted(agent="tests.hostile:build", model="m", metadata={"note": "[i]x[/i]"}),
            UserInput(text=HOSTILE_TEXT + " \x07bell"),
            ActionProposed(
                calls=[ToolCall(call_id="c1", tool="fetch", args={"url": "[link=file:///etc]"})]
            ),
            ActionCommitted(
                call_id="c1",
                tool="fetch",
                args={"url": "[link=file:///etc]"},
                result={"html": "[bold red]pwned[/] \x1b]8;;https://evil\x07link\x1b]8;;\x07"},
            ),
            AgentCompleted(answer="[b]done[/b] \u2028 [reverse]x"),
        ],
    )


def regenerate(directory: Path = DATA) -> list[Path]:
    """Run the demo agents (and a replay with the fixed refund guard) into JSONL files.

    Timestamps are rewritten to a fixed clock (session ``i`` starts at ``T0 + i`` minutes,
    one millisecond per event), so the files, and the screens drawn from them, never change.
    """
    from agentloop.examples import run_demo
    from journal.formats.jsonl import export_lines
    from replay import Replayer, ReplayOptions

    directory.mkdir(parents=True, exist_ok=True)
    with Journal.open(":memory:") as journal:
        ran = run_demo(journal, seed=0)
        Replayer(ReplayOptions(agent="agentloop.examples.refund:build_fixed"), save=True).replay(
            journal, "demo-refund-buggy-s0"
        )
        _hostile(journal)
        ids = [item.session_id for item in ran] + ["demo-refund-buggy-s0.replay-1", HOSTILE]
        written = []
        for index, session_id in enumerate(ids):
            lines = [orjson.loads(line) for line in export_lines(journal, session_id)]
            header, records = lines[0], lines[1:]
            start = T0 + timedelta(minutes=index)
            for record in records:
                record.pop("hash", None)
                record["ts"] = format_ts(start + timedelta(milliseconds=record["seq"]))
                for volatile in ("duration_ms", "latency_ms"):
                    if volatile in record:
                        record[volatile] = 1.0
            header.update(started=records[0]["ts"], ended=records[-1]["ts"])
            path = directory / f"{index:02d}-{session_id}.jsonl"
            path.write_bytes(b"".join(dumps_canonical(x) + b"\n" for x in [header, *records]))
            written.append(path)
    return written


if __name__ == "__main__":
    for written_path in regenerate():
        print(written_path)
