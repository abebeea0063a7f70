"""What the app's screens share: pane keys, a status line, palette commands, live updates."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Protocol, TypeVar, cast

from textual.app import SystemCommand
from textual.binding import BindingType
from textual.content import Content
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Static

from journal import Journal

from ..keys import bind, declared_bindings

__all__ = ["JournalScreen", "ScreenHost", "SearchingScreen", "StatusLine"]

T = TypeVar("T")


class ScreenHost(Protocol):
    """What the screens ask of the app that shows them (`tui.app.JournalApp` is one).

    The screens know the app only by this: the app builds them, never the other way.
    """

    journal: Journal
    state_delay: float
    """Seconds the cursor rests on an event before the state after it is shown."""

    @property
    def journal_name(self) -> str:
        """The journal's file name, or its URL (without a password)."""
        ...

    def from_thread(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the UI thread from a worker (nothing once closing)."""
        ...

    def hand_over(self, what: str, work: Callable[[], T], done: Callable[[T], object]) -> None:
        """In a worker: run ``work()``, then ``done(result)`` on the UI thread."""
        ...

    def report(self, what: str, error: BaseException) -> None:
        """Show an error of background work as a notification."""
        ...

    def warn(self, message: str) -> None:
        """Show a one-line warning."""
        ...

    def start_replay(self, session_id: str, agent: str | None = None) -> None:
        """Replay ``session_id`` with the current code, then offer the diff."""
        ...

    def open_replays(self, session_id: str) -> None:
        """Show the replays of ``session_id`` (or diff the one there is)."""
        ...


class StatusLine(Static):
    """One line at the top of a screen saying what is shown (plain text, never markup)."""

    DEFAULT_CSS = """
    StatusLine { height: 1; width: 1fr; background: $panel; color: $text; padding: 0 1; }
    """

    def say(self, *parts: str | tuple[str, str]) -> None:
        """Show ``parts`` (strings, or (text, style) pairs)."""
        self.update(Content.assemble(*parts))


class JournalScreen(Screen[None]):
    """A screen of the app: tab moves between its panes; the journal's news reaches it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("tab", "app.focus_next", "next pane", "pane.next"),
        bind("shift+tab", "app.focus_previous", "previous pane", "pane.previous"),
    ]

    @property
    def japp(self) -> ScreenHost:
        """The app, as the screens know it."""
        return cast(ScreenHost, self.app)

    @property
    def journal(self) -> Journal:
        """The journal the app reads."""
        return self.japp.journal

    def from_thread(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the UI thread (from a worker); nothing once closing."""
        self.japp.from_thread(callback, *args)

    def journal_changed(self, sessions: dict[str, int]) -> None:
        """New events arrived: ``sessions`` maps each session written to its last new seq."""

    def palette_nodes(self) -> Iterator[DOMNode]:
        """The screen and every widget on it that has keys (for the palette and the help)."""
        yield self
        for widget in self.query("*"):
            if next(declared_bindings(widget), None) is not None:
                yield widget

    def extra_commands(self) -> Iterable[SystemCommand]:
        """Palette commands that have no key (sort by a column, filter by one value)."""
        return ()

    def refresh_status(self) -> None:
        """Redraw the status line (what is shown, filters, search)."""


class SearchingScreen(JournalScreen):
    """A screen with less's search: ``/`` asks, ``n`` and ``N`` go to the next and previous."""

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("slash", "search", "search", "search.forward", title="search for text", show=True),
        bind("n", "search_next", "next match", "search.next"),
        bind("N", "search_previous", "previous match", "search.previous"),
    ]

    SEARCH_HINT: ClassVar[str] = "text to find"
    """The prompt's placeholder: what the search looks at."""

    search: str | None = None
    """The last text searched for."""

    def find(self, needle: str, *, backward: bool) -> None:
        """Go to the next (or previous) match of ``needle`` (lower case)."""
        raise NotImplementedError

    def action_search(self) -> None:
        """Ask for a text and go to its next match."""
        from .dialogs import PromptScreen

        self.app.push_screen(PromptScreen("/", placeholder=self.SEARCH_HINT), self._searched)

    def _searched(self, term: str | None) -> None:
        if term:
            self.search = term
            self.refresh_status()
            self.action_search_next()

    def action_search_next(self) -> None:
        """Go to the next match (wrapping at the end)."""
        self._find(backward=False)

    def action_search_previous(self) -> None:
        """Go to the previous match (wrapping at the start)."""
        self._find(backward=True)

    def _find(self, *, backward: bool) -> None:
        if not self.search:
            self.japp.warn("no search yet: press /")
            return
        self.find(self.search.lower(), backward=backward)
