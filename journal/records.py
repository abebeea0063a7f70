"""The stored record, kept apart from the typed event, and the one mapper between them.

A `StoredEvent` is what a store holds: the envelope (session id, seq, timestamp, type,
version, hash), the canonical ``body`` (the flat record without ``hash``, exactly the
bytes that are hashed) and a one-line summary. A `RecordedEvent` is the envelope beside a
validated `AgentEvent`. `encode` and `decode` are the only ways between the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from ._event_summary import summarize
from .canonical import (
    canonical_object,
    check_json,
    check_ts,
    dumps_canonical,
    format_ts,
    parse_ts,
    plainly_canonical,
    valid_session_id,
)
from .errors import InvalidEventError
from .events import EVENT_TYPES, PART_MODELS, AgentEvent
from .upcasting import current_version, upcast

__all__ = [
    "CanonicalRecord",
    "ImportRecord",
    "RecordedEvent",
    "StoredEvent",
    "as_text",
    "canonical_record",
    "decode",
    "decode_body",
    "decode_payload",
    "encode",
    "from_record",
    "record_line",
    "stored_row",
    "where",
]


def where(session_id: str, seq: int | None) -> str:
    """Name a position in a journal for error messages: ``session S seq N``."""
    return f"session {session_id}" + ("" if seq is None else f" seq {seq}")


class StoredEvent(NamedTuple):
    """One row of the events table: envelope, canonical body text, hash and summary.

    A named tuple: immutable, and four times cheaper to build than a frozen dataclass (one
    is built per event written and per row read).
    """

    session_id: str
    seq: int
    ts: str
    type: str
    v: int
    body: str
    hash: str
    summary: str
    position: int | None = None

    def line(self) -> bytes:
        """Return this record as one canonical JSONL line (with ``hash``, no newline)."""
        return dumps_canonical(self.record())

    def record(self) -> dict[str, Any]:
        """Return the flat record this row holds: its body parsed, with ``hash`` added.

        Raises:
            InvalidEventError: the stored body is not a JSON object (a journal written by
                someone else); the message names the session and seq.
        """
        try:
            record = orjson.loads(self.body)
        except orjson.JSONDecodeError as e:
            raise InvalidEventError(
                f"{where(self.session_id, self.seq)}: stored body is not JSON: {e}"
            ) from e
        if not isinstance(record, dict):
            raise InvalidEventError(
                f"{where(self.session_id, self.seq)}: stored body is not a JSON object"
            )
        record["hash"] = self.hash
        return record


class RecordedEvent(NamedTuple):
    """A validated event with its envelope, as read back from a journal (a named tuple)."""

    session_id: str
    seq: int
    ts: str
    v: int
    hash: str
    event: AgentEvent
    position: int | None = None

    @property
    def type(self) -> str:
        """The event's type name."""
        return self.event.type

    @property
    def time(self) -> datetime:
        """The timestamp as a timezone-aware datetime."""
        return parse_ts(self.ts)


def record_line(body: str, hash_: str) -> bytes:
    """Return the canonical JSONL line of a record: its body with ``hash`` added."""
    record = orjson.loads(body)
    record["hash"] = hash_
    return dumps_canonical(record)


def stored_row(row: Sequence[Any]) -> StoredEvent:
    """Map a row read from a store (the columns of `StoredEvent`, in order) to a `StoredEvent`.

    A journal is untrusted input: a file written by someone else may hold columns of other
    types (SQLite keeps whatever a foreign connection puts in). Text columns that hold
    blobs or numbers are turned into text and a version that is not an integer reads as
    ``-1`` (no event has it), so the chain check and decoding report them as findings; a
    seq that is not an integer is an error.

    Raises:
        InvalidEventError: ``seq`` is not an integer (names the session).
    """
    if type(row[1]) is int and type(row[4]) is int and all(type(row[i]) is str for i in _TEXT):
        return StoredEvent(*row)
    values = list(row)
    if type(values[1]) is not int:
        raise InvalidEventError(
            f"{where(str(row[0]), None)}: a stored seq {values[1]!r:.40} is not an integer"
        )
    if type(values[4]) is not int:
        values[4] = -1
    for index in _TEXT:
        values[index] = as_text(values[index])
    return StoredEvent(*values)


