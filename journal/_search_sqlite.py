"""The SQLite search index: a table and its FTS5 index, set up and queried by sqlite-utils.

``search_index`` holds the indexed text (rowid = the event's position); sqlite-utils'
`enable_fts` adds the external-content FTS5 table ``search_index_fts`` (no copy of the
text) and the ``search_index_a[idu]`` triggers that keep it in step, and `Table.search`
runs the ranked query (bm25) with the filters in its WHERE. Words are split by FTS5's
``unicode61`` tokenizer; the query is quoted (`Database.quote_fts`), so its words and
phrases are matched as such, never read as FTS5 syntax.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._search_index import SearchIndex
from ._sqltx import SqlTx
from .search import SEARCH_INDEX_TABLE

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = ["SQLiteSearchIndex"]

_COLUMNS = ("pos", "session_id", "seq", "type", "tools", "ts", "text")


def _db(tx: SqlTx) -> Database:
    """sqlite-utils over the store's connection (it changes no setting of it).

    Imported here, on first use: it brings numpy along, ~0.35 s that every process opening
    a SQLite journal (an import, a listing) paid before it searched anything, or never.
    """
    from sqlite_utils import Database

    return Database(tx.connection, recursive_triggers=False, execute_plugins=False)


def _named(where: str, params: list[Any]) -> tuple[str, dict[str, Any]]:
    """``where`` with its ``?`` placeholders named ``:p0``, ``:p1``... (sqlite-utils' style)."""
    pieces = where.split("?")
    text = pieces[0] + "".join(f":p{i}{piece}" for i, piece in enumerate(pieces[1:]))
    return text, {f"p{i}": value for i, value in enumerate(params)}


class SQLiteSearchIndex(SearchIndex):
    """FTS5 through sqlite-utils."""

    SETUP_IN_TRANSACTION = False
    META_MATCH = (
        "EXISTS (SELECT 1 FROM events e, json_each(CASE WHEN json_valid(e.body) THEN e.body "
        "ELSE '{{}}' END, '$.metadata') m WHERE e.session_id = {session} AND e.seq = 0 "
        "AND m.key = ? AND (CASE m.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
        "WHEN 'null' THEN 'null' ELSE CAST(m.value AS TEXT) END) = ?)"
    )

    def prepare(self, tx: SqlTx, tables: set[str]) -> None:
        """Create what is missing of the table, its FTS5 index and their triggers (each
        statement commits by itself; a setup cut short is completed here next time)."""
        db = _db(tx)
        table = db.table(SEARCH_INDEX_TABLE)
        table.create(
            {
                "pos": int,
                "session_id": str,
                "seq": int,
                "type": str,
                "tools": str,
                "ts": str,
                "text": str,
            },
            pk="pos",
            not_null={"session_id", "seq", "type", "tools", "ts", "text"},
            if_not_exists=True,
        )
        table.create_index(["session_id"], if_not_exists=True)
        try:  # replace: a no-op when it is there with its triggers; rebuilt when not
            table.enable_fts(["text"], fts_version="FTS5", create_triggers=True, replace=True)
        except sqlite3.OperationalError as e:
            if "already exists" not in str(e):  # another process got there first
                raise

    def drop(self, tx: SqlTx) -> None:
        """Drop the FTS5 table (its shadow tables go with it), then the rows and triggers."""
        tx.run(f"DROP TABLE IF EXISTS {SEARCH_INDEX_TABLE}_fts")
        super().drop(tx)

    def add(self, tx: SqlTx, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows; a position already there is left alone (INSERT OR IGNORE)."""
        _db(tx).table(SEARCH_INDEX_TABLE).insert_all(
            (dict(zip(_COLUMNS, row, strict=True)) for row in rows),
            ignore=True,
            batch_size=500,
        )

    def find(
        self, tx: SqlTx, parts: list[str], where: str, params: list[Any], limit: int
    ) -> list[tuple[Any, ...]]:
        """Rank with FTS5's bm25 (lower is better there; negated here)."""
        text, named = _named(where, params)
        query = " ".join('"' + part.replace('"', "") + '"' for part in parts)
        found = (
            _db(tx)
            .table(SEARCH_INDEX_TABLE)
            .search(
                query,
                columns=["session_id", "seq", "type", "ts", "tools", "text", "pos"],
                where=text,
                where_args=named,
                include_rank=True,
                order_by=f'"{SEARCH_INDEX_TABLE}_fts".rank, "original".rowid',
                limit=limit,
            )
        )
        return [
            (
                r["session_id"],
                r["seq"],
                r["type"],
                r["ts"],
                r["tools"],
                r["text"],
                -r["rank"],
                r["pos"],
            )
            for r in found
        ]
