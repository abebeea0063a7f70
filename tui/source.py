"""Rows of one session for the timeline, read lazily from the journal in keyset pages.

The timeline of a million-event session never holds the session: it asks for the rows it
is about to draw, `RowSource` reads the page of ``PAGE`` rows around them with one keyset
query (``start <= seq < stop`` through `Journal.stored_events`) and keeps the most recent
pages in an LRU. A row kept for drawing is light (seq, time, type, one-line summary);
the payload is read again, alone, when an event is opened. Counts come from the sessions
projection (``last_seq``), never from counting rows.

Scans (search, next failure, a type filter) walk the session page by page from a seq in
either direction, in a worker thread; they never touch the drawing cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from journal import Journal, JournalError, StoredEvent

__all__ = ["PAGE", "Row", "RowSource", "matches"]

PAGE = 128
"""Rows read per keyset query."""


@dataclass(frozen=True, slots=True)
class Row:
    """What the timeline draws for one event: no payload."""

    seq: int
    ts: str
    type: str
    summary: str


def matches(row: StoredEvent, needle: str) -> bool:
    """True when ``needle`` (lower case) is in the event's type, summary or payload."""
    return needle in row.type or needle in row.summary.lower() or needle in row.body.lower()


class RowSource:
    """Random access to the rows of one session, read in keyset pages and cached.

    Args:
        journal: where the session is.
        session_id: the session.
        page: rows per query.
        pages: pages kept in memory (the most recently drawn).
    """

    def __init__(
        self, journal: Journal, session_id: str, *, page: int = PAGE, pages: int = 64
    ) -> None:
        self.journal = journal
        self.session_id = session_id
        self.page = page
        self._pages: OrderedDict[int, list[Row]] = OrderedDict()
        self._max_pages = pages
        self._lock = threading.Lock()
        self.summary = journal.require(session_id)
        self.queries = 0
        """Keyset queries made for drawing (a test can see that drawing stays lazy)."""

    @property
    def last_seq(self) -> int:
        """The session's last seq, from its projection (``-1`` for none)."""
        return self.summary.last_seq

    def refresh(self) -> bool:
        """Re-read the session's summary; True when it grew (the tail page is dropped)."""
        summary = self.journal.require(self.session_id)
        grew = summary.last_seq != self.summary.last_seq
        if grew:
            with self._lock:
                stale = [key for key in self._pages if key >= self.summary.last_seq // self.page]
                for key in stale:
                    del self._pages[key]
        self.summary = summary
        return grew

    def row(self, seq: int) -> Row | None:
        """The row of ``seq`` (None outside the session)."""
        if seq < 0 or seq > self.last_seq:
            return None
        key = seq // self.page
        with self._lock:
            rows = self._pages.get(key)
            if rows is not None:
                self._pages.move_to_end(key)
        if rows is None:
            rows = self._read_page(key)
        offset = seq - key * self.page
        return rows[offset] if offset < len(rows) else None

    def _read_page(self, key: int) -> list[Row]:
        start = key * self.page
        try:
            rows = [
                Row(stored.seq, stored.ts, stored.type, stored.summary)
                for stored in self.journal.stored_events(
                    self.session_id, start=start, stop=start + self.page
                )
            ]
        except JournalError as e:  # a journal altered by someone else: say so in the rows
            stop = min(start + self.page, self.last_seq + 1)
            rows = [Row(seq, "", "unreadable", str(e)) for seq in range(start, stop)]
        with self._lock:
            self.queries += 1
            self._pages[key] = rows
            while len(self._pages) > self._max_pages:
                self._pages.popitem(last=False)
        return rows

    def stored(self, seq: int) -> StoredEvent | None:
        """The full stored row of ``seq`` (with its payload), read on its own."""
        return next(
            iter(self.journal.stored_events(self.session_id, start=seq, stop=seq + 1)), None
        )

    def scan(
        self,
        start: int,
        *,
        backward: bool = False,
        stop: int | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Iterator[StoredEvent]:
        """Yield stored rows from ``start`` (inclusive) onwards, or backwards, page by page.

        Forwards ends before ``stop`` (default: after the last seq); backwards ends at seq 0
        (or after ``stop``). ``cancelled`` is asked between pages, so a worker stops soon.
        """
        if backward:
            low = -1 if stop is None else max(stop, -1)  # a view with no line asks from -2
            upper = start + 1
            while upper > low + 1 and not cancelled():
                lower = max(low + 1, upper - self.page)
                page = list(self.journal.stored_events(self.session_id, start=lower, stop=upper))
                yield from reversed(page)
                upper = lower
            return
        end = self.last_seq + 1 if stop is None else stop
        cursor = max(start, 0)
        while cursor < end and not cancelled():
            page = list(
                self.journal.stored_events(
                    self.session_id, start=cursor, stop=min(end, cursor + self.page * 8)
                )
            )
            if not page:
                return
            yield from page
            cursor = page[-1].seq + 1
