"""The pure planning of appends and imports, shared by both stores.

It turns a session's current head plus new events into the rows to insert and the state
to project (`journal.projection`), so SQLite and PostgreSQL cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import NamedTuple

from .canonical import GENESIS_HASH, format_ts, parse_ts, valid_session_id
from .errors import ConflictError, EventTooLargeError, InvalidEventError, SessionConflictError
from .events import AgentEvent, SessionStarted
from .fold import SessionState, fold
from .records import ImportRecord, RecordedEvent, StoredEvent, encode, from_record, where

__all__ = [
    "IMPORT_BATCH",
    "AppendPlan",
    "Hasher",
    "ImportStream",
    "SessionHead",
    "Stamps",
    "plan_append",
]

Hasher = Callable[[str, bytes], str]
"""``(previous_hash, body) -> hash``."""

Stamps = datetime | str | Sequence[datetime | str]
"""The time of an append's events: one for all of them, or one each (`plan_append`)."""


class SessionHead(NamedTuple):
    """Where a session stands: its last seq, head hash and folded state (a named tuple:
    one is made per append, cheaper than a frozen dataclass)."""

    last_seq: int
    head_hash: str
    state: SessionState


class AppendPlan(NamedTuple):
    """Rows to insert and the state after them, ready for one transaction (a named tuple,
    as `SessionHead`)."""

    rows: list[StoredEvent]
    state: SessionState

    @property
    def head_hash(self) -> str:
        """The hash of the last row."""
        return self.rows[-1].hash


def _check_position(session_id: str, seq: int, event: AgentEvent) -> None:
    """Raise unless ``event`` is a session_started exactly when ``seq`` is 0."""
    if (seq == 0) is isinstance(event, SessionStarted):
        return
    if seq == 0:
        raise InvalidEventError(
            f"{where(session_id, 0)}: a session must begin with session_started, not {event.type}"
        )
    raise InvalidEventError(f"{where(session_id, seq)}: session_started is only allowed at seq 0")


def _check_size(row: StoredEvent, limit: int | None, at: str | None = None) -> None:
    """Raise unless ``row``'s canonical bytes (its body) are at most ``limit`` (None: any).

    ``at`` (``file:line``) prefixes the message of an imported record. Costs nothing for an
    event under a quarter of the limit (a character is at most four UTF-8 bytes).

    Raises:
        EventTooLargeError: naming the place, session, seq, type, size and limit.
    """
    if limit is None or len(row.body) * 4 <= limit:
        return
    size = len(row.body.encode("utf-8"))
    if size <= limit:
        return
    place = f"{at}: " if at else ""
    raise EventTooLargeError(
        f"{place}{where(row.session_id, row.seq)}: the {row.type} event is {size:,} bytes of "
        f"canonical JSON, over the journal's limit of {limit:,} (max_event_bytes); "
        "nothing was written",
        session_id=row.session_id,
        seq=row.seq,
        size=size,
        limit=limit,
    )


def plan_append(
    session_id: str,
    head: SessionHead | None,
    events: Sequence[AgentEvent],
    *,
    expected_seq: int | None,
    ts: Stamps,
    hasher: Hasher,
    max_event_bytes: int | None = None,
) -> AppendPlan:
    """Plan an append of ``events`` after ``head`` (None for a new session).

    ``ts`` stamps every event, or (a sequence) each event its own.

    Raises:
        ConflictError: ``expected_seq`` is not the next seq of the session.
        EventTooLargeError: an event is larger than ``max_event_bytes``.
        InvalidEventError: a bad session id, an event out of place, or a non-canonical value.
    """
    if not valid_session_id(session_id):
        raise InvalidEventError(
            f"session id {session_id!r} must be 1-128 characters of letters, digits, -_.:"
        )
    next_seq = head.last_seq + 1 if head else 0
    if expected_seq is not None and expected_seq != next_seq:
        raise ConflictError(
            f"{where(session_id, expected_seq)}: expected to append at seq {expected_seq} "
            f"but the session's next seq is {next_seq} (another writer got there first)"
        )
    stamps = _stamps(ts, len(events))
    chain = head.head_hash if head else GENESIS_HASH
    rows: list[StoredEvent] = []
    recorded: list[RecordedEvent] = []
    for offset, event in enumerate(events):
        seq = next_seq + offset
        _check_position(session_id, seq, event)
        stamp = stamps[offset]
        row = encode(session_id, seq, stamp, event, chain, hasher)
        _check_size(row, max_event_bytes)
        chain = row.hash
        rows.append(row)
        recorded.append(RecordedEvent(session_id, seq, stamp, row.v, chain, event))
    return AppendPlan(rows=rows, state=fold(recorded, head.state if head else None))


