"""The ``sessions`` projection: one row per session, derived from its events by the fold.

Listings read it without decoding a payload; every append writes the row's columns for its
new state in the same transaction (the state JSON beside them every ``STATE_EVERY`` events,
see `journal._sqlstore`), and ``verify`` checks it against the events.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from .fold import SessionState, SessionStatus

__all__ = [
    "PROJECTION_COLUMNS",
    "SessionDetails",
    "SessionSummary",
    "projection_row",
    "projection_values",
    "state_json",
    "value_picker",
]


class SessionSummary(BaseModel):
    """One row of the ``sessions`` projection: what listings show without decoding events."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    agent: str | None
    model: str | None
    status: SessionStatus
    events: int
    turns: int
    steps: int
    failures: int
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    cost: float
    started: str | None
    ended: str | None
    last_seq: int
    head_hash: str
    replay_of: str | None
    forked_from: str | None
    fork_seq: int | None
    halt_rule: str | None
    repairs: int = 0
    committed: int = 0
    model_calls: int = 0
    latency_ms: float = 0.0
    model_failures: int = 0

    @property
    def tool_success_rate(self) -> float:
        """Committed calls over all calls decided (0 when there were none)."""
        return self.committed / self.steps if self.steps else 0.0

    @property
    def cache_hit_rate(self) -> float:
        """Share of input tokens served from the provider's prompt cache."""
        return self.tokens_cached / self.tokens_in if self.tokens_in else 0.0

    @property
    def mean_latency_ms(self) -> float:
        """Mean model latency per call."""
        return self.latency_ms / self.model_calls if self.model_calls else 0.0


class SessionDetails(BaseModel):
    """What a listing shows beyond the projection, read from two events of a session.

    The metadata it was started with (seq 0), and why it halted (its last event).
    """

    model_config = ConfigDict(frozen=True)

    metadata: dict[str, Any] = Field(default_factory=dict)
    halt_reason: str | None = None


PROJECTION_COLUMNS = tuple(SessionSummary.model_fields)
"""Columns of the sessions table besides ``fold_version`` and ``state``."""


_ROW_COLUMNS = (*PROJECTION_COLUMNS, "fold_version", "state")


def projection_row(state: SessionState, head_hash: str) -> dict[str, Any]:
    """Return the sessions-table row for ``state`` (with its state JSON and fold version)."""
    return dict(zip(_ROW_COLUMNS, projection_values(state, head_hash, _ROW_COLUMNS), strict=True))


def projection_values(state: SessionState, head_hash: str, names: Sequence[str]) -> list[Any]:
    """The values of the columns ``names`` of ``state``'s `projection_row`, in that order.

    What an append writes, without building the whole row first.
    """
    picks, added = _picking(tuple(names))
    values = [*picks(state.__dict__)]
    for place, name in added:  # ascending places: each is its place in the final list
        values.insert(place, head_hash if name == "head_hash" else state_json(state))
    return values


_ADDED = ("head_hash", "state")
"""The projection's columns that are not fields of the state."""


@functools.cache
def _picking(
    names: tuple[str, ...],
) -> tuple[Callable[[dict[str, Any]], tuple[Any, ...]], tuple[tuple[int, str], ...]]:
    """What picks the state's fields among ``names``, and the places of the `_ADDED` ones.

    The places are ascending; those values are put in their places afterwards: cheaper
    than a copy of the state's fields with them added, to pick from (one per append).
    """
    fields = tuple(name for name in names if name not in _ADDED)
    picks = value_picker(fields) if fields else (lambda values: ())
    return picks, tuple(sorted((names.index(name), name) for name in _ADDED if name in names))


@functools.cache
def value_picker(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """What picks the values of ``names`` from a dict, as a tuple.

    Made once per ``names``: an `operator.itemgetter`, cheaper than a lookup per name on
    the append path.
    """
    if len(names) == 1:
        name = names[0]
        return lambda values: (values[name],)
    return operator.itemgetter(*names)


def state_json(state: SessionState) -> str:
    """``state`` as the JSON stored beside its projection: ``state.model_dump(mode="json")``.

    Built by orjson from the field values (nested models by their own fields), which is
    several times cheaper than pydantic's serializer on this hot path (one per append).
    """
    return orjson.dumps(state.__dict__, default=_fields).decode()


def _fields(value: object) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.__dict__
    raise TypeError(f"{type(value).__name__} is not JSON")
