"""`LineList`: a cursor over rows drawn on demand with the Line API.

A `ScrollView` that knows only how many rows there are. Textual asks it for the lines in
view (`render_line`); it asks its subclass for those rows alone (`render_row`, a rich
`Text`, never markup) and keeps the rendered strips in an LRU. Nothing is measured or
built per row up front, so a million rows cost what forty do. Keys move the cursor the
way less and vim do; a `Highlighted` message tells the screen where it is, and whether a
key or a click put it there. A list with no rows says why on its first lines (`empty`).
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.color import Color
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..keys import bind, motion_bindings

__all__ = ["LineList"]


class LineList(ScrollView, can_focus=True):
    """A scrolling list of rows with a cursor, rendered lazily line by line."""

    DEFAULT_CSS = """
    LineList {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    LineList > .lines--cursor {
        color: $block-cursor-blurred-foreground;
        background: $block-cursor-blurred-background;
        text-style: $block-cursor-blurred-text-style;
    }
    LineList:focus > .lines--cursor {
        color: $block-cursor-foreground;
        background: $block-cursor-background;
        text-style: $block-cursor-text-style;
    }
    LineList > .lines--empty {
        color: $text-muted;
        text-style: italic;
    }
    """
    """The cursor row takes the theme's block cursor (as OptionList and DataTable do): its
    colours are chosen to be read together, and override the row's own colours."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"lines--cursor", "lines--empty"}

    BINDINGS: ClassVar[list[BindingType]] = [
        *motion_bindings("go"),
        bind("enter", "choose", "open", "go.open", title="open the row"),
    ]

    class RowMessage(Message):
        """Something happened on row ``index`` of a list."""

        def __init__(self, lines: LineList, index: int) -> None:
            super().__init__()
            self.lines = lines
            self.index = index

        @property
        def control(self) -> LineList:
            """The list it happened in."""
            return self.lines

    class Highlighted(RowMessage):
        """The cursor moved to ``index``; ``by_user`` when a key or a click moved it."""

        def __init__(self, lines: LineList, index: int, *, by_user: bool) -> None:
            super().__init__(lines, index)
            self.by_user = by_user

    class Chosen(RowMessage):
        """Enter was pressed on ``index``."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._count = 0
        self.cursor = 0
        self._strips: LRUCache[tuple[int, int], Strip] = LRUCache(1024)
        self.painted = -1
        """The last row index drawn (the bench waits on it)."""
        self.empty = ""
        """What the first lines say while there are no rows (plain text)."""

    # -- what subclasses provide ------------------------------------------------------

    def render_row(self, index: int, width: int) -> Text:
        """The text of row ``index`` (built from untrusted data only as plain `Text`)."""
        raise NotImplementedError

    # -- size and cache ---------------------------------------------------------------

    @property
    def line_count(self) -> int:
        """How many rows there are."""
        return self._count

    def set_line_count(self, count: int) -> None:
        """Change how many rows there are (rows already drawn stay cached)."""
        self._count = max(count, 0)
        self.virtual_size = Size(0, self._count)
        if self.cursor >= self._count:
            self.cursor = max(self._count - 1, 0)
        self.refresh()

    def invalidate(self) -> None:
        """Forget every drawn row (their content changed) and redraw."""
        self._strips.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        """Styles changed (a theme): drawn rows are stale."""
        super().notify_style_update()
        self._strips.clear()

    def on_resize(self, event: events.Resize) -> None:
        """Keep the cursor in view when the list gets smaller."""
        self.scroll_to_cursor()

    def on_focus(self, event: events.Focus) -> None:
        """Redraw the cursor row in its focused colour."""
        self.refresh()

    def on_blur(self, event: events.Blur) -> None:
        """Redraw the cursor row in its unfocused colour."""
        self.refresh()

    # -- drawing ----------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        """Draw line ``y`` of the view: the row under it, from the cache or built now."""
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        empty = self.empty.split("\n") if not self._count and self.empty else []
        if index < len(empty) and width > 0:
            text = Text(empty[index], style=self.get_component_rich_style("lines--empty"))
            text.truncate(width, overflow="ellipsis", pad=True)
            return Strip(list(text.render(self.app.console)), width)
        if index >= self._count or width <= 0:
            return Strip.blank(width, base)
        self.painted = index
        if index == self.cursor:  # drawn fresh: its colour depends on the focus
            return self._build(index, width, base, selected=True)
        strip = self._strips.get((index, width))
        if strip is None:
            strip = self._strips[(index, width)] = self._build(index, width, base, selected=False)
        return strip

    def _build(self, index: int, width: int, base: Style, selected: bool) -> Strip:
        text = self.render_row(index, width)
        text.style = base
        text.no_wrap = True
        text.truncate(width, overflow="ellipsis", pad=True)
        if selected:
            text.stylize(self._cursor_style())
        return Strip(list(text.render(self.app.console)), width)

    def _cursor_style(self) -> Style:
        """The theme's cursor over the row's own styles, its text plain white or black.

        The background is the theme's block cursor blended over the list; the text is
        whichever of white and black reads better on it (the theme's text colour is
        translucent, and a few points short of a 4.5:1 contrast on its own primary).
        """
        cursor = self.get_component_rich_style("lines--cursor")
        if cursor.bgcolor is not None:
            background = Color.from_rich_color(cursor.bgcolor)
            cursor += Style(color=background.get_contrast_text(1.0).rich_color)
        return Style(dim=False) + cursor

    # -- the cursor -------------------------------------------------------------------

    def move_to(self, index: int, *, by_user: bool = False) -> None:
        """Put the cursor on ``index`` (clamped), scroll it into view, and say so.

        ``by_user``: a key or a click asked for it (not the program).
        """
        index = min(max(index, 0), max(self._count - 1, 0))
        previous, self.cursor = self.cursor, index
        self.refresh_line(previous)
        self.refresh_line(index)
        self.scroll_to_cursor()
        self.post_message(self.Highlighted(self, index, by_user=by_user))

    def scroll_to_cursor(self) -> None:
        """Scroll as little as needed for the cursor row to be in view."""
        height = max(self.scrollable_content_region.height, 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    @property
    def page_height(self) -> int:
        """Rows in view."""
        return max(self.scrollable_content_region.height, 1)

    def action_cursor_down(self) -> None:
        """Move to the next row."""
        self.move_to(self.cursor + 1, by_user=True)

    def action_cursor_up(self) -> None:
        """Move to the previous row."""
        self.move_to(self.cursor - 1, by_user=True)

    def action_first(self) -> None:
        """Move to the first row."""
        self.move_to(0, by_user=True)

    def action_last(self) -> None:
        """Move to the last row."""
        self.move_to(self._count - 1, by_user=True)

    def action_half_page_down(self) -> None:
        """Move half a page down."""
        self.move_to(self.cursor + self.page_height // 2, by_user=True)

    def action_half_page_up(self) -> None:
        """Move half a page up."""
        self.move_to(self.cursor - self.page_height // 2, by_user=True)

    def action_page_down(self) -> None:
        """Move a page down."""
        self.move_to(self.cursor + self.page_height, by_user=True)

    def action_page_up(self) -> None:
        """Move a page up."""
        self.move_to(self.cursor - self.page_height, by_user=True)

    def action_choose(self) -> None:
        """Open the row under the cursor."""
        if self._count:
            self.post_message(self.Chosen(self, self.cursor))

    def on_click(self, event: events.Click) -> None:
        """Put the cursor on the clicked row (a double click opens it)."""
        index = self.scroll_offset.y + event.y
        if 0 <= index < self._count:
            self.move_to(index, by_user=True)
            if event.chain == 2:
                self.action_choose()
