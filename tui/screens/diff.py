"""The Diff screen: two runs side by side, aligned by `replay.diff`, differences marked.

Both sessions are read and aligned in a worker (`diff_records`: common prefix and suffix
trimmed, the middle aligned by content in windows, deepdiff only on pairs that differ);
payloads are decoded lazily, once for the fingerprints and again only for changed pairs.
``]`` and ``[`` jump between differences; the pane below shows what differs in a row.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any, ClassVar, overload

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import Footer

from journal import StoredEvent, decode
from replay import DiffResult, DiffRow, diff_records, record_of

from ..keys import bind
from ..text import event_style, safe_text
from ..widgets.lines import LineList
from ..widgets.panes import Pane, Part, change_lines, json_content
from .base import JournalScreen, StatusLine

__all__ = ["KINDS", "DiffScreen", "DiffView", "LazyRecords"]

KINDS: dict[str, tuple[str, str]] = {
    "equal": (" ", ""),
    "changed": ("~", "yellow"),
    "removed": ("-", "red"),
    "inserted": ("+", "green"),
}
"""Row kind -> gutter sign and style."""


class LazyRecords(Sequence[dict[str, Any]]):
    """Stored rows seen as flat records, each decoded when it is asked for.

    Decoded and upcast as replay reads them (`replay.record_of`), so the diff view and
    ``replay`` judge a pair of sessions alike.
    """

    def __init__(self, rows: Sequence[StoredEvent]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self._record(row) for row in self.rows[index]]
        return self._record(self.rows[index])

    @staticmethod
    def _record(row: StoredEvent) -> dict[str, Any]:
        return record_of(decode(row))


class DiffView(LineList):
    """Aligned rows of two runs: sign, then each side's seq, type and summary."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.result: DiffResult | None = None
        self.a: Sequence[StoredEvent] = ()
        self.b: Sequence[StoredEvent] = ()
        self.differences: list[int] = []

    def show(self, result: DiffResult, a: Sequence[StoredEvent], b: Sequence[StoredEvent]) -> None:
        """Show an aligned diff of the rows ``a`` and ``b``."""
        self.result, self.a, self.b = result, a, b
        self.differences = [i for i, row in enumerate(result.rows) if row.kind != "equal"]
        self.invalidate()
        self.set_line_count(len(result.rows))

    def row(self, index: int) -> DiffRow | None:
        """The aligned row at ``index``."""
        if self.result is None or not 0 <= index < len(self.result.rows):
            return None
        return self.result.rows[index]

    def render_row(self, index: int, width: int) -> Text:
        """Sign, then the left and the right event, each in half the width."""
        row = self.row(index)
        if row is None:
            return Text()
        sign, style = KINDS[row.kind]
        half = max((width - 3) // 2, 1)
        text = Text(sign, style=style)
        text.append(" ")
        text.append_text(_side(self.a, row.a, half, style if row.kind != "inserted" else ""))
        text.append("│", style="dim")
        text.append_text(_side(self.b, row.b, half, style if row.kind != "removed" else ""))
        return text

    def next_difference(self) -> int | None:
        """The index of the first difference after the cursor."""
        at = bisect_right(self.differences, self.cursor)
        return self.differences[at] if at < len(self.differences) else None

    def previous_difference(self) -> int | None:
        """The index of the last difference before the cursor."""
        at = bisect_left(self.differences, self.cursor)
        return self.differences[at - 1] if at > 0 else None


def _side(rows: Sequence[StoredEvent], index: int | None, width: int, style: str) -> Text:
    if index is None:
        return Text(" " * width)
    row = rows[index]
    text = Text(f"{row.seq:>4} ", style="dim")
    text.append(f"{row.type:<19} ", style=style or event_style(row.type))
    text.append(safe_text(row.summary), style=style)
    text.truncate(width, overflow="ellipsis", pad=True)
    return text


class DiffScreen(JournalScreen):
    """Two sessions aligned side by side; ``]``/``[`` jump between differences."""

    DEFAULT_CSS = """
    DiffScreen #sides { height: 1; background: $surface; }
    DiffScreen #sides StatusLine { width: 1fr; background: $surface; }
    DiffScreen DiffView { height: 2fr; }
    DiffScreen Pane { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("right_square_bracket", "next_difference", "next diff", "diff.next", show=True),
        bind(
            "left_square_bracket",
            "previous_difference",
            "previous diff",
            "diff.previous",
            show=True,
        ),
    ]

    def __init__(self, a: str, b: str) -> None:
        super().__init__()
        self.a = a
        self.b = b

    def compose(self) -> ComposeResult:
        """Status line, side titles, the aligned rows, the pane of changes, the footer."""
        yield StatusLine(id="status")
        with Horizontal(id="sides"):
            yield StatusLine(Content(f"A: {safe_text(self.a)}"), id="side-a")
            yield StatusLine(Content(f"B: {safe_text(self.b)}"), id="side-b")
        yield DiffView(id="rows")
        yield Pane("differences", id="changes")
        yield Footer()

    @property
    def view(self) -> DiffView:
        """The aligned rows."""
        return self.query_one(DiffView)

    def on_mount(self) -> None:
        """Align the two runs in a worker."""
        self.view.focus()
        self.query_one("#status", StatusLine).say(("aligning…", "italic"))
        self.compare()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def compare(self) -> None:
        """Read both sessions and align them (a worker)."""

        def align() -> tuple[DiffResult, list[StoredEvent], list[StoredEvent]]:
            rows_a = list(self.journal.stored_events(self.a))
            rows_b = list(self.journal.stored_events(self.b))
            return diff_records(LazyRecords(rows_a), LazyRecords(rows_b)), rows_a, rows_b

        self.japp.hand_over(f"diff of {self.a} and {self.b}", align, self._compared)

    def _compared(self, found: tuple[DiffResult, list[StoredEvent], list[StoredEvent]]) -> None:
        result, rows_a, rows_b = found
        view = self.view
        view.show(result, rows_a, rows_b)
        verdict: str | tuple[str, str] = (
            ("identical (volatile fields ignored)", "$text-success")
            if result.identical
            else (f"{result.differences} difference(s)", "$text-warning")
        )
        self.query_one("#status", StatusLine).say(
            (f"A {safe_text(self.a)} ({result.a_count} events)", "bold"),
            "  vs  ",
            (f"B {safe_text(self.b)} ({result.b_count} events)", "bold"),
            "  ",
            verdict,
        )
        first = result.first_difference()
        view.move_to(result.rows.index(first) if first is not None else 0)

    @on(LineList.Highlighted, "#rows")
    def _highlighted(self, event: LineList.Highlighted) -> None:
        row = self.view.row(event.index)
        if row is not None:
            self._show_row(row)

    def _show_row(self, row: DiffRow) -> None:
        view = self.view
        records_a, records_b = LazyRecords(view.a), LazyRecords(view.b)
        where = " ↔ ".join(
            f"{side} seq {view_rows[index].seq}"
            for side, view_rows, index in (("A", view.a, row.a), ("B", view.b, row.b))
            if index is not None
        )
        parts: list[Part] = [(f"{row.kind}: {where}\n", "bold")]
        parts += change_lines((f"{c.path} ({c.kind})", c.expected, c.actual) for c in row.changes)
        shown = row.a if row.a is not None else row.b
        if row.kind != "changed" and shown is not None:
            record = (records_a if row.a is not None else records_b)[shown]
            parts.append(json_content(record))
        self.query_one("#changes", Pane).show(Content.assemble(*parts), title=f"row {row.kind}")

    def action_next_difference(self) -> None:
        """Go to the next difference."""
        self._jump(self.view.next_difference(), "no difference after this row")

    def action_previous_difference(self) -> None:
        """Go to the previous difference."""
        self._jump(self.view.previous_difference(), "no difference before this row")

    def _jump(self, index: int | None, missing: str) -> None:
        if index is None:
            self.japp.warn(missing)
        else:
            self.view.move_to(index)
