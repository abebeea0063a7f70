"""The primitives the SQL stores are built from: a transaction, a schema spec, guard checks.

`SqlTx` wraps one DB-API connection behind ``?`` placeholders (PostgreSQL's subclass rewrites
them); `SchemaSpec` is a store's versioned DDL; `trigger_problem` words verify's finding
for a guard trigger that is not as the schema defines it; `guard_refusal` is the error a
write that met a guard raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ConflictError, JournalError, UnplannedWriteError
from .problems import Problem
from .records import StoredEvent
from .search import SEARCH_INDEX_TABLE

__all__ = [
    "DERIVED_TABLES",
    "ERASURES_CHAINED_AFTER",
    "JOURNAL_TABLES",
    "OWN_TRIGGERS",
    "SchemaSpec",
    "SqlTx",
    "TriggerState",
    "TxFactory",
    "event_params",
    "guard_refusal",
    "trigger_problem",
]

JOURNAL_TABLES = frozenset({"meta", "events", "sessions", "erasures", "erase_authorised"})
"""The tables of a journal's record, on either store."""
DERIVED_TABLES = frozenset({"snapshots", SEARCH_INDEX_TABLE})
"""Tables the journal derives from its events and keeps itself: not foreign, never a record
(the snapshots, the search index). Extend this (and `OWN_TRIGGERS`) for another one."""
OWN_TRIGGERS: frozenset[str] = frozenset(
    f"{SEARCH_INDEX_TABLE}_{suffix}" for suffix in ("ai", "ad", "au")
)
"""Triggers the journal installs besides its schema's guards (`SchemaSpec.triggers`): for
instance ones that keep a derived table in step. Any other trigger or rule on a table of
`JOURNAL_TABLES` or `DERIVED_TABLES` is foreign, a finding of verify."""

ERASURES_CHAINED_AFTER = (
    "INSERT INTO meta(key, value) SELECT 'erasures_chained_after', "
    "CAST(coalesce(max(id), 0) AS TEXT) FROM erasures"
)
"""Records the last erasure id written before erasures were chained: every later one must
carry its link (a record without one is hand-made)."""

TriggerState = Literal["ok", "replaced", "disabled"]
"""How an installed guard trigger compares with the one the schema defines."""


@dataclass(frozen=True)
class SchemaSpec:
    """A store's versioned DDL: what creates it and what upgrades each older version."""

    format: str
    version: int
    create: tuple[str, ...]
    migrations: dict[int, tuple[str, ...]]
    """Statements that take a schema from version ``key`` to ``key + 1``."""
    triggers: tuple[str, ...]
    purposes: dict[str, str] = field(default_factory=dict)
    """Trigger name -> what it enforces, for verify's messages."""


class SqlTx:
    """One connection inside a transaction (or a read), with ``?`` placeholders."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def sql(self, text: str) -> str:
        """Return ``text`` in the connection's placeholder style."""
        return text

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query and return all its rows."""
        return list(self.connection.execute(self.sql(text), params).fetchall())

    def one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        found = self.rows(text, params)
        return found[0] if found else None

    def run(self, text: str, params: Sequence[Any] = ()) -> None:
        """Run a statement."""
        self.connection.execute(self.sql(text), params)

    def changed(self, text: str, params: Sequence[Any] = ()) -> int:
        """Run a statement and return how many rows it changed."""
        return int(self.connection.execute(self.sql(text), params).rowcount)

    def run_many(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row of parameters."""
        self.connection.executemany(self.sql(text), rows)

    def changed_many(self, text: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run a statement once per row of parameters; return how many rows they changed."""
        return int(self.connection.executemany(self.sql(text), rows).rowcount)


TxFactory = Callable[[], AbstractContextManager[SqlTx]]


def trigger_problem(name: str, purpose: str, state: TriggerState | None) -> Problem:
    """Return verify's finding for a guard trigger that is missing, replaced or disabled."""
    if state is None:
        message = f"trigger {name} is missing: {purpose} is not enforced"
    elif state == "disabled":
        message = f"trigger {name} is disabled: {purpose} is not enforced"
    else:
        message = f"trigger {name} was replaced: {purpose} may not hold"
    return Problem(session_id=None, seq=None, kind="missing_trigger", message=message)


def foreign_problem(kind: str, name: str, table: str) -> Problem:
    """Return verify's finding for a trigger or rule on ``table`` that is not the journal's."""
    return Problem(
        session_id=None,
        seq=None,
        kind="foreign_trigger",
        message=f"{kind} {name} on {table} is not agent-journal's: it may drop or change "
        f"what is written (allow your own with --allow-trigger {name})",
    )


def event_params(row: StoredEvent) -> tuple[Any, ...]:
    """Return the values of an events-table row, in the order of its INSERT's columns."""
    return (row.session_id, row.seq, row.ts, row.type, row.v, row.body, row.hash, row.summary)


TAKEN_SEQ = "append-only (INSERT over a taken seq)"
"""The guard's words for an INSERT over a (session, seq) that holds a row: a lost race."""


def guard_refusal(where: str, text: str) -> JournalError | None:
    """The error of a write one of the schema's guards refused (its message is ``text``).

    An INSERT over a taken seq is another writer's append winning the race: a
    `ConflictError`, which a caller may retry on the new head. Any other guard (an UPDATE
    or DELETE of events, a change of an erasure record) is never met by our own writes: a
    trigger or rule that is not ours (an ``AFTER INSERT`` trigger deleting the new row)
    made the statement change stored rows, so it is an `UnplannedWriteError`, as when such
    a trigger drops the row unseen; retrying would meet it again. None: not a guard's.
    """
    if "append-only" not in text and "an erase needs its audit record" not in text:
        return None
    if TAKEN_SEQ in text:
        return ConflictError(f"{where}: {text}")
    return UnplannedWriteError(
        f"{where}: {text}: a trigger or rule that is not agent-journal's tried to change "
        "stored rows during the write (verify names it); nothing was written"
    )
