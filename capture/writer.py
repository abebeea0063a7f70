"""The background writer of grouped capture: the caller's thread queues, a thread commits.

With ``durability="grouped"`` (`Capture`'s default when it fails open) an event of captured
code is folded and redacted on the caller's thread and queued here; one thread per
`capture.output.Destination` takes what is queued, at most ``window`` seconds after the
first of it arrived (at once when a barrier waits), and writes each session's share as one
`Journal.append` (one transaction, each event keeping its own time), or to the spool when
the journal cannot take it, exactly as a synchronous write would.

Barriers (`GroupedWriter.flush`): a session's events are durable before a tool declared
with side effects runs, when the session ends (the end of an entry or ``with`` block,
`Recorder.close`), and at a clean exit of the interpreter (`atexit`). What a SIGKILL can
lose is what was queued since the last barrier and not yet written: at most ``window``
seconds of events plus one commit, never the call of a side-effect tool that started.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from journal import AgentEvent

__all__ = ["DEFAULT_WINDOW", "GroupedWriter", "QueuedOutput"]

log = logging.getLogger("capture")

DEFAULT_WINDOW = 0.05
"""Seconds queued events wait for company before they are written (the SIGKILL window)."""

Item = tuple[int, datetime, AgentEvent]
"""One event of a session: its seq, its time, the event."""


class QueuedOutput(Protocol):
    """Where a session's queued events go (`capture.output.SessionOutput`)."""

    def write_run(self, items: Sequence[Item]) -> object:
        """Write a run of the session's events, in one append (or to the spool)."""

    def refused(self, items: Sequence[Item], error: Exception) -> None:
        """The journal refused ``items``: keep them elsewhere, and say so."""


Queued = tuple[QueuedOutput, int, datetime, AgentEvent]


class GroupedWriter:
    """A thread that writes queued events in groups; see the module docstring.

    Args:
        window: seconds the first queued event waits for more before they are written.
    """

    def __init__(self, window: float = DEFAULT_WINDOW) -> None:
        if window < 0:
            raise ValueError(f"the grouping window must be 0 or more seconds, not {window}")
        self.window = window
        self._queue: list[Queued] = []
        self._changed = threading.Condition()
        self._queued = 0  # tickets: events queued so far, and written (or given up) so far
        self._done = 0
        self._urgent = 0  # the ticket a barrier waits for (0: none)
        self._thread: threading.Thread | None = None
        _LIVE.add(self)

    def put(self, output: QueuedOutput, seq: int, when: datetime, event: AgentEvent) -> int:
        """Queue one event; return its ticket (what `flush` waits for)."""
        with self._changed:
            self._queue.append((output, seq, when, event))
            self._queued += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agent-journal-writer", daemon=True
                )
                self._thread.start()
            if len(self._queue) == 1:
                self._changed.notify_all()
            return self._queued

    def flush(self, ticket: int | None = None) -> None:
        """Return once the event of ``ticket`` (default: every event queued) is written."""
        with self._changed:
            wanted = self._queued if ticket is None else ticket
            if self._done >= wanted:
                return
            self._urgent = max(self._urgent, wanted)
            self._changed.notify_all()
            while self._done < wanted:
                self._changed.wait()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue:
                    self._changed.wait()
                deadline = time.monotonic() + self.window
                while self._urgent <= self._done and (left := deadline - time.monotonic()) > 0:
                    self._changed.wait(left)
                batch, self._queue = self._queue, []
            try:
                self._write_batch(batch)
            finally:
                with self._changed:
                    self._done += len(batch)
                    self._changed.notify_all()

    def _write_batch(self, batch: Sequence[Queued]) -> None:
        """Each session's events of ``batch`` as one write, in the order they came."""
        runs: dict[int, tuple[QueuedOutput, list[Item]]] = {}
        for output, seq, when, event in batch:
            runs.setdefault(id(output), (output, []))[1].append((seq, when, event))
        for output, items in runs.values():
            try:
                output.write_run(items)
            except Exception as error:  # a refused write: keep the events in the spool
                output.refused(items, error)

    def _forget_in_child(self) -> None:
        """In a forked child: no thread, and the parent's queue is the parent's to write."""
        self._changed = threading.Condition()
        self._queue, self._thread, self._urgent = [], None, 0
        self._done = self._queued


_LIVE: weakref.WeakSet[GroupedWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_LIVE):
        writer._forget_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    """A clean exit writes what every writer still holds."""
    for writer in list(_LIVE):
        try:
            writer.flush()
        except Exception as error:  # never stop the interpreter's exit
            log.error("agent-journal: events not written at exit: %s", error)
