"""What the app's screens share: pane keys, a status line, palette commands, live updates."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, cast

from textual.app import SystemCommand
from textual.binding import BindingType
from textual.content import Content
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Static

from ..keys import bind, declared_bindings

if TYPE_CHECKING:
    from journal import Journal

    from ..app import JournalApp

__all__ = ["JournalScreen", "StatusLine"]


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
    def japp(self) -> JournalApp:
        """The app, typed."""
        return cast("JournalApp", self.app)

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
