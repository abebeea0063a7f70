"""The PostgreSQL search index: a ``tsvector`` column kept by the server, with a GIN index.

``search_index`` holds the indexed text and ``doc``, generated from it with the ``simple``
configuration (words split by PostgreSQL's parser, lower-cased, no stemming: as FTS5's
``unicode61`` on SQLite). A query part (a word or a quoted phrase) is a
``phraseto_tsquery``; every part must match; ``ts_rank_cd`` ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._search_index import SearchIndex
from ._sqltx import SqlTx
from .search import SEARCH_INDEX_TABLE

__all__ = ["PostgresSearchIndex"]

_T = SEARCH_INDEX_TABLE

DDL = (
    "SELECT pg_advisory_xact_lock("
    "hashtextextended('agent-journal search ' || current_schema(), 0))",
    f"""CREATE TABLE IF NOT EXISTS {_T} (
        pos BIGINT PRIMARY KEY,
        session_id TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        type TEXT COLLATE "C" NOT NULL,
        tools TEXT COLLATE "C" NOT NULL,
        ts TEXT COLLATE "C" NOT NULL,
        text TEXT NOT NULL,
        doc tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
    )""",
    f"CREATE INDEX IF NOT EXISTS {_T}_doc ON {_T} USING GIN (doc)",
    f"CREATE INDEX IF NOT EXISTS {_T}_session ON {_T} (session_id)",
)
"""The index's tables, created once under a lock (two first searches may race)."""


class PostgresSearchIndex(SearchIndex):
    """tsvector + GIN."""

    SETUP_IN_TRANSACTION = True
    META_MATCH = (
        "EXISTS (SELECT 1 FROM events e WHERE e.session_id = {session} AND e.seq = 0 "
        "AND (e.body::jsonb -> 'metadata' ->> ?) = ?)"
    )

    def prepare(self, tx: SqlTx, tables: set[str]) -> None:
        """Create the table and its indexes when missing (in the caller's transaction)."""
        if SEARCH_INDEX_TABLE in tables:
            return
        for statement in DDL:
            tx.run(statement)

    def add(self, tx: SqlTx, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows; a position already there is left alone."""
        tx.run_many(
            f"INSERT INTO {_T}(pos, session_id, seq, type, tools, ts, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pos) DO NOTHING",
            rows,
        )

    def find(
        self, tx: SqlTx, parts: list[str], where: str, params: list[Any], limit: int
    ) -> list[tuple[Any, ...]]:
        """Rank with ``ts_rank_cd`` (higher is better)."""
        query = " && ".join("phraseto_tsquery('simple', ?)" for _ in parts)
        return tx.rows(
            f"SELECT session_id, seq, type, ts, tools, text, ts_rank_cd(doc, q.q) AS rank, pos "
            f"FROM {_T}, (SELECT {query} AS q) AS q WHERE doc @@ q.q AND {where} "
            f"ORDER BY rank DESC, pos LIMIT ?",
            [*parts, *params, limit],
        )
