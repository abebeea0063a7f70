"""Scrolling panes that show one thing at a time: an event's JSON, a state, a diff row.

Everything shown is `Content` assembled from plain strings (never markup), and JSON is
pretty-printed by orjson (control characters in strings come out as escapes) and then
passed through `safe_text` line by line, so no payload can style, link or move the cursor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import orjson
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Static

from ..keys import motion_bindings
from ..render import safe_text

__all__ = [
    "MAX_JSON",
    "Pane",
    "Part",
    "change_lines",
    "fields_content",
    "json_content",
    "safe_lines",
    "short_json",
]

MAX_JSON = 64_000
"""Characters of pretty JSON shown in a pane (the rest is elided with a note)."""


def safe_lines(text: str) -> str:
    """`safe_text` line by line: newlines stay, every other control character is escaped."""
    return "\n".join(safe_text(line) for line in text.split("\n"))


def json_content(value: Any) -> Content:
    """Pretty, syntax-highlighted JSON of ``value``, made safe and cut at `MAX_JSON`."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    note = ""
    if len(text) > MAX_JSON:
        note = f"\n… {len(text) - MAX_JSON} more characters (agent-journal export has them all)"
        text = text[:MAX_JSON]
    content = highlight(safe_lines(text), language="json")
    return content + Content.styled(note, "italic $text-muted") if note else content


def short_json(value: Any, width: int = 60) -> str:
    """``value`` as one line of JSON, cut to ``width`` characters, safe to show."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return safe_text(text if len(text) <= width else text[: width - 1] + "…")


Part = str | tuple[str, str] | Content
"""A piece of a pane's text: plain text, (text, style), or content."""


def change_lines(changes: Iterable[tuple[str, Any, Any]], width: int = 40) -> list[Part]:
    """One line per changed field: ``path: before → after``, before in red, after in green."""
    parts: list[Part] = []
    for path, before, after in changes:
        parts += [
            f"  {safe_text(path)}: ",
            (short_json(before, width), "$text-error"),
            " → ",
            (short_json(after, width), "$text-success"),
            "\n",
        ]
    return parts


def fields_content(values: dict[str, Any], width: int = 60) -> list[Part]:
    """One line per field: ``name  value`` (the value as one line of JSON)."""
    size = max((len(name) for name in values), default=0)
    parts: list[Part] = []
    for name, value in values.items():
        parts += [
            (f"  {safe_text(name):<{size}}  ", "$text-primary"),
            f"{short_json(value, width)}\n",
        ]
    return parts


class Pane(VerticalScroll):
    """A focusable scrolling pane holding one `Content`; keys scroll it like less."""

    DEFAULT_CSS = """
    Pane {
        border: round $panel;
        border-title-color: $text-muted;
        padding: 0 1;
        height: 1fr;
        &:focus { border: round $accent; border-title-color: $text; }
        & > Static { width: 1fr; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [*motion_bindings("scroll")]

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = Content(title)
        self._body = Static(Content(""), expand=True)

    def compose(self) -> Any:
        """The one Static the pane scrolls."""
        yield self._body

    def show(self, content: Content, *, title: str | None = None) -> None:
        """Replace what the pane shows (and its title), and scroll back to the top."""
        self._body.update(content)
        if title is not None:
            self.border_title = Content(safe_text(title))
        self.scroll_home(animate=False)

    def action_cursor_down(self) -> None:
        """Scroll a line down."""
        self.scroll_down(animate=False)

    def action_cursor_up(self) -> None:
        """Scroll a line up."""
        self.scroll_up(animate=False)

    def action_first(self) -> None:
        """Scroll to the top."""
        self.scroll_home(animate=False)

    def action_last(self) -> None:
        """Scroll to the bottom."""
        self.scroll_end(animate=False)

    def action_half_page_down(self) -> None:
        """Scroll half a page down."""
        self.scroll_relative(y=self.scrollable_content_region.height // 2, animate=False)

    def action_half_page_up(self) -> None:
        """Scroll half a page up."""
        self.scroll_relative(y=-(self.scrollable_content_region.height // 2), animate=False)

    @property
    def shown(self) -> str:
        """The plain text the pane shows (for tests and the bench)."""
        content = self._body.content
        return content.plain if isinstance(content, Content) else str(content)
