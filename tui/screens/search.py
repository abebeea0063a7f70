"""The Search screen: events of every session that have the words searched for, best first.

Opened from the sessions screen (``F``); the search runs in a worker (`Journal.search`,
which catches the journal's search index up first: the first search of a large journal
takes a while, later ones only index what was appended since). Each hit is one line:
session, seq, type and a snippet; enter opens the session with its cursor on the hit's
seq. ``F`` here searches again, for other words.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Footer

from journal import InvalidInputError, SearchHit, query_parts

from ..keys import bind
from ..text import event_style, safe_text
from ..widgets.lines import LineList
from .base import JournalScreen, StatusLine
from .dialogs import PromptScreen

__all__ = ["HitsList", "SearchScreen", "ask_search"]

LIMIT = 200
"""The most hits a search shows."""


class HitsList(LineList):
    """Search hits, one per line: session, seq, type, snippet."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hits: list[SearchHit] = []
        self._widths = (0, 0)

    def show(self, hits: list[SearchHit]) -> None:
        """Show ``hits`` (best first)."""
        self.hits = hits
        self._widths = (
            max((len(hit.session_id) for hit in hits), default=0),
            max((len(str(hit.seq)) for hit in hits), default=0),
        )
        self.invalidate()
        self.set_line_count(len(hits))
        self.move_to(0)

    def render_row(self, index: int, width: int) -> Text:
        """The hit's session, seq, type and snippet (plain text from the journal)."""
        hit = self.hits[index]
        session, seq = self._widths
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        line.append(f"{safe_text(hit.session_id):<{session}}  ", style="bold")
        line.append(f"{hit.seq:>{seq}}  ", style="dim")
        line.append(f"{hit.type:<19} ", style=event_style(hit.type))
        line.append(safe_text(hit.snippet))
        return line


def ask_search(screen: JournalScreen, value: str = "", *, replace: bool = False) -> None:
    """Ask for words to search every session's events for, and show the hits.

    With ``replace`` the hits take the place of ``screen`` (a search from the hits).
    """

    def answered(query: str | None) -> None:
        if not query or not query.strip():
            return
        try:
            query_parts(query)
        except InvalidInputError as e:
            screen.japp.warn(str(e))
            return
        hits = SearchScreen(query.strip())
        if replace:
            screen.app.switch_screen(hits)
        else:
            screen.app.push_screen(hits)

    screen.app.push_screen(
        PromptScreen(
            "search events:", placeholder='words or "a phrase" (payloads too)', value=value
        ),
        answered,
    )


class SearchScreen(JournalScreen):
    """The hits of one search across sessions: enter opens a session at its hit."""

    DEFAULT_CSS = """
    SearchScreen HitsList { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("F", "search_again", "search", "search.events", title="search events", show=True),
    ]

    def __init__(self, query: str) -> None:
        super().__init__()
        self.query_text = query
        self.found: list[SearchHit] | None = None

    def compose(self) -> ComposeResult:
        """Status line, the hits, the footer."""
        yield StatusLine(id="status")
        yield HitsList(id="hits")
        yield Footer()

    @property
    def listing(self) -> HitsList:
        """The list of hits."""
        return self.query_one(HitsList)

    def on_mount(self) -> None:
        """Run the search."""
        self.listing.empty = "searching…"
        self.listing.focus()
        self.refresh_status()
        self.run_search()

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self) -> None:
        """Search the journal (a worker); the list shows the hits when in."""
        self.japp.hand_over(
            f"search {self.query_text}",
            lambda: self.journal.search(self.query_text, limit=LIMIT),
            self._show,
        )

    def _show(self, hits: list[SearchHit]) -> None:
        self.found = hits
        self.listing.empty = f"no event has: {self.query_text}"
        self.listing.show(hits)
        self.refresh_status()

    def refresh_status(self) -> None:
        """The query and how many hits."""
        count = "searching…" if self.found is None else f"{len(self.found)} hits"
        if self.found is not None and len(self.found) == LIMIT:
            count = f"the best {LIMIT} hits"
        self.query_one("#status", StatusLine).say(
            ("search ", "bold"), safe_text(self.query_text), f"  {count}"
        )

    @on(LineList.Chosen, "#hits")
    def _open(self, event: LineList.Chosen) -> None:
        from .session import SessionScreen

        hit = self.listing.hits[event.index]
        self.app.push_screen(SessionScreen(hit.session_id, at=hit.seq))

    def action_search_again(self) -> None:
        """Ask for other words."""
        ask_search(self, self.query_text, replace=True)
