"""The Sessions screen: every session of the journal, one line each; sort, filter, search.

Sessions come from the ``sessions`` projection (one query, no event is read), loaded in a
worker and again when the journal changes. The list is a `LineList`, so thousands of
sessions cost what a screenful does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, get_args

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.widgets import Footer

from journal import SessionStatus, SessionSummary

from ..keys import bind, command
from ..render import format_cost, format_time, safe_text
from ..widgets.lines import LineList
from .base import SearchingScreen, StatusLine
from .dialogs import PromptScreen

__all__ = ["COLUMNS", "STATUS_STYLE", "SessionsList", "SessionsScreen", "lineage"]

STATUSES: tuple[str, ...] = get_args(SessionStatus)
STATUS_STYLE = {"completed": "green", "halted": "yellow", "failed": "red", "running": "cyan"}
"""How each session status is coloured."""


def lineage(summary: SessionSummary) -> str:
    """``replay of X`` or ``fork of X@N`` (empty for an original session)."""
    if summary.replay_of:
        return f"replay of {summary.replay_of}"
    if summary.forked_from:
        return f"fork of {summary.forked_from}@{summary.fork_seq}"
    return ""


Cell = Callable[[SessionSummary], Any]

COLUMNS: dict[str, tuple[Cell, bool]] = {
    "session": (lambda s: s.session_id, False),
    "agent": (lambda s: s.agent or "-", False),
    "status": (lambda s: s.status, False),
    "events": (lambda s: s.events, True),
    "steps": (lambda s: s.steps, True),
    "fail": (lambda s: s.failures, True),
    "tokens": (lambda s: s.tokens_in + s.tokens_out, True),
    "cost": (lambda s: s.cost, True),
    "started": (lambda s: s.started or "", False),
    "lineage": (lineage, False),
}
"""Column name -> (value of a session, right-aligned). Sorting uses the same values."""

_MAX_WIDTH = {"session": 40, "agent": 44, "lineage": 60}


def _cell(summary: SessionSummary, name: str) -> str:
    value = COLUMNS[name][0](summary)
    if name == "cost":
        return format_cost(value)
    if name == "started":
        return format_time(value or None)
    return safe_text(str(value))


class SessionsList(LineList):
    """Session summaries, one per line, in columns sized to what is shown."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.summaries: list[SessionSummary] = []
        self.widths: dict[str, int] = {name: len(name) for name in COLUMNS}

    def show(self, summaries: Sequence[SessionSummary]) -> None:
        """Show ``summaries`` (already filtered and sorted)."""
        self.summaries = list(summaries)
        self.widths = {name: len(name) for name in COLUMNS}
        for summary in self.summaries:
            for name in COLUMNS:
                width = min(len(_cell(summary, name)), _MAX_WIDTH.get(name, 24))
                if width > self.widths[name]:
                    self.widths[name] = width
        self.invalidate()
        self.set_line_count(len(self.summaries))

    def line(self, cells: dict[str, tuple[str, str]]) -> Text:
        """One line of columns: each cell is (text, style), padded or cut to its width."""
        text = Text()
        for name, (value, style) in cells.items():
            width = self.widths[name]
            if len(value) > width:
                value = value[: width - 1] + "…"
            text.append(value.rjust(width) if COLUMNS[name][1] else value.ljust(width), style)
            text.append("  ")
        return text

    def header(self) -> Text:
        """The column titles."""
        return self.line({name: (name, "bold") for name in COLUMNS})

    def render_row(self, index: int, width: int) -> Text:
        """The cells of session ``index``."""
        summary = self.summaries[index]
        cells = {name: (_cell(summary, name), "") for name in COLUMNS}
        cells["status"] = (summary.status, STATUS_STYLE.get(summary.status, ""))
        if summary.failures:
            cells["fail"] = (cells["fail"][0], "red")
        return self.line(cells)


