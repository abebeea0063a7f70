"""Where the events of captured code go: redacted, sampled, then the journal or the spool.

Capture of the user's own code (`Capture`, `Recorder`, `JournaledOpenAI`, the framework
integrations: everything that writes through a `Recorder`) writes through a `Destination`,
shared by the sessions of one capture; each session gets its own `SessionOutput`.

Two modes, said plainly:

* **fail open** (the default for captured code): when the journal cannot take a write
  (busy past ``busy_timeout``, a full disk, an unreachable PostgreSQL: a `StoreError` or
  an ``OSError``), that event and every later event of the session go to the local spool
  (`capture.spool`) and the user's call goes on. A log line (logger
  ``capture``, warning; at most one per ``spool.LOG_INTERVAL`` seconds and spool)
  names the session, the error and the spool's counts (`Spool.counts`). After a failure
  the journal is not tried again for ``retry_after`` seconds: new sessions go straight to
  the spool instead of each waiting out the bound.
  ``agent-journal drain`` moves spooled sessions into the journal, each whole or not at
  all. If the spool's own disk fails too, the events are counted as lost (`SpoolCounts`)
  and logged as an error: the user's call still goes on.
* **fail closed** (``fail_open=False``, and always for a replay): the journal's error
  propagates to the call that wrote. The project's own runtime (``agentloop``) does not
  write through here at all: a proposal is durable before its tool runs, or the run stops.

On the way, in this order:

1. **redaction** (``redactor``): each event is redacted by `journal.formats.Redactor`
   (stable, format-keeping placeholders per session) before anything is written or
   buffered, so nothing that matches a rule reaches the journal or the spool in clear.
   The session's own state (what the recorder folds) keeps the clear values.
2. **tail sampling** (``sampling``): the events wait in memory until the session ends;
   then a session that failed or halted (or that ``Sampling.keep`` says to keep) is
   written, and of the rest the share ``Sampling.share`` (decided from the session id, so
   the same id always gets the same answer). A session longer than
   ``Sampling.buffer_events`` is written from there on, whatever its end. A session that
   is never ended (no ``close``, no scope) stays in memory until it passes the bound.

When it is written (``durability``):

* **each** (always when failing closed): `SessionOutput.write` returns once the event's
  own `Journal.append` committed (or it is in the spool).
* **grouped** (`Capture`'s default when failing open): the event is queued for a
  `capture.writer.GroupedWriter`, which writes each session's queued events as one append
  (or to the spool) within ``window`` seconds; a session's events are durable before a
  tool declared with side effects runs, when it ends, and at a clean exit (that module says
  what a SIGKILL can lose).

Costs: a write without sampling is one `Journal.append` (each), or a share of one
(grouped); a sampled session kept is one `Journal.append` at its end; a spooled event is
one `Spool.append`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import JsonValue

from journal import (
    AgentEvent,
    AgentHalted,
    Journal,
    SessionState,
    StoreError,
    loads_exact,
    result_record,
    utc_now,
)
from journal.formats import Redactor

from .spool import Spool, spool_line, spool_path_for
from .writer import DEFAULT_WINDOW, GroupedWriter

__all__ = ["Destination", "Durability", "Sampling", "SessionOutput"]

log = logging.getLogger("capture")

UNAVAILABLE: tuple[type[BaseException], ...] = (StoreError, OSError)
"""What a journal raises when it cannot take a write (as opposed to a write it refuses)."""

Written = tuple[int, datetime, AgentEvent]
"""An event as a session writes it: its seq, its time, the (redacted) event."""

Durability = Literal["each", "grouped"]
"""When a captured event is written: in its own commit before the call goes on, or grouped
by a background writer up to the next barrier (see the module docstring)."""


@dataclass(frozen=True)
class Sampling:
    """Tail sampling: keep every session that fails or halts, and a share of the rest.

    Args:
        share: the part of the other sessions kept, from 0 to 1.
        keep: also keep a session this says to keep (its final state), e.g. one whose
            answer misses an expectation.
        buffer_events: the most events a session waits with in memory; past it, the
            session is written whole and kept.
    """

    share: float
    keep: Callable[[SessionState], bool] | None = None
    buffer_events: int = 1000

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise ValueError(f"sampling share must be between 0 and 1, not {self.share}")
        if self.buffer_events < 1:
            raise ValueError(f"buffer_events must be positive, not {self.buffer_events}")

    @property
    def rule(self) -> str:
        """The rule in words, as recorded in each session's metadata."""
        own = "" if self.keep is None else f", {getattr(self.keep, '__qualname__', 'keep')}"
        return f"failed, halted{own}; share of the rest"

    def record(self) -> dict[str, JsonValue]:
        """What a kept session's metadata says of how it was sampled (``sampling``)."""
        return {"share": self.share, "rule": self.rule}

    def keeps(self, session_id: str, state: SessionState) -> bool:
        """Whether a session that ended in ``state`` is written."""
        if state.status in ("failed", "halted"):
            return True
        if self.keep is not None and self.keep(state):
            return True
        draw = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:8], "big")
        return draw < self.share * 2**64


