"""A psycopg connection behind `SqlTx`'s ``?`` placeholders, with its reserved positions.

Every statement of the PostgreSQL journal runs through a `PgTx`: the queries are written
once for both stores with ``?`` placeholders (`journal._sqltx`) and rewritten here to
psycopg's ``%s``. A write transaction also carries the global positions it reserved
before its first write (`journal._pg_appends`), which its inserts then use up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from ._sqltx import SqlTx

__all__ = ["PgTx"]


class PgTx(SqlTx):
    """A psycopg connection behind the ``?``-placeholder interface of `SqlTx`.

    It also holds the global positions reserved for the transaction: ``next_position`` up
    to ``end_position`` (exclusive) are still to be written.
    """

    next_position = 0
    end_position = 0
    reserving = False
    """True while the statement that takes the positions lock runs."""

    def use_positions(self, count: int) -> int:
        """Return the first of ``count`` reserved positions and mark them written."""
        first = self.next_position
        if first + count > self.end_position:
            raise AssertionError("positions are reserved before an append's first write")
        self.next_position = first + count
        return first

    def sql(self, text: str) -> str:
        """Rewrite ``?`` placeholders to psycopg's ``%s``."""
        return text.replace("?", "%s")

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query and return its rows (none for a statement without results)."""
        cursor = self.connection.execute(self.sql(text) if params else text, params or None)
        return list(cursor.fetchall()) if cursor.description else []

    def one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        cursor = self.connection.execute(self.sql(text) if params else text, params or None)
        return cast("tuple[Any, ...] | None", cursor.fetchone())

    def run(self, text: str, params: Sequence[Any] = ()) -> None:
        """Run a statement (text without parameters is sent as is: DDL holds ``%``)."""
        self.connection.execute(self.sql(text) if params else text, params or None)

    def run_many(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row, pipelined."""
        with self.connection.cursor() as cursor:
            cursor.executemany(self.sql(text), rows)

    def copy(self, target: str, rows: Sequence[Sequence[Any]]) -> int:
        """Load rows into ``target`` (``table(columns)``) with COPY; return the rows loaded.

        Triggers fire as on INSERT; rules do not.
        """
        with self.connection.cursor() as cursor:
            with cursor.copy(f"COPY {target} FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return int(cursor.rowcount)