def as_text(value: object) -> str:
    """A text column's value as text, whatever a foreign writer stored in it.

    Blobs are decoded as UTF-8 (invalid bytes replaced), NULL reads as ``""``, anything
    else (a number) as its ``str``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


_TEXT = (0, 2, 3, 5, 6, 7)
"""Positions of the text columns of a stored row: session_id, ts, type, body, hash, summary."""


def encode(
    session_id: str,
    seq: int,
    ts: datetime | str,
    event: AgentEvent,
    chain: str,
    hasher: Any,
) -> StoredEvent:
    """Map a typed event to its stored record, chained to ``chain`` (the previous hash).

    ``hasher`` is a function ``(previous_hash, body_bytes) -> hash``.
    """
    stamp = ts if isinstance(ts, str) else format_ts(ts)
    version = type(event).VERSION
    # An event of one of our models (not a subclass): its fields, its parts dumped as theirs.
    payload = dict(event.__dict__) if type(event) in _EVENT_MODELS else None
    try:
        if payload is None or not plainly_canonical(payload, PART_MODELS):
            # What model_dump() gives, to be checked and named by path. Python mode: `Json`
            # values must reach check_json as they are (JSON mode turns a NaN into null).
            payload = event.__pydantic_serializer__.to_python(event)
            check_json(payload)
        payload["session_id"] = session_id
        payload["seq"] = seq
        payload["ts"] = stamp
        payload["v"] = version
        body = dumps_canonical(payload, _part_fields)  # raises on lone surrogates
    except InvalidEventError as e:
        raise InvalidEventError(f"{where(session_id, seq)}: {event.type}: {e}") from e
    return StoredEvent(
        session_id,
        seq,
        stamp,
        event.type,
        version,
        body.decode("utf-8"),
        hasher(chain, body),
        summarize(event),
    )


_EVENT_MODELS = frozenset(EVENT_TYPES.values())


def _part_fields(value: object) -> dict[str, Any]:
    if type(value) in PART_MODELS:
        return value.__dict__
    raise TypeError(f"{type(value).__name__} is not JSON")


def decode_payload(event_type: str, version: int, payload: dict[str, Any], at: str) -> AgentEvent:
    """Validate a payload (envelope fields removed) as the current model of ``event_type``.

    ``at`` names the position for error messages. Upcasters run for old versions.
    """
    try:
        current_version(event_type)  # raises UnknownEventTypeError naming the type
        lifted = upcast(event_type, version, payload)
    except InvalidEventError as e:
        raise type(e)(f"{at}: {e}") from e
    model = EVENT_TYPES[event_type]
    try:
        return model.model_validate(lifted)  # type: ignore[return-value]
    except ValidationError as e:
        first = e.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "$"
        raise InvalidEventError(
            f"{at}: invalid {event_type} event: {location}: {first['msg']}"
        ) from e


_ENVELOPE_ORDER = ("session_id", "seq", "type", "v", "ts")
_CURRENT: dict[str, tuple[int, Callable[[dict[str, Any]], AgentEvent]]] = {
    name: (model.VERSION, model.__pydantic_validator__.validate_python)
    for name, model in EVENT_TYPES.items()
}
"""Each type's current version and the validator of its model."""


def decode(stored: StoredEvent) -> RecordedEvent:
    """Map a stored record back to a validated `RecordedEvent`.

    The body's envelope fields must agree with the record's columns.

    Raises:
        InvalidEventError: the body is not JSON, disagrees with its envelope, or fails
            validation (the message names the session and seq).
    """
    session_id, seq, ts, event_type, version, body, hash_, _summary, position = stored
    payload = _parsed(session_id, seq, body)
    pop = payload.pop
    expected = (session_id, seq, event_type, version, ts)
    found = (
        pop("session_id", None),
        pop("seq", None),
        pop("type", None),
        pop("v", None),
        pop("ts", None),
    )
    if found != expected:
        name = next(n for n, a, b in zip(_ENVELOPE_ORDER, found, expected, strict=True) if a != b)
        raise InvalidEventError(
            f"{where(session_id, seq)}: body field {name!r} disagrees with its envelope"
        )
    payload["type"] = event_type
    return _recorded(session_id, seq, ts, event_type, version, payload, hash_, position)


