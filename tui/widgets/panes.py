"""Scrolling panes that show one thing at a time: an event's JSON, a state, a diff row.

Everything shown is `Content` assembled from plain strings (never markup), and JSON is
pretty-printed by orjson (control characters in strings come out as escapes) and then
passed through `safe_text` line by line, so no payload can style, link or move the cursor.

A line wider than the pane is folded with a hanging indent (`hang`): its continuation
lines start two cells right of where its text starts, never at column 0, so a long value
stays under its key. Values are shown whole up to `MAX_VALUE` characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import orjson
from rich.cells import cell_len, get_character_cell_size
from textual import events
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Static

from ..keys import motion_bindings
from ..text import safe_text, short_json

__all__ = [
    "MAX_JSON",
    "MAX_VALUE",
    "Pane",
    "Part",
    "change_lines",
    "fields_content",
    "hang",
    "json_content",
    "safe_lines",
]

MAX_JSON = 64_000
"""Characters of pretty JSON shown in a pane (the rest is elided with a note)."""

MAX_VALUE = 4_000
"""Characters of one value shown on a field or change line (longer ones end in …)."""


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


Part = str | tuple[str, str] | Content
"""A piece of a pane's text: plain text, (text, style), or content."""


def change_lines(changes: Iterable[tuple[str, Any, Any]], width: int = MAX_VALUE) -> list[Part]:
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


def fields_content(values: dict[str, Any], width: int = MAX_VALUE) -> list[Part]:
    """One line per field: ``name  value`` (the value as one line of JSON)."""
    size = max((len(name) for name in values), default=0)
    parts: list[Part] = []
    for name, value in values.items():
        parts += [
            (f"  {safe_text(name):<{size}}  ", "$text-primary"),
            f"{short_json(value, width)}\n",
        ]
    return parts


def hang(content: Content, width: int) -> Content:
    """Fold the lines of ``content`` wider than ``width`` cells, with a hanging indent.

    A continuation starts two cells right of where its line's text starts (at most half
    the width in), so a long value never runs back to column 0. Folds fall after a space
    (the space stays at the end of its line, so a JSON string is shown exactly, spaces
    included), and inside a word only when the word is wider than a line.
    """
    if width <= 0:
        return content
    lines: list[Content] = []
    for line in content.split(allow_blank=True):
        if line.cell_length <= width:
            lines.append(line)
            continue
        text = line.plain
        indent = min(len(text) - len(text.lstrip(" ")) + 2, width // 2)
        pieces = line.divide(fold_points(text, width, indent))
        lines.append(pieces[0])
        lines += [piece.pad_left(indent) for piece in pieces[1:]]
    return Content("\n").join(lines)


def fold_points(text: str, width: int, indent: int) -> list[int]:
    """Where `hang` folds ``text``: offsets after a space where one fits, else at a cell.

    The first line has ``width`` cells, each continuation ``width - indent``; the spaces of
    the line's own indentation are no place to fold, nor a space before a word no line
    could hold (it is cut where the line ends).
    """
    start = len(text) - len(text.lstrip(" "))
    cuts: list[int] = []
    piece, used, limit, space, offset = 0, 0, width, -1, 0
    while offset < len(text):
        character = text[offset]
        size = get_character_cell_size(character)
        if used + size > limit and used:
            fold = space > piece and _fits(text, space, width - indent)
            piece = space if fold else offset
            cuts.append(piece)
            offset, used, limit, space = piece, 0, width - indent, -1  # the rest, from there
            continue
        used += size
        if character == " " and offset >= start:
            space = offset + 1
        offset += 1
    return cuts


def _fits(text: str, at: int, width: int) -> bool:
    """Whether the word starting at ``at`` fits in ``width`` cells."""
    end = text.find(" ", at)
    return cell_len(text[at : len(text) if end < 0 else end]) <= width


class Pane(VerticalScroll):
    """A focusable scrolling pane holding one `Content`; keys scroll it like less.

    What it shows is folded to its width (`hang`) again whenever its size changes.
    """

    DEFAULT_CSS = """
    Pane {
        border: round $panel;
        border-title-color: $text-muted;
        padding: 0 1;
        height: 1fr;
        scrollbar-gutter: stable;
        &:focus { border: round $accent; border-title-color: $text; }
        & > Static { width: 1fr; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [*motion_bindings("scroll")]

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = Content(title)
        self._body = Static(Content(""), expand=True)
        self._content = Content("")
        self._folded_at = -1

    def compose(self) -> Any:
        """The one Static the pane scrolls."""
        yield self._body

    def show(self, content: Content, *, title: str | None = None) -> None:
        """Replace what the pane shows (and its title), and scroll back to the top."""
        self._content = content
        self._fold(force=True)
        if title is not None:
            self.retitle(title)
        self.scroll_home(animate=False)

    def retitle(self, title: str) -> None:
        """Change the pane's title (plain text)."""
        self.border_title = Content(safe_text(title))

    def on_resize(self, event: events.Resize) -> None:
        """Fold the content again to the new width."""
        self._fold()

    def _fold(self, *, force: bool = False) -> None:
        width = self.scrollable_content_region.width
        if force or width != self._folded_at:
            self._folded_at = width
            self._body.update(hang(self._content, width))

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
        """The plain text the pane shows, before folding (for tests and the bench)."""
        return self._content.plain
