"""`TimelineView`: one line per event of a session, read from the store as it is drawn.

Line ``i`` is seq ``i``, or with a type filter the ``i``-th matching seq (an array of
seqs built by a scan in a worker and grown as it goes). Failures, halts and repairs are
marked in colour and with a sign in the gutter, so they show in any terminal.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

from rich.text import Text

from ..source import RowSource
from ..text import event_style, safe_text
from .lines import LineList

__all__ = ["MARKS", "TimelineView"]

MARKS: dict[str, tuple[str, str]] = {
    "agent_halted": ("■", "bold red"),
    "verification_failed": ("✗", "red"),
    "action_failed": ("✗", "red"),
    "circuit_opened": ("!", "bold red"),
    "repair_applied": ("~", "yellow"),
    "fallback_invoked": ("↪", "yellow"),
    "context_compacted": ("≡", "yellow"),
    "agent_completed": ("✓", "green"),
}
"""The gutter sign and its style for the event types worth seeing at a glance."""

TYPE_WIDTH = 19
"""Cells of the type column (the longest type name)."""

SUMMARY_ROOM = 32
"""Cells the summary keeps before the time column gives way: at 80 columns the timeline
is 48 cells wide, and with the time its summaries would be cut to ten (``infrastru…``)."""

TIME_WIDTH = 13
"""Cells of the time column, ``HH:MM:SS.mmm`` and its space."""


class TimelineView(LineList):
    """The events of one session, one line each: gutter, seq, time, type, summary."""

    DEFAULT_CSS = """
    TimelineView { width: 1fr; }
    """

    def __init__(self, source: RowSource, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = source
        self.filter: array[int] | None = None
        self.filter_types: frozenset[str] = frozenset()
        self._seq_width = len(str(max(source.last_seq, 0)))
        self.set_line_count(source.last_seq + 1)

    # -- lines and seqs ---------------------------------------------------------------

    def seq_at(self, index: int) -> int:
        """The seq drawn on line ``index``."""
        if self.filter is None:
            return index
        return self.filter[index] if 0 <= index < len(self.filter) else -1

    def index_of(self, seq: int) -> int:
        """The line of ``seq``, or of the first seq after it that the filter keeps."""
        if self.filter is None:
            return min(max(seq, 0), max(self.source.last_seq, 0))
        return min(bisect_left(self.filter, seq), max(len(self.filter) - 1, 0))

    @property
    def seq(self) -> int:
        """The seq under the cursor (``-1`` when there is none)."""
        return self.seq_at(self.cursor) if self.line_count else -1

    def go_to_seq(self, seq: int) -> None:
        """Put the cursor on ``seq`` (or the nearest line the filter keeps after it)."""
        self.move_to(self.index_of(seq))

    # -- growing and filtering --------------------------------------------------------

    def grew(self) -> None:
        """The session grew (follow mode): show the new rows."""
        width = len(str(max(self.source.last_seq, 0)))
        if width != self._seq_width:
            self._seq_width = width
            self.invalidate()
        if self.filter is None:
            self.set_line_count(self.source.last_seq + 1)

    def set_filter(self, types: Iterable[str] | None) -> None:
        """Show only events of ``types`` (lines arrive through `extend_filter`); None: all."""
        self.filter = None if types is None else array("q")
        self.filter_types = frozenset(types or ())
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self.invalidate()
        self.set_line_count(self.source.last_seq + 1 if self.filter is None else 0)

    def extend_filter(self, seqs: Iterable[int]) -> None:
        """Add matching seqs (in ascending order) to the filtered view."""
        if self.filter is None:
            return
        self.filter.extend(seqs)
        self.set_line_count(len(self.filter))

    # -- drawing ----------------------------------------------------------------------

    def render_row(self, index: int, width: int) -> Text:
        """Gutter sign, seq, time, type and the one-line summary of line ``index``.

        The time is left out when with it the summary would have fewer than `SUMMARY_ROOM`
        cells (the event pane shows it): on a narrow terminal the summary says more.
        """
        row = self.source.row(self.seq_at(index))
        if row is None:
            return Text("…", style="dim")
        sign, sign_style = MARKS.get(row.type, (" ", ""))
        text = Text()
        text.append(sign, style=sign_style)
        prefix = 1 + 1 + self._seq_width + 1 + TIME_WIDTH + TYPE_WIDTH + 1
        time = f"{row.ts[11:23]} " if width - prefix >= SUMMARY_ROOM else ""
        text.append(f" {row.seq:>{self._seq_width}} {time}", style="dim")
        text.append(f"{row.type:<{TYPE_WIDTH}} ", style=event_style(row.type))
        text.append(safe_text(row.summary))
        return text
