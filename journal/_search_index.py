"""How a SQL store keeps its search index: the shared catch-up, filters and hit mapping.

Each store has a `SearchIndex` (SQLite: `journal._search_sqlite`, PostgreSQL:
`journal._search_pg`) that prepares the derived table on first need, adds rows and runs the
ranked query; `SQLDerived.search` catches the index up, in batches of `BATCH` events each
read and indexed in one write transaction, then queries it. Filters are SQL over the index
table (by its name, unaliased) and the ``sessions`` projection, the same on both stores
but for the metadata match, which each store words for its JSON functions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from ._sqltx import SqlTx
from .records import StoredEvent, as_text
from .search import SEARCH_INDEX_TABLE, SearchFilters, SearchHit, indexed_text, snippet

__all__ = ["BATCH", "SearchIndex", "hit", "hit_clauses", "index_rows", "session_clauses"]

BATCH = 5000
"""Events read and indexed per write transaction while the index catches up."""

_T = SEARCH_INDEX_TABLE


def index_rows(rows: Sequence[StoredEvent]) -> list[tuple[Any, ...]]:
    """The index rows of ``rows``: position, session, seq, type, tools, time, text."""
    found = []
    for row in rows:
        tools, text = indexed_text(row)
        found.append((row.position, row.session_id, row.seq, row.type, tools, row.ts, text))
    return found


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def session_clauses(
    session: str, meta_match: str, *, status: str | None, rule: str | None, meta: Mapping[str, str]
) -> tuple[list[str], list[Any]]:
    """SQL conditions (``?`` placeholders) on the session whose id is the SQL ``session``.

    ``meta_match`` is the store's condition that the session's metadata has key ``?``
    with value ``?``, with ``{session}`` where the session id goes.
    """
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (("status = ?", status), ("halt_rule = ?", rule)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    for key, value in meta.items():
        clauses.append(meta_match.format(session=session))
        params += [key, value]
    return clauses, params


def hit_clauses(filters: SearchFilters, meta_match: str) -> tuple[str, list[Any]]:
    """The WHERE text (over the index table) and parameters that apply ``filters``.

    The session must still be in the projection, so an erased session's rows never match
    even while a catch-up that read them before the erase writes them back.
    """
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (
        ("type = ?", filters.type),
        ("session_id = ?", filters.session_id),
        ("ts >= ?", filters.since),
        ("ts < ?", filters.until),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    if filters.tool is not None:
        clauses.append("tools LIKE ? ESCAPE '\\'")
        params.append(f"% {_escape_like(filters.tool)} %")
    on_session, session_params = session_clauses(
        f"{_T}.session_id",
        meta_match,
        status=filters.status,
        rule=filters.rule,
        meta=filters.meta,
    )
    exists = " AND ".join([f"s.session_id = {_T}.session_id", *on_session])
    clauses.append(f"EXISTS (SELECT 1 FROM sessions s WHERE {exists})")
    return " AND ".join(clauses), params + session_params


def hit(row: Sequence[Any], parts: list[str]) -> SearchHit:
    """A found row (session, seq, type, time, tools, text, rank, position) as a `SearchHit`."""
    session_id, seq, kind, ts, tools, text, rank, _ = row
    return SearchHit(
        session_id=as_text(session_id),
        seq=int(seq),
        type=as_text(kind),
        ts=as_text(ts),
        tools=as_text(tools).split(),
        snippet=snippet(as_text(text), parts),
        rank=float(rank),
    )


class SearchIndex(ABC):
    """One store's search index table: creating it, adding to it, querying it."""

    META_MATCH: str
    SETUP_IN_TRANSACTION: bool
    """Whether `prepare` runs in a write transaction (else outside any)."""
    """The condition that session ``{session}``'s metadata has key ``?`` with value ``?``."""

    @abstractmethod
    def prepare(self, tx: SqlTx, tables: set[str]) -> None:
        """Create what is missing of the index (``tables``: those there now); see
        `SETUP_IN_TRANSACTION` for where it runs."""

    @abstractmethod
    def add(self, tx: SqlTx, rows: Sequence[tuple[Any, ...]]) -> None:
        """Add `index_rows` (a position already indexed is left as it is)."""

    @abstractmethod
    def find(
        self, tx: SqlTx, parts: list[str], where: str, params: list[Any], limit: int
    ) -> list[tuple[Any, ...]]:
        """Matching rows, best first: session, seq, type, time, tools, text, rank (higher
        is better), position."""

    def position(self, tx: SqlTx) -> int:
        """The newest position indexed (0: none)."""
        row = tx.one(f"SELECT coalesce(max(pos), 0) FROM {_T}")
        return 0 if row is None else int(row[0])

    def replace(self, tx: SqlTx, positions: Sequence[int], rows: Sequence[tuple[Any, ...]]) -> None:
        """Remove the rows at ``positions``, then add `index_rows` ``rows`` (their truth)."""
        for position in positions:
            tx.run(f"DELETE FROM {_T} WHERE pos = ?", (position,))
        if rows:
            self.add(tx, rows)

    def drop(self, tx: SqlTx) -> None:
        """Remove the whole index (the next search builds it again from the events)."""
        tx.run(f"DROP TABLE IF EXISTS {_T}")

    def drop_session(self, tx: SqlTx, session_id: str) -> None:
        """Remove a session's rows (an erase, in its transaction)."""
        tx.run(f"DELETE FROM {_T} WHERE session_id = ?", (session_id,))