def _stamps(ts: Stamps, count: int) -> list[str]:
    """The stored stamp of each of ``count`` events (a string must already be canonical:
    `parse_ts` rejects any other shape before it is stored)."""
    if isinstance(ts, str | datetime):
        return [format_ts(parse_ts(ts) if isinstance(ts, str) else ts)] * count
    if len(ts) != count:
        raise ValueError(f"{len(ts)} stamps for {count} events: one each, or one for all")
    return [format_ts(parse_ts(one) if isinstance(one, str) else one) for one in ts]


IMPORT_BATCH = 200
"""Rows an import plans, folds and writes at a time: its memory, whatever the session's size.

Small enough that a batch's rows and events stay in a core's cache until they are folded
and written (at 1000 they did not, and an import spent ~15% more CPU)."""


class ImportStream:
    """The planning of one session's import, batch by batch (memory flat in its size).

    `batches` checks every record once (its envelope, payload and hash, against the chain
    from the genesis hash), folds each batch in one go, and yields the rows that are new
    against ``head``; once it is exhausted, `plan` is the import's outcome. Against an
    existing session: the same content, or a prefix of it, is a no-op; a longer recording
    whose prefix is the stored session appends the rest (the stored state is folded on, as
    an append does); anything else is a conflict, raised before the first new row is
    yielded. ``stored_hash_at(seq)`` reads the stored session's hash at a seq.
    """

    def __init__(
        self,
        session_id: str,
        head: SessionHead | None,
        *,
        hasher: Hasher,
        stored_hash_at: Callable[[int], str | None] = lambda seq: None,
        max_event_bytes: int | None = None,
    ) -> None:
        self.session_id = session_id
        self.head = head
        self.hasher = hasher
        self.stored_hash_at = stored_hash_at
        self.max_event_bytes = max_event_bytes
        self.state = head.state if head is not None else SessionState()
        self.chain = GENESIS_HASH
        self.last_row: StoredEvent | None = None
        """The last new row (None: nothing new)."""
        self.written = 0
        """How many new rows were yielded."""

    def batches(
        self, records: Iterable[ImportRecord], size: int = IMPORT_BATCH
    ) -> Iterator[list[StoredEvent]]:
        """Check the records (each with its place) and yield the new rows, ``size`` at a time.

        Raises:
            EventTooLargeError: a record is larger than ``max_event_bytes`` (names its place).
            InvalidEventError: a record is malformed, out of order, or its hash does not
                verify.
            SessionConflictError: the session exists with different content.
        """
        session_id, head = self.session_id, self.head
        skip = head.last_seq if head is not None else -1
        rows: list[StoredEvent] = []
        recorded: list[RecordedEvent] = []
        seq = -1
        for seq, (at, record) in enumerate(records):
            row, event = from_record(record, self.chain, self.hasher, at)
            _check_size(row, self.max_event_bytes, at)
            if row.session_id != session_id:
                raise InvalidEventError(
                    f"{at}: session_id {row.session_id!r}, expected {session_id!r}"
                )
            if row.seq != seq:
                raise InvalidEventError(
                    f"{at}: seq {row.seq}, expected {seq} (seqs are dense from 0)"
                )
            _check_position(session_id, seq, event)
            self.chain = row.hash
            if seq <= skip:
                if seq == skip and row.hash != self._stored_head:
                    raise self._conflict()
                continue
            rows.append(row)
            recorded.append(RecordedEvent(session_id, seq, row.ts, row.v, row.hash, event))
            if len(rows) >= size:
                yield self._folded(rows, recorded)
                rows, recorded = [], []
        if rows:
            yield self._folded(rows, recorded)
        if head is None and seq < 0:
            raise InvalidEventError(f"{where(session_id, None)}: no events to import")
        if seq < skip and (seq < 0 or self.stored_hash_at(seq) != self.chain):
            raise self._conflict()  # a shorter recording that is not a prefix of the stored one

    @property
    def _stored_head(self) -> str:
        assert self.head is not None
        return self.head.head_hash

    def _conflict(self) -> SessionConflictError:
        assert self.head is not None
        return SessionConflictError(
            f"{where(self.session_id, None)}: exists already with different content "
            f"(stored head seq {self.head.last_seq} hash {self.head.head_hash[:12]}…)"
        )

    def _folded(self, rows: list[StoredEvent], recorded: list[RecordedEvent]) -> list[StoredEvent]:
        """Fold a batch into the state (in one go, as an append does) and return its rows."""
        self.state = fold(recorded, self.state)
        self.last_row = rows[-1]
        self.written += len(rows)
        return rows

    def plan(self, rows: list[StoredEvent] | None = None) -> AppendPlan | None:
        """The outcome once `batches` is exhausted: None for a no-op, else the state after it.

        ``rows`` are the rows the plan carries (default: the last new one, all that the
        projection and the head of the session need).
        """
        if self.last_row is None:
            return None
        return AppendPlan(rows=rows if rows is not None else [self.last_row], state=self.state)
