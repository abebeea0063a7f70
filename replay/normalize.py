"""Normalisation: which fields of an event are volatile and left out when runs are compared.

Two runs of the same code on the same recorded inputs differ in what the clock and the
machine put into them. `DEFAULT_RULES` drops, before comparing:

* from every event: the envelope's ``session_id``, ``seq``, ``ts`` and ``hash`` (the chain
  depends on the session id and the times; positions are compared by the alignment), and
  ``v`` (records are compared as read, upcast to their type's current version);
* ``session_started``: ``agent`` (the address of the code, not what it does: its
  configuration and its behaviour are compared), ``code_version``, ``replay_of``,
  ``forked_from``, ``fork_seq``;
* ``action_proposed`` and ``model_call_failed``: ``latency_ms``, and ``request.digest`` (a
  digest of the whole request, whose fields are compared themselves; a redacted fixture
  keeps the digest of what was sent before redaction);
* ``action_committed`` and ``action_failed``: ``duration_ms``; ``action_committed``:
  ``result_text`` (the result's own key order; its content is ``result``, compared).

Extend it for your own volatile fields: ``DEFAULT_RULES.extended({"action_committed":
["result.fetched_at"]})``, or from the command line with ``--ignore
action_committed.result.fetched_at`` (`NormalizationRules.ignoring`). Paths are dotted;
``*`` as the event type applies to all.

The configuration a run was recorded with (the `CONFIG_FIELDS` of ``session_started``) is
compared apart from its behaviour: see `replay.diff.config_changes`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from journal import EVENT_TYPES, InvalidInputError, RecordedEvent

__all__ = [
    "CONFIG_FIELDS",
    "DEFAULT_RULES",
    "NormalizationRules",
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

    def ignoring(self, specs: Iterable[str]) -> NormalizationRules:
        """These rules plus ``TYPE.dotted.path`` specs (``*.path`` for every type).

        Raises:
            InvalidInputError: a spec without a path, or naming an unknown event type.
        """
        more: dict[str, list[str]] = {}
        for spec in specs:
            kind, _, path = spec.partition(".")
            if not path or (kind != "*" and kind not in EVENT_TYPES):
                raise InvalidInputError(
                    f"--ignore {spec!r}: expected EVENT_TYPE.dotted.path or *.dotted.path "
                    f"(event types: {', '.join(sorted(EVENT_TYPES))})"
                )
            more.setdefault(kind, []).append(path)
        return self.extended(more)

    def paths_for(self, event_type: str) -> tuple[str, ...]:
        """The paths dropped from events of ``event_type``."""
        return (*self.ignore.get("*", ()), *self.ignore.get(event_type, ()))


DEFAULT_RULES = NormalizationRules(
    ignore={
        "*": ("session_id", "seq", "ts", "hash", "v"),
        "session_started": ("agent", "code_version", "replay_of", "forked_from", "fork_seq"),
        "action_proposed": ("latency_ms", "request.digest"),
        "model_call_failed": ("latency_ms", "request.digest"),
        "action_committed": ("duration_ms", "result_text"),
        "action_failed": ("duration_ms",),
        "agent_halted": ("error.raised_at",),
    }
)
"""The documented default rule set."""

CONFIG_FIELDS = (
    "config",
    "model",
    "model_settings",
    "client_settings",
    "system_prompt",
    "system_prompt_hash",
)
"""Fields of ``session_started`` that configure a run (the tools and their schemas, the
guardrails and settings, the prompt, the model): a change of them is reported as a
configuration change, apart from the first behavioural divergence."""


def record_of(item: RecordedEvent) -> dict[str, Any]:
    """Return the flat record of an event (envelope beside payload), as JSON values.

    ``v`` is the version of the payload as read: a record stored at an older version is
    upcast on reading, so its fields (and its ``v`` here) are those of the current one.
    """
    record = item.event.model_dump(mode="json")
    record.update(
        session_id=item.session_id, seq=item.seq, ts=item.ts, v=item.event.VERSION, hash=item.hash
    )
    return record


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
    """Return a copy of a flat record without the fields ``rules`` call volatile."""
    copy = dict(record)
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
    plans: dict[Any, tuple[frozenset[str], tuple[str, ...]]] = {}
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
            )
        top, nested = plan
        copy = {key: value for key, value in record.items() if key not in top}
        for path in nested:
            _drop(copy, path)
        out.append(dumps(copy, option=option))
    return out


def fingerprint(record: Mapping[str, Any], rules: NormalizationRules = DEFAULT_RULES) -> str:
    """A short digest of the normalised record: equal fingerprints mean equal events."""
    return hashlib.sha256(normalized_bytes([record], rules)[0]).hexdigest()[:32]


_ENVELOPE = ("session_id", "seq", "ts", "v", "hash", "type")


def describe(record: Mapping[str, Any] | None, rules: NormalizationRules | None = None) -> str:
    """One line for a record: its type, then the fields that were compared, as JSON.

    The envelope and what ``rules`` (default `DEFAULT_RULES`) leave out are not shown,
    nor empty fields: a report shows what the verdict looked at.
    """
    if record is None:
        return "(nothing)"
    compared = normalize(record, DEFAULT_RULES if rules is None else rules)
    detail = {
        key: value
        for key, value in compared.items()
        if key not in _ENVELOPE and key != "type" and value is not None
    }
    return f"{record.get('type')} {orjson.dumps(detail, option=orjson.OPT_SORT_KEYS).decode()}"
