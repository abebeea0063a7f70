"""Looking after a SQL journal: its schema, verify, repair, the heads anchors take, erasure.

Opening checks what is at the target: one without the ``meta`` table is made a journal
(unless ``create=False``) when nothing there says it is something else
(`SQLAdmin._foreign_tables`: on SQLite any table, on PostgreSQL one named like a
journal's). A journal's schema version and chain kind are checked against this code's: an
older version is upgraded in place (its migrations, under an exclusive write), a newer one
refused, a chain of the other kind refused. The check runs in a read first, so opening a
current journal writes nothing.

Verify reads each session in one snapshot (`SQLStore._snapshot`): its projection row, its
events and its snapshots as of one moment, so appends meanwhile are no finding. It checks
the chain (`journal.verify`), the derived data against the events (`journal._derived`),
the guard triggers, foreign triggers and rules, the chain of erasure audit records, and
the global positions (each session's in seq order with its chain; the whole journal's
against what hands them out, `_position_findings`);
the findings are `journal.problems`. Repair rebuilds derived data from intact events
(`REPAIRABLE`), never an event row. Erase is the one sanctioned DELETE: it writes the
audit record first, chained to the one before it, and lifts the guard for its session
only, in one transaction.
"""

from __future__ import annotations

import getpass
from abc import abstractmethod
from collections.abc import Collection, Sequence

from pydantic import ValidationError

from ._derived import PROJECTION_READ, DerivedCheck
from ._search_check import index_problems
from ._sql_append import upsert_sql
from ._sqlstore import SQLStore
from ._sqltx import (
    DERIVED_TABLES,
    JOURNAL_TABLES,
    OWN_TRIGGERS,
    SqlTx,
    TriggerState,
    TxFactory,
    foreign_problem,
    trigger_problem,
)
from .canonical import GENESIS_HASH, format_ts
from .clock import utc_now
from .errors import (
    ChainKindError,
    InvalidEventError,
    InvalidInputError,
    NotAJournalError,
    SchemaVersionError,
    SessionNotFoundError,
    StoreError,
)
from .fold import FOLD_VERSION, fold
from .problems import Problem, VerifyReport
from .projection import projection_row
from .records import as_text, decode
from .store import Erasure, JournalAdmin, SchemaSetup, erasure_bytes
from .verify import check_session

__all__ = ["REPAIRABLE", "SQLAdmin"]

_ERASURE_COLUMNS = (
    "session_id",
    "erased_at",
    "erased_by",
    "reason",
    "events",
    "head_hash",
    "hash",
)
REPAIRABLE = frozenset({"projection", "snapshot"})
"""The findings `SQLAdmin.repair` mends: derived data rebuilt from intact events."""


