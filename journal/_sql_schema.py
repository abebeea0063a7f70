"""Opening a SQL journal: check what is at the target, create or upgrade its schema.

A target without the ``meta`` table is made a journal (unless ``create=False``) when
nothing there says it is something else (`SQLSchema._foreign_tables`: on SQLite any
table, on PostgreSQL one named like a journal's). A journal's schema version and chain
kind are checked against this code's: an older version is upgraded in place (its
migrations, under an exclusive write), a newer one refused, a chain of the other kind
refused. The check runs in a read first, so opening a current journal writes nothing.
"""

from __future__ import annotations

from abc import abstractmethod

from ._sqlstore import SQLStore
from ._sqltx import SqlTx, TxFactory
from .errors import ChainKindError, NotAJournalError, SchemaVersionError, StoreError
from .store import SchemaSetup

__all__ = ["SQLSchema"]


class SQLSchema(SQLStore):
    """`JournalAdmin.schema_setup`, and the check of the schema a backend runs on opening."""

    _setup: SchemaSetup

    @abstractmethod
    def _foreign_tables(self, tables: set[str]) -> set[str]:
        """The tables that make a target without ``meta`` something other than a journal."""

    @abstractmethod
    def _missing_error(self) -> StoreError:
        """The error for an empty target opened with ``create=False``."""

    @property
    def schema_setup(self) -> SchemaSetup:
        """What opening this journal did to its schema."""
        return self._setup

    def _prepare(self, read: TxFactory, write: TxFactory, *, create: bool, hmac: bool) -> None:
        """Check the schema; create or upgrade it under an exclusive write when needed."""
        with read() as tx:
            found = self._settle(tx, create=create, hmac=hmac, change=False)
        if found is None:
            with write() as tx:
                found = self._settle(tx, create=create, hmac=hmac, change=True)
        assert found is not None
        self._setup = found

    def _settle(self, tx: SqlTx, *, create: bool, hmac: bool, change: bool) -> SchemaSetup | None:
        spec = self.SCHEMA
        tables = self._table_names(tx)
        if "meta" not in tables:
            foreign = self._foreign_tables(tables)
            if foreign:
                raise NotAJournalError(
                    f"{self.target}: is a {self.KIND} but not an agent-journal journal "
                    f"(tables: {', '.join(sorted(foreign)[:5])})"
                )
            if not create:
                raise self._missing_error()
            if not change:
                return None
            for statement in spec.create:
                tx.run(statement)
            tx.run_many(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [
                    ("format", spec.format),
                    ("schema_version", str(spec.version)),
                    ("chain", "hmac-sha256" if hmac else "sha256"),
                ],
            )
            return SchemaSetup(action="created", version=spec.version)
        meta = dict(tx.rows("SELECT key, value FROM meta"))
        if meta.get("format") != spec.format:
            raise NotAJournalError(
                f"{self.target}: has a meta table but is not an agent-journal journal"
            )
        try:
            version = int(meta.get("schema_version", "0"))
        except ValueError:
            raise NotAJournalError(
                f"{self.target}: has a meta table but its schema_version "
                f"{meta.get('schema_version')!r} is not a number"
            ) from None
        oldest = min(spec.migrations, default=spec.version)
        if version < oldest:
            raise NotAJournalError(
                f"{self.target}: has a meta table but its schema_version {version} is not one "
                f"agent-journal ever wrote (the oldest is {oldest})"
            )
        if version > spec.version:
            raise SchemaVersionError(
                f"{self.target}: schema version {version} is newer than this code "
                f"({spec.version}); upgrade agent-journal"
            )
        chain = meta.get("chain", "sha256")
        if chain != ("hmac-sha256" if hmac else "sha256"):
            need = "an HMAC key" if chain == "hmac-sha256" else "no HMAC key"
            raise ChainKindError(
                f"{self.target}: this journal's chain is {chain}; open it with {need}"
            )
        if version == spec.version:
            return SchemaSetup(action="current", version=version)
        if not change:
            return None
        for step in range(version, spec.version):
            for statement in spec.migrations[step]:
                tx.run(statement)
        tx.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(spec.version),))
        return SchemaSetup(action="upgraded", version=spec.version, from_version=version)