class SessionsScreen(SearchingScreen):
    """Every session: enter opens one, ``/`` searches, ``f`` filters, ``s`` sorts."""

    DEFAULT_CSS = """
    SessionsScreen #header { height: 1; background: $surface; padding: 0 0 0 0; }
    SessionsScreen SessionsList { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("f", "filter", "filter", "filter.sessions", title="by status or agent", show=True),
        bind("s", "sort", "sort", "sort.next-column", title="by the next column", show=True),
        bind("S", "reverse", "reverse", "sort.reverse", title="reverse the order"),
        bind("r", "replay", "replay", "replay.run", title="replay the session now", show=True),
        bind("d", "diff", "diff", "replay.diff", title="diff with a saved replay", show=True),
    ]

    SEARCH_HINT = "session id, agent, status or lineage"

    def __init__(self) -> None:
        super().__init__()
        self.all: list[SessionSummary] = []
        self.sort_by = "started"
        self.descending = True
        self.status: str | None = None
        self.agent: str | None = None
        self._loaded = False
        self._reload_pending = False

    def compose(self) -> ComposeResult:
        """Status line, column header, the list, the footer."""
        yield StatusLine(id="status")
        yield StatusLine(id="header")
        yield SessionsList(id="sessions")
        yield Footer()

    @property
    def listing(self) -> SessionsList:
        """The list widget."""
        return self.query_one(SessionsList)

    def on_mount(self) -> None:
        """Load the sessions."""
        self.listing.focus()
        self.refresh_status()
        self.load()

    @work(thread=True, exclusive=True, group="sessions", exit_on_error=False)
    def load(self) -> None:
        """Read the session summaries (a worker); the list shows them when they are in."""
        self.japp.hand_over("listing sessions", self.journal.sessions, self._show)

    def _show(self, found: list[SessionSummary]) -> None:
        self.all = found
        self._loaded = True
        self.apply()

    def journal_changed(self, sessions: dict[str, int]) -> None:
        """Reload, at most a few times a second however busy the journal is."""
        if not self._reload_pending:
            self._reload_pending = True
            self.set_timer(0.3, self._reload)

    def _reload(self) -> None:
        self._reload_pending = False
        self.load()

    # -- view -------------------------------------------------------------------------

    def apply(self) -> None:
        """Filter and sort the sessions into the list, keeping the cursor on its session."""
        current = self.current
        shown = [
            s
            for s in self.all
            if (self.status is None or s.status == self.status)
            and (self.agent is None or self.agent in (s.agent or ""))
        ]
        value = COLUMNS[self.sort_by][0]
        shown.sort(key=lambda s: (s.started or "", s.session_id), reverse=True)
        shown.sort(key=value, reverse=self.descending)
        listing = self.listing
        listing.show(shown)
        self.query_one("#header", StatusLine).update(listing.header())
        ids = [s.session_id for s in shown]
        listing.move_to(ids.index(current) if current in ids else 0)
        self.refresh_status()

    @property
    def current(self) -> str | None:
        """The session under the cursor."""
        listing = self.listing
        if not listing.summaries:
            return None
        return listing.summaries[listing.cursor].session_id

    def refresh_status(self) -> None:
        """Journal, how many sessions are shown, the order, filters and search."""
        listing = self.listing
        parts: list[str | tuple[str, str]] = [
            (f"{self.journal_name}  ", "bold"),
            f"{len(listing.summaries)} of {len(self.all)} sessions" if self._loaded else "loading…",
            f"  sorted by {self.sort_by} {'↓' if self.descending else '↑'}",
        ]
        if self.status or self.agent:
            filters = [f"status={self.status}"] if self.status else []
            filters += [f"agent~{self.agent}"] if self.agent else []
            parts.append((f"  filter: {safe_text(' '.join(filters))}", "$text-warning"))
        if self.search:
            parts.append(f"  /{safe_text(self.search)}")
        self.query_one("#status", StatusLine).say(*parts)

    @property
    def journal_name(self) -> str:
        """The journal's file name or URL, for the status line."""
        return safe_text(self.japp.journal_name)

    # -- actions ----------------------------------------------------------------------

    @on(LineList.Chosen)
    def _open(self, event: LineList.Chosen) -> None:
        from .session import SessionScreen

        self.app.push_screen(SessionScreen(self.listing.summaries[event.index].session_id))

    def find(self, needle: str, *, backward: bool) -> None:
        """Go to the next (or previous) session with ``needle`` in a column, wrapping."""
        listing = self.listing
        count = len(listing.summaries)
        for step in range(1, count + 1):
            index = (listing.cursor + (-step if backward else step)) % count
            summary = listing.summaries[index]
            if any(needle in _cell(summary, name).lower() for name in COLUMNS):
                listing.move_to(index)
                return
        self.japp.warn(f"not found: {needle}")

    def action_filter(self) -> None:
        """Ask for a filter: ``status:halted``, ``agent:refund``, a bare status or agent."""
        current = " ".join(
            [f"status:{self.status}"] * bool(self.status)
            + [f"agent:{self.agent}"] * bool(self.agent)
        )
        agents = sorted({f"agent:{s.agent}" for s in self.all if s.agent})
        self.app.push_screen(
            PromptScreen(
                "filter:",
                value=current,
                placeholder="status:halted agent:refund (empty shows all)",
                suggestions=[f"status:{status}" for status in STATUSES] + agents,
            ),
            self._filtered,
        )

    def _filtered(self, answer: str | None) -> None:
        if answer is None:
            return
        status: str | None = None
        agent: str | None = None
        for word in answer.split():
            key, _, value = word.partition(":")
            if not value:
                key, value = ("status" if word in STATUSES else "agent"), word
            if key == "status" and value not in STATUSES:
                self.notify(
                    f"unknown status {safe_text(value)}: one of {', '.join(STATUSES)}",
                    severity="error",
                    markup=False,
                )
                return
            if key == "status":
                status = value
            else:
                agent = value
        self.set_filter(status=status, agent=agent)

    def set_filter(self, *, status: str | None, agent: str | None) -> None:
        """Show only sessions with ``status`` and whose agent contains ``agent``."""
        self.status, self.agent = status, agent
        self.apply()

    def action_sort(self) -> None:
        """Sort by the next column."""
        names = list(COLUMNS)
        self.sort_by_column(names[(names.index(self.sort_by) + 1) % len(names)])

    def sort_by_column(self, name: str) -> None:
        """Sort by column ``name``."""
        self.sort_by = name
        self.apply()

    def action_reverse(self) -> None:
        """Reverse the order."""
        self.descending = not self.descending
        self.apply()

    def action_replay(self) -> None:
        """Replay the session under the cursor now."""
        if self.current:
            self.japp.start_replay(self.current)

    def action_diff(self) -> None:
        """Diff the session under the cursor with a saved replay of it."""
        if self.current:
            self.japp.open_replays(self.current)

    def extra_commands(self) -> Iterable[SystemCommand]:
        """Sort by each column; filter by each status and each agent; clear the filter."""
        for name in COLUMNS:
            yield command(
                f"sort: by {name}", "sort the sessions", partial(self.sort_by_column, name)
            )
        for status in STATUSES:
            yield command(
                f"filter: status {status}",
                "only sessions with this status",
                partial(self.set_filter, status=status, agent=self.agent),
            )
        for agent in sorted({s.agent for s in self.all if s.agent}):
            yield command(
                f"filter: agent {agent}",
                "only sessions of this agent",
                partial(self.set_filter, status=self.status, agent=agent),
            )
        yield command(
            "filter: clear", "show every session", partial(self.set_filter, status=None, agent=None)
        )