class SQLAdmin(SQLStore, JournalAdmin):
    """`JournalAdmin` over SQL: the schema, verify, repair, heads and hashes, erase."""

    _setup: SchemaSetup

    # -- primitives each backend provides --------------------------------------------

    @abstractmethod
    def _trigger_states(self) -> dict[str, TriggerState]:
        """The schema's guard triggers that are installed, by name, and how they compare."""

    @abstractmethod
    def _foreign_objects(self, tables: frozenset[str]) -> list[tuple[str, str, str]]:
        """Every trigger and rule on ``tables``: (``trigger`` or ``rule``, name, table)."""

    @abstractmethod
    def _position_findings(self, tx: SqlTx, *, rows_missing: bool) -> list[str]:
        """What is wrong with the global positions as a whole, read through ``tx`` (one
        snapshot): each finding one sentence (`_position_problems`). ``rows_missing``: the
        chains found rows removed or cut, which a count of the positions would repeat."""

    def _lock_erasures(self, tx: SqlTx) -> None:
        """Serialise erasures until the transaction ends, so their chain never forks."""

    def _keep_positions(self, tx: SqlTx) -> None:
        """Before an erase deletes rows: make sure their positions are never given again
        (PostgreSQL: a no-op, its sequence never goes back)."""

    # -- the schema ------------------------------------------------------------------

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

    # -- verification ----------------------------------------------------------------

    def _every_session(self) -> list[str]:
        """Every session with a projection row or event rows (a damaged one may lack either)."""
        text = "SELECT session_id FROM sessions UNION SELECT session_id FROM events ORDER BY 1"
        return [sid for (sid,) in self._query(text)]

    def verify(
        self,
        session_ids: Sequence[str] | None = None,
        *,
        quick: bool = False,
        allow_triggers: Collection[str] = (),
    ) -> VerifyReport:
        """Check chains, derived data, decoding and triggers; see `Journal.verify`.

        Each session is read in one snapshot of its own (`_snapshot`): its projection row,
        its events and its snapshots as of one moment. Erased sessions are not findings:
        their audit records say where they went.
        """
        problems = self._guard_problems(allow_triggers) + self._erasure_problems()
        targets = self._every_session() if session_ids is None else list(session_ids)
        total = checked = 0
        for session_id in targets:
            with self._snapshot() as tx:
                found, count = self._check_one(tx, session_id, refold=not quick)
            if found is None:
                continue  # erased
            problems.extend(found)
            total += count
            checked += 1
        problems.extend(self._search_index_problems(session_ids))
        if session_ids is None:
            problems += self._position_problems(
                rows_missing=any(p.kind in ("removed", "truncated") for p in problems)
            )
        return VerifyReport(ok=not problems, problems=problems, sessions=checked, events=total)

    def _search_index_problems(self, session_ids: Sequence[str] | None) -> list[Problem]:
        """The search index's rows that disagree with their events (`journal._search_check`)."""
        with self._snapshot() as tx:
            if not self._has_search_index(tx):
                return []
            return index_problems(tx, session_ids)

    def _check_one(
        self, tx: SqlTx, session_id: str, *, refold: bool
    ) -> tuple[list[Problem] | None, int]:
        """One session's findings and row count, read through ``tx`` (None: erased)."""
        stored = tx.one(
            f"SELECT {', '.join(PROJECTION_READ)} FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        projection = None if stored is None else dict(zip(PROJECTION_READ, stored, strict=True))
        last_seq = head = None
        garbled: list[Problem] = []
        if projection is not None:
            last_seq, head = projection["last_seq"], projection["head_hash"]
            if type(last_seq) is not int or not isinstance(head, str):
                garbled.append(
                    Problem(
                        session_id=session_id,
                        seq=None,
                        kind="projection",
                        message=f"the projection's last_seq {last_seq!r:.40} and head hash "
                        f"{head!r:.20} are not a seq and a hash",
                    )
                )
                last_seq = head = None
        derived = None
        if not garbled:
            snapshots = self._snapshot_rows(tx, session_id) if refold else {}
            derived = DerivedCheck(session_id, projection, snapshots, refold=refold)
        try:
            found, count = check_session(
                session_id,
                self._pages(tx.rows, session_id),
                projected_last_seq=last_seq,
                projected_head=head,
                hasher=self.hasher,
                derived=derived,
            )
        except InvalidEventError as e:  # a row a foreign writer gave a non-integer seq
            found = [Problem(session_id=session_id, seq=None, kind="undecodable", message=str(e))]
            count = 1
        if garbled:  # compared with the projection already
            found = garbled + [problem for problem in found if problem.kind != "projection"]
        if projection is None and count == 0:
            if tx.one("SELECT 1 FROM erasures WHERE session_id = ?", (session_id,)):
                return None, 0
            raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
        return found, count

    def _guard_problems(self, allow_triggers: Collection[str]) -> list[Problem]:
        installed = self._trigger_states()
        problems = [
            trigger_problem(name, self.SCHEMA.purposes[name], installed.get(name))
            for name in self.SCHEMA.triggers
            if installed.get(name) != "ok"
        ]
        own = {*self.SCHEMA.triggers, *OWN_TRIGGERS, *allow_triggers}
        problems += [
            foreign_problem(kind, name, table)
            for kind, name, table in self._foreign_objects(JOURNAL_TABLES | DERIVED_TABLES)
            if name not in own
        ]
        for (session_id,) in self._query("SELECT session_id FROM erase_authorised"):
            problems.append(
                Problem(
                    session_id=session_id,
                    seq=None,
                    kind="missing_trigger",
                    message="an erase authorisation was left in place: "
                    "DELETE of this session's events is not rejected",
                )
            )
        return problems

    def _position_problems(self, *, rows_missing: bool) -> list[Problem]:
        """The global positions checked as a whole, in one snapshot (`_position_findings`);
        each session's own order is checked with its chain (`journal.verify`)."""
        with self._snapshot() as tx:
            found = self._position_findings(tx, rows_missing=rows_missing)
        return [
            Problem(session_id=None, seq=None, kind="position", message=message)
            for message in found
        ]

    def _erasure_problems(self) -> list[Problem]:
        """The erasure audit records that do not chain (`journal.store.erasure_bytes`)."""
        found = self._query("SELECT value FROM meta WHERE key = 'erasures_chained_after'")
        chained_after = int(found[0][0]) if found and str(found[0][0]).isdigit() else 0
        previous, problems = GENESIS_HASH, []
        columns = ", ".join(_ERASURE_COLUMNS)
        for record_id, *values in self._query(f"SELECT id, {columns} FROM erasures ORDER BY id"):
            fields = dict(zip(_ERASURE_COLUMNS, values, strict=True))
            try:
                erasure = Erasure.model_validate(fields)
            except ValidationError:
                erasure = None
            if erasure is not None and not erasure.hash and record_id <= chained_after:
                continue  # written before erasures were chained
            if erasure is None or self.hasher(previous, erasure_bytes(erasure)) != erasure.hash:
                problems.append(
                    Problem(
                        session_id=as_text(fields["session_id"]),
                        seq=None,
                        kind="erasure",
                        message=f"erasure audit record {record_id} does not chain to the one "
                        "before it: it was written or altered outside agent-journal",
                    )
                )
            previous = str(fields["hash"])
        return problems

    def _snapshot_rows(self, tx: SqlTx, session_id: str) -> dict[int, str]:
        """The session's stored snapshots of the current fold version: seq -> state JSON."""
        if not self._has_snapshots(tx):
            return {}
        return {
            int(seq): state
            for seq, state in tx.rows(
                "SELECT seq, state FROM snapshots WHERE session_id = ? AND fold_version = ?",
                (session_id, FOLD_VERSION),
            )
        }

    def repair(self, session_ids: Sequence[str] | None = None) -> list[Problem]:
        """Rebuild disagreeing projections, snapshots and the search index from the events; see
        `Journal.repair`."""
        if session_ids is None:
            session_ids = self._every_session()
        repaired: list[Problem] = []
        for session_id in session_ids:
            with self._transaction() as tx:
                self._lock_session(tx, session_id)
                found, _ = self._check_one(tx, session_id, refold=True)
                if not found or {p.kind for p in found} - REPAIRABLE:
                    continue  # intact, erased, or its events themselves are in question
                rows = list(self._pages(tx.rows, session_id))  # some: none would be "truncated"
                row = projection_row(fold(decode(r) for r in rows), rows[-1].hash)
                row["session_id"] = session_id
                tx.run(upsert_sql(tuple(row)), list(row.values()))
                if self._has_snapshots(tx):
                    tx.run("DELETE FROM snapshots WHERE session_id = ?", (session_id,))
            self._heads.pop(session_id, None)
            repaired.extend(found)
        index = self._search_index_problems(session_ids)
        if index:  # derived: dropped whole, built again from the events by the next search
            with self._transaction() as tx:
                self.SEARCH.drop(tx)
            self._search_ready = self._search_table = False
            repaired.extend(index)
        return repaired

    def placed_heads(self) -> dict[str, tuple[int, str, int]]:
        """Each session's last seq, hash and position, read from its event rows (one
        statement); see `Journal.placed_heads`."""
        rows = self._query(
            "SELECT e.session_id, e.seq, e.hash, e.pos FROM events e JOIN "
            "(SELECT session_id, max(seq) AS seq FROM events GROUP BY session_id) m "
            "ON e.session_id = m.session_id AND e.seq = m.seq ORDER BY e.session_id"
        )
        return {as_text(sid): (int(seq), as_text(hash_), int(pos)) for sid, seq, hash_, pos in rows}

    def placed_hash_at(self, session_id: str, seq: int) -> tuple[str, int] | None:
        """The stored hash and position of one event, or None; see `Journal.placed_hash_at`."""
        found = self._query(
            "SELECT hash, pos FROM events WHERE session_id = ? AND seq = ?", (session_id, seq)
        )
        return (as_text(found[0][0]), int(found[0][1])) if found else None

    def hash_at(self, session_id: str, seq: int) -> str | None:
        """The stored hash of one event, or None; see `Journal.hash_at`."""
        with self._reading() as tx:
            return self._hash_at(tx, session_id, seq)

    # -- erasing ---------------------------------------------------------------------

    def erase(self, session_id: str, *, reason: str, erased_by: str | None = None) -> Erasure:
        """Remove a whole session with an audit record; see `Journal.erase`."""
        if not reason.strip():
            raise InvalidInputError(f"session {session_id}: an erase needs a reason")
        with self._transaction() as tx:
            self._lock_session(tx, session_id)
            last = tx.one(
                "SELECT hash FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                (session_id,),
            )
            projected = tx.one("SELECT head_hash FROM sessions WHERE session_id = ?", (session_id,))
            head = last or projected
            if head is None:
                raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
            (count,) = tx.rows("SELECT count(*) FROM events WHERE session_id = ?", (session_id,))[0]
            self._lock_erasures(tx)
            last = tx.one("SELECT hash FROM erasures ORDER BY id DESC LIMIT 1")
            erasure = Erasure(
                session_id=session_id,
                erased_at=format_ts(utc_now()),
                erased_by=erased_by or _os_user(),
                reason=reason.strip(),
                events=int(count),
                head_hash=str(head[0]),
            )
            previous = str(last[0]) if last is not None and last[0] else GENESIS_HASH
            erasure = erasure.model_copy(
                update={"hash": self.hasher(previous, erasure_bytes(erasure))}
            )
            tx.run(
                f"INSERT INTO erasures({', '.join(_ERASURE_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in _ERASURE_COLUMNS)})",
                [getattr(erasure, name) for name in _ERASURE_COLUMNS],
            )
            if count:
                self._keep_positions(tx)
                tx.run("INSERT INTO erase_authorised(session_id) VALUES (?)", (session_id,))
                tx.run("DELETE FROM events WHERE session_id = ?", (session_id,))
                tx.run("DELETE FROM erase_authorised WHERE session_id = ?", (session_id,))
            tx.run("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            if self._has_snapshots(tx):
                tx.run("DELETE FROM snapshots WHERE session_id = ?", (session_id,))
            if self._has_search_index(tx):
                self.SEARCH.drop_session(tx, session_id)
        self._heads.pop(session_id, None)
        return erasure

    def erasures(self, session_id: str | None = None) -> list[Erasure]:
        """Audit records of erased sessions, oldest first; see `Journal.erasures`."""
        text = f"SELECT {', '.join(_ERASURE_COLUMNS)} FROM erasures"
        params: tuple[str, ...] = ()
        if session_id is not None:
            text += " WHERE session_id = ?"
            params = (session_id,)
        return [
            Erasure.model_validate(dict(zip(_ERASURE_COLUMNS, row, strict=True)))
            for row in self._query(text + " ORDER BY id", params)
        ]


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