class Destination:
    """Where the sessions of one capture go; see the module docstring.

    Args:
        journal: a `Journal`, or where one is (a SQLite path or a ``postgresql://`` URL),
            opened at the first write with ``busy_timeout`` as its busy bound.
        fail_open: spool when the journal cannot take a write (else raise).
        spool: the spool file (default: beside a SQLite journal, ``agent-journal.spool``
            in the working directory for PostgreSQL; an in-memory journal has none, so
            it fails closed).
        redactor: redact every event before it is written or buffered.
        sampling: tail sampling (default: every session is written as it goes).
        busy_timeout: seconds a write waits for a busy journal it opened itself (a
            `Journal` given keeps its own bound: 5 s for SQLite by default).
        retry_after: seconds the journal is left alone after it failed (by every
            destination on the same journal object: recorders given one journal share it).
        durability: ``"each"`` (default) or ``"grouped"`` (see the module docstring); a
            destination that fails closed always writes each event before it returns.
        window: with ``"grouped"``, the seconds a queued event waits for others.
    """

    def __init__(
        self,
        journal: Journal | str | Path,
        *,
        fail_open: bool = True,
        spool: Spool | str | Path | None = None,
        redactor: Redactor | None = None,
        sampling: Sampling | None = None,
        busy_timeout: float = 0.25,
        retry_after: float = 1.0,
        durability: Durability = "each",
        window: float = DEFAULT_WINDOW,
    ) -> None:
        if durability not in ("each", "grouped"):
            raise ValueError(f"durability is 'each' or 'grouped', not {durability!r}")
        self._journal: Journal | None = None
        if isinstance(journal, str | Path):
            self.target = str(journal)
            self._health = _Health()
        else:  # a journal, or anything that stands for one
            self._journal, self.target = journal, journal.target
            self._health = _health_of(journal)
        self.redactor = redactor
        self.sampling = sampling
        self.busy_timeout = busy_timeout
        self.retry_after = retry_after
        self.spool: Spool | None = None
        if fail_open:
            where = spool if spool is not None else spool_path_for(self.target)
            if where is not None:
                self.spool = where if isinstance(where, Spool) else Spool.at(where)
        self._lock = threading.Lock()
        self.writer: GroupedWriter | None = None
        """The background writer (grouped durability, failing open); None: each event."""
        if durability == "grouped" and self.fail_open:
            self.writer = GroupedWriter(window)

    @property
    def durability(self) -> Durability:
        """When events are written: ``"grouped"`` by the background writer, or ``"each"``."""
        return "each" if self.writer is None else "grouped"

    @property
    def fail_open(self) -> bool:
        """Whether writes the journal cannot take go to the spool."""
        return self.spool is not None

    @property
    def journal(self) -> Journal:
        """The journal, opened on first use.

        Raises:
            StoreError: it cannot be opened.
        """
        journal = self._journal
        if journal is not None:  # opened: no lock to take
            return journal
        with self._lock:
            if self._journal is None:
                self._journal = _opened(self.target, self.busy_timeout)
            return self._journal

    @journal.setter
    def journal(self, journal: Journal) -> None:
        with self._lock:
            self._journal = journal
            self.target = journal.target
            self._health = _health_of(journal)

    @property
    def last_error(self) -> str | None:
        """The last error that sent a session to the spool (one line)."""
        return self._health.last_error

    def now(self) -> datetime:
        """The time of an event written now: the journal's clock when it is open."""
        return self._journal.now() if self._journal is not None else utc_now()

    def usable(self) -> Journal | None:
        """The journal, unless it failed less than ``retry_after`` seconds ago (fail open)."""
        if not self.fail_open:
            return self.journal
        down_until = self._health.down_until
        if down_until and time.monotonic() < down_until:  # 0: it never failed, no clock read
            return None
        try:
            return self.journal
        except UNAVAILABLE as error:
            self.failed(error)
            return None

    def failed(self, error: BaseException) -> None:
        """The journal could not take a write: leave it alone for ``retry_after`` seconds."""
        self._health.down_until = time.monotonic() + self.retry_after
        self._health.last_error = f"{type(error).__name__}: {error}"

    def session(self, session_id: str) -> SessionOutput:
        """The output of one session."""
        return SessionOutput(self, session_id)


