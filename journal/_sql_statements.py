"""The statements that write a session's projection row and its events, made once per shape.

Each is built from the columns it writes and cached (`functools.cache`), so an append
builds no SQL text. The projection writes note which of their parameters may be None
(`null_places`), for SQLite, which binds a None dearly (`journal.sqlite.without_nulls`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, get_args

from ._planner import AppendPlan
from .projection import PROJECTION_COLUMNS, SessionSummary, projection_values, value_picker

__all__ = [
    "changed_columns",
    "guarded_update_sql",
    "insert_events_sql",
    "null_places",
    "update_sql",
    "upsert_sql",
]


@functools.cache
def insert_events_sql(position: str | None = "?") -> str:
    """The INSERT of one events row from a `StoredEvent`'s fields, in order; ``position``
    is the SQL value of its position (a ``?`` for the row's own), None for no position
    column (the database gives one; the row's fields bound without theirs)."""
    if position is None:
        return (
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
    return (
        "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary, pos) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, {position})"
    )


_MAY_BE_NULL = frozenset(
    name
    for name, spec in SessionSummary.model_fields.items()
    if type(None) in get_args(spec.annotation)
)
"""The projection columns whose value may be None."""
_NULL_PLACES: dict[str, tuple[int, ...]] = {}
"""The SQL of each projection write made below -> the positions of its parameters that may
be None (`null_places`)."""


def null_places(text: str) -> tuple[int, ...] | None:
    """The positions of the parameters of a projection write ``text`` (as made here) whose
    value may be None; None for any other statement (any parameter may be None)."""
    return _NULL_PLACES.get(text)


def _noting_nulls(text: str, params: Iterable[str]) -> str:
    """``text``, its ``params`` (the column each parameter is compared with or set to)
    noted for `null_places`."""
    _NULL_PLACES[text] = tuple(place for place, name in enumerate(params) if name in _MAY_BE_NULL)
    return text


@functools.cache
def update_sql(names: tuple[str, ...]) -> str:
    """The UPDATE of the projection columns ``names`` of one session's row."""
    return _noting_nulls(
        f"UPDATE sessions SET {', '.join(f'{n} = ?' for n in names)} WHERE session_id = ?",
        (*names, "session_id"),
    )


@functools.cache
def guarded_update_sql(names: tuple[str, ...], same: str, indexed: tuple[str, ...]) -> str:
    """`update_sql` that changes the row only while it is the head the plan was made on."""
    return _noting_nulls(
        f"{update_sql(names)} AND last_seq = ? AND head_hash = ? AND fold_version = ? "
        f"AND {' AND '.join(f'{n} {same} ?' for n in indexed)}",
        (*names, "session_id", "last_seq", "head_hash", "fold_version", *indexed),
    )


@functools.cache
def upsert_sql(names: tuple[str, ...]) -> str:
    """The INSERT of a whole projection row (``names``), or its UPDATE when it is there."""
    updates = ", ".join(f"{name} = excluded.{name}" for name in names if name != "session_id")
    return _noting_nulls(
        f"INSERT INTO sessions({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
        f"ON CONFLICT(session_id) DO UPDATE SET {updates}",
        names,
    )


@functools.cache
def _always_set(indexed: tuple[str, ...], state: bool) -> tuple[str, ...]:
    """The columns of a `projection_row` that an append always writes: all but the key and
    the ``indexed`` ones (and the state JSON unless ``state``)."""
    return tuple(
        name
        for name in (*PROJECTION_COLUMNS, "fold_version", "state")
        if name != "session_id" and name not in indexed and (state or name != "state")
    )


def changed_columns(
    plan: AppendPlan, columns: tuple[str, ...], stored: tuple[Any, ...], state: bool = True
) -> tuple[tuple[str, ...], list[Any]]:
    """The projection columns to SET for ``plan``'s state, and their values: all but the
    key and the indexed ``columns`` that keep their ``stored`` value (and the state JSON
    unless ``state``)."""
    values = plan.state.__dict__
    names = _always_set(columns, state)
    if value_picker(columns)(values) != stored:  # rare: most appends change no indexed column
        names += tuple(
            name for name, value in zip(columns, stored, strict=True) if values[name] != value
        )
    return names, projection_values(plan.state, plan.head_hash, names)
