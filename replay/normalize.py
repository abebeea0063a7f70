"""Normalisation: which fields of an event are volatile and left out when runs are compared.

Two runs of the same code on the same recorded inputs differ in what the clock and the
machine put into them. `DEFAULT_RULES` drops, before comparing:

* from every event: the envelope's ``session_id``, ``seq``, ``ts``, ``v`` and ``hash`` (the
  chain depends on the session id and the times; positions are compared by the alignment);
  a record of an older version is compared upcast, as the current code reads it (`as_read`),
  so an old session and its replay by newer code compare equal;
* ``session_started``: ``code_version``, ``replay_of``, ``forked_from``, ``fork_seq``;
* ``action_proposed``: ``latency_ms``;
* ``action_committed`` and ``action_failed``: ``duration_ms``.

Extend it for your own volatile fields: ``DEFAULT_RULES.extended({"action_committed":
["result.fetched_at"]})``. Paths are dotted; ``*`` as the event type applies to all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from journal import EVENT_TYPES, InvalidEventError, RecordedEvent, upcast

__all__ = [
    "DEFAULT_RULES",
    "NormalizationRules",
    "as_read",
    "describe",
    "fingerprint",
    "normalize",
    "record_of",
]


@dataclass(frozen=True)
class NormalizationRules:
    """Dotted field paths to drop, per event type (``*`` for every type)."""

    ignore: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def extended(self, more: Mapping[str, Iterable[str]]) -> NormalizationRules:
        """Return these rules plus ``more``."""
        merged = {key: tuple(value) for key, value in self.ignore.items()}
        for key, paths in more.items():
            merged[key] = (*merged.get(key, ()), *paths)
        return NormalizationRules(ignore=merged)

    def paths_for(self, event_type: str) -> tuple[str, ...]:
        """The paths dropped from events of ``event_type``."""
        return (*self.ignore.get("*", ()), *self.ignore.get(event_type, ()))


DEFAULT_RULES = NormalizationRules(
    ignore={
        "*": ("session_id", "seq", "ts", "v", "hash"),
        "session_started": ("code_version", "replay_of", "forked_from", "fork_seq"),
        "action_proposed": ("latency_ms",),
        "action_committed": ("duration_ms",),
        "action_failed": ("duration_ms",),
    }
)
"""The documented default rule set."""


def record_of(item: RecordedEvent) -> dict[str, Any]:
    """Return the flat record of an event (envelope beside payload), as JSON values.

    The event was upcast when it was read, so ``v`` is its current version.
    """
    record = item.event.model_dump(mode="json")
    version = type(item.event).VERSION
    record.update(session_id=item.session_id, seq=item.seq, ts=item.ts, v=version, hash=item.hash)
    return record


_CURRENT = {name: model.VERSION for name, model in EVENT_TYPES.items()}
_WHERE = ("hash", "seq", "session_id", "ts", "v")
"""A record's envelope besides ``type`` (which the payload keeps for its upcasters)."""


def as_read(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A flat record as the current code reads it: an older version's payload upcast.

    A current record (or one nobody can upcast: an unknown type or version, left for the
    comparison to show) is returned as it is.
    """
    version, current = record.get("v"), _CURRENT.get(str(record.get("type")))
    if current is None or type(version) is not int or version >= current:
        return record
    payload = {key: value for key, value in record.items() if key not in _WHERE}
    try:
        lifted = upcast(str(record["type"]), version, payload)
    except InvalidEventError:
        return record
    envelope = {key: record[key] for key in _WHERE if key in record}
    return {**envelope, **lifted, "v": current}


def _drop(record: dict[str, Any], path: str) -> None:
    """Remove a dotted path from ``record``, copying the nested objects it goes through."""
    head, _, rest = path.partition(".")
    if not rest:
        record.pop(head, None)
        return
    child = record.get(head)
    if isinstance(child, dict):
        record[head] = child = dict(child)
        _drop(child, rest)


def normalize(
    record: Mapping[str, Any], rules: NormalizationRules = DEFAULT_RULES
) -> dict[str, Any]:
    """Return a copy of a flat record (`as_read`) without the fields ``rules`` call volatile."""
    copy = dict(as_read(record))
    for path in rules.paths_for(str(record.get("type"))):
        _drop(copy, path)
    return copy


def normalized_bytes(
    records: Iterable[Mapping[str, Any]], rules: NormalizationRules = DEFAULT_RULES
) -> list[bytes]:
    """The canonical bytes of each record without its volatile fields, in order.

    Equal bytes mean equal events. The same as serialising `normalize` of each record
    (keys sorted), done for a whole run at once: the paths to drop are worked out once
    per event type, and top-level fields are left out while copying.
    """
    plans: dict[Any, tuple[frozenset[str], tuple[str, ...], int]] = {}
    dumps, option = orjson.dumps, orjson.OPT_SORT_KEYS
    out: list[bytes] = []
    for record in records:
        kind = record.get("type")
        plan = plans.get(kind)
        if plan is None:
            paths = rules.paths_for(str(kind))
            plan = plans[kind] = (
                frozenset(path for path in paths if "." not in path),
                tuple(path for path in paths if "." in path),
                _CURRENT.get(str(kind), 0),
            )
        top, nested, current = plan
        version = record.get("v")
        if type(version) is int and version < current:
            record = as_read(record)
        copy = {key: value for key, value in record.items() if key not in top}
        for path in nested:
            _drop(copy, path)
        out.append(dumps(copy, option=option))
    return out


def fingerprint(record: Mapping[str, Any], rules: NormalizationRules = DEFAULT_RULES) -> str:
    """A short digest of the normalised record: equal fingerprints mean equal events."""
    return hashlib.sha256(normalized_bytes([record], rules)[0]).hexdigest()[:32]


_ENVELOPE = ("session_id", "seq", "ts", "v", "hash", "type")


def describe(record: Mapping[str, Any] | None) -> str:
    """One line for a record: its type, then its fields without the envelope, as JSON."""
    if record is None:
        return "(nothing)"
    detail = {key: value for key, value in record.items() if key not in _ENVELOPE}
    return f"{record.get('type')} {orjson.dumps(detail, option=orjson.OPT_SORT_KEYS).decode()}"