@dataclass
class _Health:
    """Whether a journal failed lately: shared by the destinations of one journal object."""

    down_until: float = 0.0
    last_error: str | None = None


_HEALTH: weakref.WeakKeyDictionary[Any, _Health] = weakref.WeakKeyDictionary()
_HEALTH_LOCK = threading.Lock()


def _health_of(journal: Journal) -> _Health:
    """The health of a journal object, shared by every destination (and recorder) on it."""
    with _HEALTH_LOCK:
        try:
            return _HEALTH.setdefault(journal, _Health())
        except TypeError:  # an object that cannot be weakly referenced: not shared
            return _Health()


def _opened(target: str, busy_timeout: float) -> Journal:
    """A journal opened with a short busy bound (the capture's, not the default 5 s)."""
    return Journal.open(target, busy_timeout=busy_timeout)


class SessionOutput:
    """The events of one session on their way out; see the module docstring."""

    def __init__(self, destination: Destination, session_id: str) -> None:
        self.destination = destination
        self.session_id = session_id
        self.spooling = False
        """True once the journal failed this session: the rest of it goes to the spool."""
        self._waiting: list[Written] | None = [] if destination.sampling is not None else None
        self._spooled = False
        self._ticket = 0  # the last event queued for the background writer (0: none)
        self._spooled_events = 0
        """Events of this session written to the spool (said when the session closes)."""

    def write(self, seq: int, when: datetime, event: AgentEvent) -> SessionState | None:
        """Write one event (redacted first), or keep it waiting for the session's end.

        Returns the session's state after it when the journal folded ``event`` itself (not
        redacted, not waiting, not spooled), so the caller need not fold it again; else None.
        """
        redactor = self.destination.redactor
        if redactor is not None:
            event = _redacted(redactor, self.session_id, event)
        if self._waiting is None:
            writer = self.destination.writer
            if writer is not None:
                self._ticket = writer.put(self, seq, when, event)
                return None
            state = self._out([(seq, when, event)])
            return None if redactor is not None else state
        self._waiting.append((seq, when, event))
        sampling = self.destination.sampling
        assert sampling is not None
        if isinstance(event, AgentHalted) or len(self._waiting) >= sampling.buffer_events:
            self._release()
        return None

    def flush(self) -> None:
        """Return once this session's queued events are written (grouped durability)."""
        writer = self.destination.writer
        if writer is not None and self._ticket:
            writer.flush(self._ticket)

    def close(self, state: SessionState) -> None:
        """The session ended in ``state``: write what it queued (sampled: now, if kept).

        A session that went to the spool says so again, with how many of its events did.
        """
        self.flush()
        if self._waiting is not None:
            sampling = self.destination.sampling
            assert sampling is not None
            if sampling.keeps(self.session_id, state):
                self._release()
            else:
                self._waiting = []
        if self._spooled_events:
            spool = self.destination.spool
            assert spool is not None
            log.warning(
                "agent-journal: session %s ended with %s in the spool %s "
                "(agent-journal drain moves them)",
                self.session_id,
                _counted(self._spooled_events, "event"),
                spool.path,
            )

    def _release(self) -> None:
        waiting, self._waiting = self._waiting or [], None
        if waiting:
            self._out(waiting)

    def _out(self, items: Sequence[Written]) -> SessionState | None:
        """Write ``items`` to the journal, or to the spool.

        Returns the journal's state after a single item, when it has it at hand
        (`Journal._state_after`).
        """
        destination = self.destination
        if self.spooling:
            self._spool(items)
            return None
        journal = destination.usable()
        if journal is not None:
            try:
                return _to_journal(journal, self.session_id, items)
            except UNAVAILABLE as error:
                if not destination.fail_open:
                    raise
                destination.failed(error)
        self.spooling = True
        self._spool(items)
        spool = destination.spool
        assert spool is not None
        if spool.time_to_log():
            log.warning(
                "agent-journal: %s cannot take writes (%s); session %s goes to the spool %s "
                "from seq %d on (%s spooled by this process so far; agent-journal drain "
                "moves them)",
                destination.target,
                destination.last_error,
                self.session_id,
                spool.path,
                items[0][0],
                _counted(spool.counts.sessions, "session"),
            )
        return None

    def write_run(self, items: Sequence[Written]) -> None:
        """Write a run of this session's queued events (the background writer's call)."""
        self._out(items)

    def refused(self, items: Sequence[Written], error: Exception) -> None:
        """The journal refused a grouped write (a conflict, an event too large): log it.

        The events, and the rest of the session, go to the spool (`agent-journal drain`
        then says what the journal refuses).
        """
        log.error(
            "agent-journal: session %s: the journal refused seq %d on: %s; the session goes "
            "to the spool",
            self.session_id,
            items[0][0],
            error,
        )
        self.spooling = True
        self._spool(items)

    def _spool(self, items: Sequence[Written]) -> None:
        spool = self.destination.spool
        assert spool is not None
        lines = [spool_line(self.session_id, seq, when, event) for seq, when, event in items]
        try:
            spool.append(lines, new_session=not self._spooled)
            self._spooled = True
            self._spooled_events += len(lines)
        except OSError as error:
            spool.lost(len(lines))
            log.error(
                "agent-journal: session %s: %d events lost: neither the journal nor the "
                "spool %s could take them (%s)",
                self.session_id,
                len(lines),
                spool.path,
                error,
            )


def _to_journal(journal: Journal, session_id: str, items: Sequence[Written]) -> SessionState | None:
    """One append of ``items`` (one transaction), each event with its own time.

    Returns the journal's state after the last, when at hand.
    """
    last = journal.append(
        session_id,
        [event for _, _, event in items],
        expected_seq=items[0][0],
        ts=[when for _, when, _ in items],
    )
    return journal._state_after(session_id, last)


def _redacted(redactor: Redactor, session_id: str, event: AgentEvent) -> AgentEvent:
    """``event`` with every string that matches a rule replaced (`Redactor.redact_payload`).

    A tool result's text (``result_text``) is its value redacted the same way, so a secret
    found by its key, not its shape, does not stay in it (and NaN or a huge integer it kept
    exactly stays exact).
    """
    payload: dict[str, Any] = redactor.redact_payload(session_id, event.model_dump(mode="json"))
    original = getattr(event, "result_text", None)
    if original is not None:
        given = redactor.redact_payload(session_id, {"result": loads_exact(original)})["result"]
        payload["result_text"] = result_record(given)[1]
    return type(event).model_validate(payload)


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
