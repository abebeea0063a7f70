"""The Session screen: the timeline, the selected event's JSON, and the state after it.

The timeline reads rows as it draws them (`RowSource`); the detail pane reads the one
selected payload; the state pane asks `replay.Timeline` (snapshots, never a refold from
zero) in a worker once the cursor rests. Search, next failure and the type filter scan
the session page by page in workers, so the screen answers keys while they run; the status
line says how far a search got. The state pane's title says at once when the state it shows
is not the selected event's (``state after seq 5 · folding seq 9…``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Footer
from textual.worker import Worker, get_current_worker

from journal import EVENT_TYPES, JournalError, SessionState, StoredEvent
from replay import StateChange, Timeline

from ..columns import failures
from ..keys import bind, command
from ..source import RowSource, matches
from ..text import FAILURE_TYPES, STATUS_STYLE, safe_text, tidy_floats
from ..widgets.lines import LineList
from ..widgets.panes import Pane, Part, change_lines, fields_content, json_content
from ..widgets.timeline import TimelineView
from .base import SearchingScreen, StatusLine
from .dialogs import PromptScreen

__all__ = ["STATE_DELAY", "SessionScreen", "parse_types", "state_content"]

STATE_DELAY = 0.12
"""Seconds the cursor rests before the state after it is folded."""

SCAN_REPORT = 8192
"""Events between two progress reports of a search or a failure scan (a million events
scan in about 6 s: some 20 reports a second)."""


def parse_types(answer: str) -> frozenset[str]:
    """Event types from a filter answer: names separated by commas or spaces.

    ``failures`` stands for every failure type. Raises ValueError naming an unknown type.
    """
    chosen: set[str] = set()
    for word in answer.replace(",", " ").split():
        if word == "failures":
            chosen |= FAILURE_TYPES
        elif word in EVENT_TYPES:
            chosen.add(word)
        else:
            raise ValueError(f"unknown event type {word!r}")
    return frozenset(chosen)


class SessionScreen(SearchingScreen):
    """One session: timeline on the left, event detail and state on the right."""

    DEFAULT_CSS = """
    SessionScreen #panes { width: 2fr; }
    SessionScreen TimelineView { width: 3fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("f", "filter", "filter", "filter.type", title="by event type", show=True),
        bind("colon", "go_to_seq", "seq", "go.seq", title="go to a seq", show=True),
        bind("e", "next_failure", "failure", "go.next-failure", title="next failure", show=True),
        bind("E", "previous_failure", "previous failure", "go.previous-failure"),
        bind("F", "follow", "follow", "view.follow", title="follow new events (toggle)"),
        bind("r", "replay", "replay", "replay.run", title="replay the session now", show=True),
        bind("d", "diff", "diff", "replay.diff", title="diff with a saved replay", show=True),
    ]

    SEARCH_HINT = "text in the type, summary or payload"

    def __init__(self, session_id: str, *, at: int | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.at = at
        """The seq the cursor starts on (None: the first event)."""
        self.source: RowSource | None = None
        self.following = False
        self._state_timer: Timer | None = None
        self._state_wanted = -1
        self._fold_lock = threading.Lock()
        self._timeline_state: Timeline | None = None
        self._keep_seq = -1
        self._user_at_end = False
        self._state_shown = -1
        self._scan_generation = 0
        self.scanning: str | None = None
        """What a running scan has done so far (shown in the status line), or None."""
        self._filter_generation = 0
        self._filtered_until = -1
        self._filter_worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        """Status line; timeline | (detail over state); footer."""
        self.source = RowSource(self.journal, self.session_id)
        yield StatusLine(id="status")
        with Horizontal():
            yield TimelineView(self.source, id="timeline")
            with Vertical(id="panes"):
                yield Pane("event", id="detail")
                yield Pane("state", id="state")
        yield Footer()

    @property
    def timeline(self) -> TimelineView:
        """The timeline widget."""
        return self.query_one(TimelineView)

    def on_mount(self) -> None:
        """Focus the timeline and show the first event (or the one at `at`)."""
        self._timeline_state = Timeline(self.journal, self.session_id)
        self.timeline.focus()
        if self.at is not None:
            self.timeline.go_to_seq(self.at)
        self._selected(self.timeline.seq)

    # -- status, detail and state -----------------------------------------------------

    def refresh_status(self) -> None:
        """Session, status, where the cursor is, filter, search and follow mode."""
        assert self.source is not None
        summary = self.source.summary
        view = self.timeline
        parts: list[str | tuple[str, str]] = [
            (f"{safe_text(self.session_id)}  ", "bold"),
            (summary.status, STATUS_STYLE.get(summary.status, "")),
            f"  seq {max(view.seq, 0)} of {summary.last_seq}",
            f"  steps {summary.steps}  fail {failures(summary)}",  # as the sessions list
        ]
        if summary.halt_rule:
            parts.append((f"  halt: {safe_text(summary.halt_rule)}", "$text-error"))
        if view.filter is not None:
            types = ",".join(sorted(view.filter_types))
            parts.append((f"  filter: {types} ({len(view.filter)} shown)", "$text-warning"))
        if self.search:
            parts.append(f"  /{safe_text(self.search)}")
        if self.scanning is not None:
            parts.append((f"  {self.scanning}", "$text-accent"))
        if self.following:
            parts.append(("  following", "$text-success"))
        self.query_one("#status", StatusLine).say(*parts)

    @on(LineList.Highlighted, "#timeline")
    def _highlighted(self, event: LineList.Highlighted) -> None:
        if event.by_user:  # the user went somewhere: a filter scan must not take them back
            self._keep_seq = -1
            self._user_at_end = event.index >= self.timeline.line_count - 1
        self._selected(self.timeline.seq_at(event.index))

    def _selected(self, seq: int) -> None:
        self.refresh_status()
        self._show_detail(seq)
        self._state_wanted = seq
        if self._state_timer is not None:
            self._state_timer.stop()
        if seq < 0:
            return
        if seq != self._state_shown:  # say at once that the state shown is not this one's
            shown = "state" if self._state_shown < 0 else f"state after seq {self._state_shown}"
            self.query_one("#state", Pane).retitle(f"{shown} · folding seq {seq}…")
        if self.japp.state_delay > 0:
            self._state_timer = self.set_timer(
                self.japp.state_delay, partial(self._load_state, seq)
            )
        else:
            self._load_state(seq)

    def _show_detail(self, seq: int) -> None:
        assert self.source is not None
        pane = self.query_one("#detail", Pane)
        try:
            stored = self.source.stored(seq) if seq >= 0 else None
            record = None if stored is None else stored.record()
        except JournalError as e:  # a journal altered by someone else: say what is wrong
            pane.show(Content(safe_text(str(e))), title=f"event {seq} · unreadable")
            return
        if stored is None or record is None:
            pane.show(Content("no event"), title="event")
            return
        pane.show(json_content(record), title=f"event {seq} · {stored.type}")

    @work(thread=True, exclusive=True, group="state", exit_on_error=False)
    def _load_state(self, seq: int) -> None:
        """Fold the state after ``seq`` (and before it) from snapshots, in a worker."""
        with self._fold_lock:  # one fold at a time; a stale request is dropped
            if seq != self._state_wanted or self._timeline_state is None:
                return
            timeline = self._timeline_state

            def fold() -> Content:
                return state_content(seq, timeline.state_at(seq), timeline.changes_at(seq))

            self.japp.hand_over(f"state after seq {seq}", fold, partial(self._show_state, seq))

    def _show_state(self, seq: int, content: Content) -> None:
        if seq == self._state_wanted:
            self._state_shown = seq
            self.query_one("#state", Pane).show(content, title=f"state after seq {seq}")

    # -- live -------------------------------------------------------------------------

    def journal_changed(self, sessions: dict[str, int]) -> None:
        """Show new events of this session; move along with them when following."""
        if self.session_id not in sessions or self.source is None:
            return
        view = self.timeline
        at_end = view.cursor >= view.line_count - 1
        if not self.source.refresh():
            return
        view.grew()
        if view.filter is not None:
            self._scan_filter()
        if self.following or at_end:
            view.move_to(view.line_count - 1)
        self.refresh_status()

    def action_follow(self) -> None:
        """Toggle follow mode: the cursor stays on the newest event as events arrive."""
        self.following = not self.following
        if self.following:
            self.timeline.move_to(self.timeline.line_count - 1)
        self.refresh_status()

    @on(LineList.Chosen, "#timeline")
    def _chosen(self) -> None:
        self.query_one("#detail", Pane).focus()

    def action_go_to_seq(self) -> None:
        """Ask for a seq and go to it (with a filter, to the first shown at or after it)."""
        self.app.push_screen(
            PromptScreen(":", placeholder=f"seq, 0 to {self.timeline.source.last_seq}"),
            self._seq_answered,
        )

    def _seq_answered(self, answer: str | None) -> None:
        if not answer:
            return
        try:
            seq = int(answer)
        except ValueError:
            self.japp.warn(f"not a seq: {answer}")
            return
        self.timeline.go_to_seq(seq)

    # -- scanning: search, failures -----------------------------------------------------

    def find(self, needle: str, *, backward: bool) -> None:
        """Go to the next (or previous) event with ``needle`` in its type, summary or payload."""
        self._scan(partial(matches, needle=needle), f"not found: {needle}", backward, True)

    def action_next_failure(self) -> None:
        """Go to the next failure, rejection or halt."""
        self._scan(_is_failure, "no failure after this event", False, False)

    def action_previous_failure(self) -> None:
        """Go to the previous failure, rejection or halt."""
        self._scan(_is_failure, "no failure before this event", True, False)

    def _scan(
        self, wanted: Callable[[StoredEvent], bool], missing: str, backward: bool, wrap: bool
    ) -> None:
        view = self.timeline
        start = view.seq + (-1 if backward else 1)
        self._scan_generation += 1
        self._scan_progress(self._scan_generation, 0)
        self._scan_worker(
            self._scan_generation, wanted, start, backward, wrap, view.filter_types, missing
        )

    def _scan_progress(self, generation: int, scanned: int | None) -> None:
        """Show how far scan ``generation`` got (None: it ended)."""
        if generation != self._scan_generation:
            return
        assert self.source is not None
        total = self.source.last_seq + 1
        self.scanning = None if scanned is None else f"searching… {scanned:,} of {total:,} events"
        self.refresh_status()

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def _scan_worker(
        self,
        generation: int,
        wanted: Callable[[StoredEvent], bool],
        start: int,
        backward: bool,
        wrap: bool,
        types: frozenset[str],
        missing: str,
    ) -> None:
        """Walk the session from ``start`` for the first wanted event (a worker).

        Every `SCAN_REPORT` events it says how far it got; it says when it ends, too.
        """
        assert self.source is not None
        worker = get_current_worker()
        last = self.source.last_seq
        runs: list[tuple[int, int | None]] = [(start, None)]
        if wrap:
            runs.append((last, start) if backward else (0, start))
        scanned = 0
        try:
            for begin, stop in runs:
                rows = self.source.scan(
                    begin, backward=backward, stop=stop, cancelled=lambda: worker.is_cancelled
                )
                for row in rows:
                    scanned += 1
                    if scanned % SCAN_REPORT == 0:
                        self.from_thread(self._scan_progress, generation, scanned)
                    if (not types or row.type in types) and wanted(row):
                        self.from_thread(self.timeline.go_to_seq, row.seq)
                        return
        except Exception as error:  # shown, never a crash
            self.from_thread(self.japp.report, "scanning the session", error)
            return
        finally:
            self.from_thread(self._scan_progress, generation, None)
        if not worker.is_cancelled:
            self.from_thread(self.japp.warn, missing)

    # -- the type filter ----------------------------------------------------------------

    def action_filter(self) -> None:
        """Ask for event types to show (empty shows every event)."""
        view = self.timeline
        self.app.push_screen(
            PromptScreen(
                "filter types:",
                value=",".join(sorted(view.filter_types)),
                placeholder="e.g. action_failed,agent_halted or failures (empty shows all)",
                suggestions=["failures", *EVENT_TYPES],
            ),
            self._filter_answered,
        )

    def _filter_answered(self, answer: str | None) -> None:
        if answer is None:
            return
        try:
            types = parse_types(answer)
        except ValueError as error:
            self.japp.warn(f"{error}: known types are {', '.join(EVENT_TYPES)}")
            return
        self.set_type_filter(types or None)

    def set_type_filter(self, types: Iterable[str] | None) -> None:
        """Show only events of ``types`` (None: every event), keeping the selected event."""
        view = self.timeline
        keep = view.seq
        self._user_at_end = False
        self._filter_generation += 1
        self._filtered_until = -1
        if self._filter_worker is not None:
            self._filter_worker.cancel()
            self._filter_worker = None
        view.set_filter(None if types is None else sorted(types))
        if types is None:
            view.go_to_seq(keep)
        else:
            self._keep_seq = keep
            self._scan_filter()
        self.refresh_status()

    def _scan_filter(self) -> None:
        assert self.source is not None
        running = self._filter_worker is not None and not self._filter_worker.is_finished
        start, stop = self._filtered_until + 1, self.source.last_seq + 1
        if running or start >= stop:
            return
        view = self.timeline
        self._filter_worker = self._filter_scan(
            self._filter_generation, view.filter_types, start, stop
        )

    @work(thread=True, group="filter", exit_on_error=False)
    def _filter_scan(self, generation: int, types: frozenset[str], start: int, stop: int) -> None:
        """Collect the seqs of ``types`` in ``start..stop`` into the view, in batches."""
        assert self.source is not None
        worker = get_current_worker()
        batch: list[int] = []
        try:
            for row in self.source.scan(start, stop=stop, cancelled=lambda: worker.is_cancelled):
                if row.type in types:
                    batch.append(row.seq)
                if len(batch) >= 2048:
                    self.from_thread(self._filter_batch, generation, batch, None)
                    batch = []
        except Exception as error:  # shown, never a crash
            self.from_thread(self.japp.report, "filtering the session", error)
            return
        if not worker.is_cancelled:
            self.from_thread(self._filter_batch, generation, batch, stop - 1)

    def _filter_batch(self, generation: int, seqs: list[int], done_until: int | None) -> None:
        if generation != self._filter_generation:
            return
        view = self.timeline
        view.extend_filter(seqs)
        if self._user_at_end and self._keep_seq < 0:  # G while scanning: stay at the end
            view.move_to(view.line_count - 1)
        if done_until is not None:
            self._filtered_until = done_until
            self._filter_worker = None
            self._scan_filter()  # events that arrived meanwhile
            if self._keep_seq >= 0:
                view.go_to_seq(self._keep_seq)
                self._keep_seq = -1
        self.refresh_status()

    # -- replay and diff ----------------------------------------------------------------

    def action_replay(self) -> None:
        """Replay this session now (a worker), then offer the diff."""
        self.japp.start_replay(self.session_id)

    def action_diff(self) -> None:
        """Diff this session with a saved replay of it (or with its original)."""
        self.japp.open_replays(self.session_id)

    def extra_commands(self) -> Iterable[SystemCommand]:
        """Filter by each event type, by failures, or clear the filter."""
        yield command(
            "filter: failures",
            "only failures, rejections and halts",
            partial(self.set_type_filter, FAILURE_TYPES),
        )
        for name in EVENT_TYPES:
            yield command(
                f"filter: type {name}",
                "only events of this type",
                partial(self.set_type_filter, {name}),
            )
        yield command("filter: clear", "show every event", partial(self.set_type_filter, None))


def state_content(seq: int, after: SessionState, changes: list[StateChange]) -> Content:
    """What event ``seq`` changed, then every field of the state after it (built off the UI)."""
    parts: list[Part] = [(f"changed by seq {seq}:\n", "bold")]
    parts += change_lines(
        (change.path, tidy_floats(change.before), tidy_floats(change.after)) for change in changes
    )
    if not changes:
        parts.append(("  nothing\n", "italic $text-muted"))
    parts.append(("\nstate after it:\n", "bold"))
    parts += fields_content(tidy_floats(after.model_dump(mode="json")))
    return Content.assemble(*parts)


def _is_failure(row: StoredEvent) -> bool:
    return row.type in FAILURE_TYPES
