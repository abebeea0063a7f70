"""The pure planning of appends and imports, shared by both stores.

It turns a session's current head plus new events into the rows to insert and the state
to project (`journal.projection`), so SQLite and PostgreSQL cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .canonical import GENESIS_HASH, format_ts, parse_ts, valid_session_id
from .errors import ConflictError, InvalidEventError, SessionConflictError
from .events import AgentEvent, SessionStarted
from .fold import SessionState, apply, fold
from .records import RecordedEvent, StoredEvent, decode, encode, from_record, where

__all__ = ["AppendPlan", "Hasher", "SessionHead", "plan_append", "plan_import"]

Hasher = Callable[[str, bytes], str]
"""``(previous_hash, body) -> hash``."""


@dataclass(frozen=True, slots=True)
class SessionHead:
    """Where a session stands: its last seq, head hash and folded state."""

    last_seq: int
    head_hash: str
    state: SessionState


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """Rows to insert and the state after them, ready for one transaction."""

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


def plan_append(
    session_id: str,
    head: SessionHead | None,
    events: Sequence[AgentEvent],
    *,
    expected_seq: int | None,
    ts: datetime | str,
    hasher: Hasher,
) -> AppendPlan:
    """Plan an append of ``events`` after ``head`` (None for a new session).

    Raises:
        ConflictError: ``expected_seq`` is not the next seq of the session.
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
    # A string must already be canonical: parse_ts rejects any other shape before it is stored.
    stamp = format_ts(parse_ts(ts) if isinstance(ts, str) else ts)
    chain = head.head_hash if head else GENESIS_HASH
    rows: list[StoredEvent] = []
    recorded: list[RecordedEvent] = []
    for offset, event in enumerate(events):
        seq = next_seq + offset
        _check_position(session_id, seq, event)
        row = encode(session_id, seq, stamp, event, chain, hasher)
        chain = row.hash
        rows.append(row)
        recorded.append(RecordedEvent(session_id, seq, stamp, row.v, chain, event))
    return AppendPlan(rows=rows, state=fold(recorded, head.state if head else None))


def plan_import(
    session_id: str,
    head: SessionHead | None,
    records: Iterable[tuple[str, dict[str, Any]]],
    *,
    hasher: Hasher,
    stored_hash_at: Callable[[int], str | None] = lambda seq: None,
) -> AppendPlan | None:
    """Plan the import of a whole session's records (each with the place it came from).

    Records must carry dense seqs from 0 and chain from the genesis hash. Against an
    existing session: the same content, or a prefix of it, is a no-op (returns None); a
    longer recording whose prefix is the stored session appends the rest; anything else is
    a conflict. ``stored_hash_at(seq)`` reads the stored session's hash at a seq.

    Raises:
        InvalidEventError: a record is malformed, out of order, or its hash does not verify.
        SessionConflictError: the session exists with different content.
    """
    chain = GENESIS_HASH
    state = SessionState()
    rows: list[StoredEvent] = []
    stored_at_head: str | None = None
    for seq, (at, record) in enumerate(records):
        row = from_record(record, chain, hasher, at)
        if row.session_id != session_id:
            raise InvalidEventError(f"{at}: session_id {row.session_id!r}, expected {session_id!r}")
        if row.seq != seq:
            raise InvalidEventError(f"{at}: seq {row.seq}, expected {seq} (seqs are dense from 0)")
        recorded = decode(row)
        _check_position(session_id, seq, recorded.event)
        chain = row.hash
        state = apply(state, recorded)
        if head is not None and seq == head.last_seq:
            stored_at_head = row.hash
        if head is None or seq > head.last_seq:
            rows.append(row)
    if not rows and head is None:
        raise InvalidEventError(f"{where(session_id, None)}: no events to import")
    if head is not None:
        if (
            stored_at_head is None
            and state.last_seq >= 0
            and stored_hash_at(state.last_seq) == chain
        ):
            return None
        if stored_at_head != head.head_hash:
            raise SessionConflictError(
                f"{where(session_id, None)}: exists already with different content "
                f"(stored head seq {head.last_seq} hash {head.head_hash[:12]}…)"
            )
        if not rows:
            return None
    return AppendPlan(rows=rows, state=state)