def decode_body(
    session_id: str, seq: int, body: str, hash_: str, position: int | None = None
) -> RecordedEvent:
    """Decode a stored body with its envelope taken from the body itself (hot path: reads).

    The body is what the hash chain covers, so the event read is the one the chain vouches
    for; only its session id and seq are checked against where it was found. Whether the
    ``ts``, ``type`` and ``v`` columns agree with it is `verify`'s question (it decodes with
    `decode`), as it does not change what was recorded.
    """
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = None
    if type(payload) is not dict:
        payload = _parsed(session_id, seq, body)  # raises, naming what is wrong
    pop = payload.pop
    if pop("session_id", None) != session_id or pop("seq", None) != seq:
        raise InvalidEventError(
            f"{where(session_id, seq)}: the body's session_id or seq disagrees with its row"
        )
    ts, version, event_type = pop("ts", None), pop("v", None), payload.get("type")
    if type(version) is not int and isinstance(version, (int, float)) and version == int(version):
        version = int(version)  # 1.0 or true: what `decode` lets by, as equal to a column's 1
    if type(ts) is not str or type(version) is not int or type(event_type) is not str:
        raise InvalidEventError(
            f"{where(session_id, seq)}: the body's ts, v and type are not a string, an "
            "integer and a string"
        )
    current = _CURRENT.get(event_type)
    if current is not None and version == current[0]:  # `_recorded`'s common case, inline
        try:
            return RecordedEvent(session_id, seq, ts, version, hash_, current[1](payload), position)
        except ValidationError:
            pass
    return _recorded(session_id, seq, ts, event_type, version, payload, hash_, position)


def _parsed(session_id: str, seq: int, body: str) -> dict[str, Any]:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise InvalidEventError(f"{where(session_id, seq)}: stored body is not JSON: {e}") from e
    if not isinstance(payload, dict):
        raise InvalidEventError(f"{where(session_id, seq)}: stored body is not a JSON object")
    return payload


def _recorded(
    session_id: str,
    seq: int,
    ts: str,
    event_type: str,
    version: int,
    payload: dict[str, Any],
    hash_: str,
    position: int | None,
) -> RecordedEvent:
    """Validate a payload (envelope removed, ``type`` kept) and put it in its envelope."""
    current = _CURRENT.get(event_type)
    event: AgentEvent | None = None
    if current is not None and version == current[0]:
        # The common case, without the upcasting machinery: what decode_payload does when
        # the version is current (model_validate is this call plus argument checks).
        try:
            event = current[1](payload)
        except ValidationError:
            pass  # decode_payload validates again and words the error
    if event is None:
        event = decode_payload(event_type, version, payload, where(session_id, seq))
    return RecordedEvent(session_id, seq, ts, version, hash_, event, position)


class CanonicalRecord(NamedTuple):
    """A flat record read from its own canonical bytes (`canonical_record`), with those bytes.

    `from_record` takes one where it takes a record's dict, without checking or serialising
    the fields again. Build one only with `canonical_record`, which makes sure ``body`` is
    the canonical bytes of ``fields``.
    """

    fields: dict[str, Any]
    """The record without ``hash``; `from_record` takes it over (it pops the envelope)."""
    body: bytes
    """The canonical bytes of ``fields``: what is stored and hashed."""
    hash: object
    """The ``hash`` the record claims (None: it has none)."""

    def flat(self) -> dict[str, Any]:
        """The flat record as it was read, ``hash`` included when it had one."""
        return self.fields if self.hash is None else {**self.fields, "hash": self.hash}


ImportRecord = tuple[str, dict[str, Any] | CanonicalRecord]
"""A record to import with the place it was read from (``file:line``): a flat dict, or a
`CanonicalRecord` when its canonical bytes are known."""


