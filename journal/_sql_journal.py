"""The whole `Journal` over SQL: the classes of each role, over the primitives of a backend.

Each role of the contract (`journal.store`) is implemented once for both SQL stores, in a
module of its own, over `SQLStore` (`journal._sqlstore`: the primitives a backend provides
and the reads every role shares):

* `JournalReader`: `SQLReads` (`journal._sql_read`);
* `JournalWriter`: `SQLAppends` (`journal._sql_append`) and `SQLImports`
  (`journal._sql_import`);
* `JournalAdmin`: `SQLAdmin` (`journal._sql_admin`: the schema, verify, repair, heads,
  erase);
* `JournalDerivedData`: `SQLDerived` (`journal._sql_derived`).

`SQLJournal` combines them; `journal.sqlite.SQLiteJournal` and
`journal.postgres.PostgresJournal` provide the primitives, and change a role where their
database does it better (SQLite: group commit and cheaper inserts, in `journal.sqlite`;
PostgreSQL: the appends in `journal._pg_appends`, the tail in `journal._pg_tailing`). So
SQLite and PostgreSQL run the very same planning (`journal._planner`), projection and
checks.
"""

from __future__ import annotations

from ._sql_admin import SQLAdmin
from ._sql_derived import SQLDerived
from ._sql_import import SQLImports
from ._sql_read import SQLReads
from .store import Journal

__all__ = ["SQLJournal"]


class SQLJournal(SQLReads, SQLImports, SQLAdmin, SQLDerived, Journal):
    """The `Journal` contract over SQL; subclasses supply the connection primitives."""
