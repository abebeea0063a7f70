"""The Sessions screen: every session of the journal, one line each; sort, filter, search.

Sessions come from the ``sessions`` projection and one batched read of each session's
last event summary (no payload is read), loaded in a worker and again when the journal
changes. The list is a `LineList`, so thousands of sessions cost what a screenful does;
its columns are `tui.columns`: they give way by priority when the terminal is narrow, the
same as in ``agent-journal sessions``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import ClassVar, get_args

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import Footer

from journal import SessionStatus

from ..columns import COLUMNS, Layout, Listed, layout, listed, natural_widths
from ..keys import bind, command
from ..text import safe_text
from ..widgets.lines import LineList
from .base import SearchingScreen, StatusLine
from .dialogs import PromptScreen

__all__ = ["SessionsList", "SessionsScreen"]

STATUSES: tuple[str, ...] = get_args(SessionStatus)


class SessionsList(LineList):
    """Sessions, one per line, in the columns that fit the list's width."""

    class Reshaped(Message):
        """The columns shown changed (the header must follow)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Listed] = []
        self._natural = natural_widths([])
        self._shape: Layout | None = None
        self._shape_width = -1

    def show(self, rows: Sequence[Listed]) -> None:
        """Show ``rows`` (already filtered and sorted)."""
        self.rows = list(rows)
        self._natural = natural_widths(self.rows)
        self._shape_width = -1
        self.invalidate()
        self.set_line_count(len(self.rows))
        self.post_message(self.Reshaped())

    def shape(self, width: int) -> Layout:
        """The columns that fit ``width`` cells (kept until the width or the rows change)."""
        if self._shape is None or width != self._shape_width:
            if self._shape_width >= 0:
                self.post_message(self.Reshaped())
            self._shape = layout(self._natural, width)
            self._shape_width = width
        return self._shape

    def with_content(self) -> list[str]:
        """The columns that have something to show for these rows, in order."""
        return [name for name in COLUMNS if self._natural[name]]

    def header(self) -> Text:
        """The titles of the columns shown."""
        return self.shape(max(self.scrollable_content_region.width, 1)).header()

    def render_row(self, index: int, width: int) -> Text:
        """The cells of session ``index``."""
        return self.shape(width).row(self.rows[index])


class SessionsScreen(SearchingScreen):
    """Every session: enter opens one, ``/`` finds in the list, ``F`` searches events.

    ``f`` filters, ``s`` sorts.
    """

    DEFAULT_CSS = """
    SessionsScreen #header { height: 1; background: $surface; padding: 0 0 0 0; }
    SessionsScreen SessionsList { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("f", "filter", "filter", "filter.sessions", title="by status or agent", show=True),
        bind(
            "F",
            "search_events",
            "search events",
            "search.events",
            title="search every session's events for words",
        ),
        bind("s", "sort", "sort", "sort.next-column", title="by the next column", show=True),
        bind("S", "reverse", "reverse", "sort.reverse", title="reverse the order"),
        bind("r", "replay", "replay", "replay.run", title="replay the session now", show=True),
        bind("d", "diff", "diff", "replay.diff", title="diff with a saved replay", show=True),
    ]

    SEARCH_HINT = "session id, agent, status or lineage"

    def __init__(self) -> None:
        super().__init__()
        self.all: list[Listed] = []
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
        """Read the sessions and how each ended (a worker); the list shows them when in."""

        def read() -> list[Listed]:
            found = self.journal.sessions()
            return listed(found, self.journal.last_summaries([s.session_id for s in found]))

        self.japp.hand_over("listing sessions", read, self._show)

    def _show(self, found: list[Listed]) -> None:
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
            row
            for row in self.all
            if (self.status is None or row.summary.status == self.status)
            and (self.agent is None or self.agent in (row.summary.agent or ""))
        ]
        shown.sort(key=lambda r: (r.summary.started or "", r.summary.session_id), reverse=True)
        shown.sort(key=COLUMNS[self.sort_by].key, reverse=self.descending)
        listing = self.listing
        listing.empty = self._empty_hint()
        listing.show(shown)
        ids = [row.summary.session_id for row in shown]
        listing.move_to(ids.index(current) if current in ids else 0)
        self.refresh_status()

    def _empty_hint(self) -> str:
        if not self._loaded:
            return "loading…"
        if self.all:
            return "no session matches the filter: f changes it (empty shows all)"
        return (
            "no sessions in this journal yet.\n"
            f"  agent-journal demo --db {self.japp.journal.target}\n"
            "writes example sessions into it; sessions being recorded show up here as they "
            "are written."
        )

    @on(SessionsList.Reshaped)
    def _reshaped(self) -> None:
        self.query_one("#header", StatusLine).update(self.listing.header())

    @property
    def current(self) -> str | None:
        """The session under the cursor."""
        listing = self.listing
        if not listing.rows:
            return None
        return listing.rows[listing.cursor].summary.session_id

    def refresh_status(self) -> None:
        """Journal, how many sessions are shown, the order, filters and search."""
        listing = self.listing
        parts: list[str | tuple[str, str]] = [
            (f"{self.journal_name}  ", "bold"),
            f"{len(listing.rows)} of {len(self.all)} sessions" if self._loaded else "loading…",
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

        self.app.push_screen(SessionScreen(self.listing.rows[event.index].summary.session_id))

    def find(self, needle: str, *, backward: bool) -> None:
        """Go to the next (or previous) session with ``needle`` in a column, wrapping."""
        listing = self.listing
        count = len(listing.rows)
        for step in range(1, count + 1):
            index = (listing.cursor + (-step if backward else step)) % count
            row = listing.rows[index]
            if any(needle in column.text(row).lower() for column in COLUMNS.values()):
                listing.move_to(index)
                return
        self.japp.warn(f"not found: {needle}")

    def action_filter(self) -> None:
        """Ask for a filter: ``status:halted``, ``agent:refund``, a bare status or agent."""
        current = " ".join(
            [f"status:{self.status}"] * bool(self.status)
            + [f"agent:{self.agent}"] * bool(self.agent)
        )
        agents = sorted({f"agent:{r.summary.agent}" for r in self.all if r.summary.agent})
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

    def action_search_events(self) -> None:
        """Ask for words; list the events of every session that have them."""
        from .search import ask_search

        ask_search(self)

    def action_sort(self) -> None:
        """Sort by the next column that has something to show."""
        names = [*{*self.listing.with_content(), self.sort_by}]
        names.sort(key=list(COLUMNS).index)
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
        for agent in sorted({r.summary.agent for r in self.all if r.summary.agent}):
            yield command(
                f"filter: agent {agent}",
                "only sessions of this agent",
                partial(self.set_filter, status=self.status, agent=agent),
            )
        yield command(
            "filter: clear", "show every session", partial(self.set_filter, status=None, agent=None)
        )