def canonical_record(raw: bytes, hash_: str | None = None) -> CanonicalRecord | None:
    """The record ``raw`` holds when ``raw`` is its own canonical form (`canonical_object`).

    ``raw`` is a whole JSONL line (``hash`` among its fields), or with ``hash_`` a stored
    body (without one). None means ``raw`` needs the strict parser.
    """
    fields = canonical_object(raw)
    if fields is None:
        return None
    if "hash" not in fields:
        return CanonicalRecord(fields, raw, hash_)
    if hash_ is not None:
        return None  # a body holding a hash of its own: the dict path decides
    claimed = fields.pop("hash")
    return CanonicalRecord(fields, _without_hash(raw, claimed) or dumps_canonical(fields), claimed)


def _without_hash(raw: bytes, claimed: object) -> bytes | None:
    """``raw`` with its top-level ``hash`` member cut out, when that is certain.

    It is when the member's exact bytes occur once in the canonical line; a nested value
    that repeats them is left to a re-dump (None).
    """
    member = b'"hash":' + dumps_canonical(claimed)
    start = raw.find(member)
    if start < 0 or raw.rfind(member) != start:
        return None
    end = start + len(member)
    if raw[start - 1] == _COMMA:
        return raw[: start - 1] + raw[end:]  # a member after the first: its comma before it
    if raw[end] == _COMMA:
        return raw[:start] + raw[end + 1 :]  # the first member: its comma after it
    return raw[:start] + raw[end:]  # the only member


_COMMA = ord(",")


def from_record(
    record: dict[str, Any] | CanonicalRecord, chain: str, hasher: Any, at: str
) -> tuple[StoredEvent, AgentEvent]:
    """Map a flat record from outside (a JSONL line, another store) to a stored record.

    Returns the stored record and its validated event (the one validation of the record).

    The record's own canonical bytes are kept (so a hash computed elsewhere still holds),
    after its envelope and payload are validated. A ``hash`` in the record must equal the
    one computed from ``chain``; without one, it is computed. A `CanonicalRecord` is the
    record with its canonical bytes known already: they are not checked or made again.

    Raises:
        InvalidEventError: a bad envelope, payload, or hash; the message starts with ``at``.
    """
    if isinstance(record, CanonicalRecord):
        payload, body, claimed = record  # the fields are given over: the envelope is popped
    else:
        payload, body = dict(record), None
        claimed = payload.pop("hash", None)
    pop = payload.pop
    session_id: Any = pop("session_id", None)
    seq: Any = pop("seq", None)
    version: Any = pop("v", None)
    stamp: Any = pop("ts", None)
    event_type: Any = payload.get("type")
    if not valid_session_id(session_id):
        raise InvalidEventError(
            f"{at}: session_id {session_id!r} must be 1-128 characters of letters, digits, -_.:"
        )
    if type(seq) is not int or type(version) is not int or seq < 0 or version < 0:
        _check_counts(seq, version, at)
    if not isinstance(event_type, str):
        raise InvalidEventError(f"{at}: type {event_type!r} is not a string")
    try:
        check_ts(stamp)
        if body is None:
            check_json(payload)
            envelope = {"session_id": session_id, "seq": seq, "ts": stamp, "v": version}
            body = dumps_canonical(payload | envelope)  # raises on what check_json lets by
    except InvalidEventError as e:
        raise InvalidEventError(f"{at}: {e}") from e
    event = _validated(event_type, version, payload, at)
    computed = hasher(chain, body)
    if claimed is not None and claimed != computed:
        raise InvalidEventError(
            f"{at}: hash {str(claimed)[:12]}… does not match the chain (expected {computed[:12]}…)"
        )
    row = StoredEvent(
        session_id,
        seq,
        stamp,
        event_type,
        version,
        body.decode("utf-8"),
        computed,
        summarize(event),
    )
    return row, event


def _check_counts(seq: object, version: object, at: str) -> None:
    """Raise unless ``seq`` and ``v`` are non-negative integers, naming the one that is not."""
    for name, value in (("seq", seq), ("v", version)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidEventError(f"{at}: {name} {value!r} is not a non-negative integer")


def _validated(event_type: str, version: int, payload: dict[str, Any], at: str) -> AgentEvent:
    """`decode_payload`, with its common case (a current version that validates) inline."""
    current = _CURRENT.get(event_type)
    if current is not None and version == current[0]:
        try:
            return current[1](payload)
        except ValidationError:
            pass  # decode_payload validates again and words the error
    return decode_payload(event_type, version, payload, at)
