"""DDL of the PostgreSQL journal, versioned; the triggers are the append-only guarantee.

The tables mirror the SQLite journal's (same names and columns, ``TEXT COLLATE "C"`` where
SQLite compares bytes), so both stores run the same queries. The payload is TEXT, never
JSONB, and ``ts`` is TEXT: the stored bytes are the canonical bytes.

The guard functions run with ``search_path`` pinned to the journal's schema (``SET
search_path FROM CURRENT`` while the schema is created), so they check the right tables
whatever the search path of the connection that fires them.

Global positions come from the sequence `POSITIONS`; each event row also keeps ``tx``, the
id of the transaction that wrote it. An append takes its transaction id and its positions in
one short critical section (`journal.postgres` explains why and how followers use the two
columns), so positions grow with transaction ids, and nothing is held until commit.

Version 2 added the loop's metrics to the sessions projection. Version 3 lets our own appends
past the overwrite check (see `APPEND_FLAG`): PostgreSQL has no ``INSERT OR REPLACE``, an
``ON CONFLICT DO UPDATE`` is an UPDATE (rejected), and the check is there to turn a foreign
writer's ``ON CONFLICT DO NOTHING`` over a taken key into an error instead of a silent drop.
Version 4 replaced the one-row ``global_position`` counter, whose row lock every append held
until commit (all writers queued on it), by the sequence and the ``tx`` column. Version 5
chained the erasure audit records (`ERASURE_HASH`; rows written before keep an empty hash).
"""

from __future__ import annotations

from ._sqltx import ERASURES_CHAINED_AFTER, SchemaSpec

FORMAT = "agent-journal"
SCHEMA_VERSION = 6

POSITIONS = "event_positions"
"""The sequence global positions are taken from (``CACHE 1``: a value is handed out when it
is taken, which the ordering argument in `journal.postgres` relies on)."""

SESSIONS_FILLFACTOR = 50
"""Room on each page of ``sessions`` for the next version of its rows: an append rewrites its
session's row (about 1.7 KB with the folded state), and an update that fits on the row's page
and changes no indexed column skips the indexes (HOT). 8 writers, 300 appends each: 67% of
the updates HOT and 40 KB of table at 50, 54% and 1.2 MB at 100 (the default)."""

POSITIONS_OUT_OF_ORDER = """
SELECT pos, before FROM (
    SELECT pos, tx, lag(pos) OVER w AS before, lag(tx) OVER w AS before_tx
    FROM events WINDOW w AS (ORDER BY pos, tx)) AS e
WHERE pos = before OR tx < before_tx ORDER BY pos LIMIT 1"""
"""The first row, in position order, whose position repeats the one below it or whose
transaction is older than that row's: positions taken with the transaction id under one
lock grow with it (`verify`)."""

POSITIONS_FROM = "positions_from"
"""The ``meta`` key whose value is the id of the transaction that created the sequence (or
upgraded the schema to it): every transaction that takes positions has a larger one, so it
bounds from below who can hold a gap before the oldest row left (an erased beginning)."""
POSITIONS_FROM_ROW = (
    f"INSERT INTO meta(key, value) SELECT '{POSITIONS_FROM}', pg_current_xact_id()::text"
)

TABLES = (
    """CREATE TABLE meta (
        key TEXT COLLATE "C" PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    f"CREATE SEQUENCE {POSITIONS} AS BIGINT MINVALUE 1 CACHE 1",
    POSITIONS_FROM_ROW,
    """CREATE TABLE events (
        pos BIGINT NOT NULL UNIQUE,
        session_id TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        ts TEXT COLLATE "C" NOT NULL,
        type TEXT COLLATE "C" NOT NULL,
        v INTEGER NOT NULL,
        body TEXT NOT NULL,
        hash TEXT COLLATE "C" NOT NULL,
        summary TEXT NOT NULL,
        tx XID8 NOT NULL DEFAULT pg_current_xact_id(),
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX events_tx ON events(tx, pos)",
    f"""CREATE TABLE sessions (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        agent TEXT COLLATE "C",
        model TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL,
        events BIGINT NOT NULL,
        turns BIGINT NOT NULL,
        steps BIGINT NOT NULL,
        failures BIGINT NOT NULL,
        tokens_in BIGINT NOT NULL,
        tokens_out BIGINT NOT NULL,
        tokens_cached BIGINT NOT NULL,
        cost DOUBLE PRECISION NOT NULL,
        started TEXT COLLATE "C",
        ended TEXT COLLATE "C",
        last_seq BIGINT NOT NULL,
        head_hash TEXT COLLATE "C" NOT NULL,
        replay_of TEXT COLLATE "C",
        forked_from TEXT COLLATE "C",
        fork_seq BIGINT,
        halt_rule TEXT COLLATE "C",
        repairs BIGINT NOT NULL DEFAULT 0,
        committed BIGINT NOT NULL DEFAULT 0,
        model_calls BIGINT NOT NULL DEFAULT 0,
        latency_ms DOUBLE PRECISION NOT NULL DEFAULT 0,
        model_failures BIGINT NOT NULL DEFAULT 0,
        fold_version INTEGER NOT NULL,
        state TEXT NOT NULL
    ) WITH (fillfactor = {SESSIONS_FILLFACTOR})""",
    "CREATE INDEX sessions_started ON sessions(started)",
    "CREATE INDEX sessions_status ON sessions(status, started)",
    "CREATE INDEX sessions_agent ON sessions(agent, started)",
    """CREATE TABLE erasures (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT COLLATE "C" NOT NULL,
        erased_at TEXT COLLATE "C" NOT NULL,
        erased_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        events BIGINT NOT NULL,
        head_hash TEXT COLLATE "C" NOT NULL
    )""",
    "CREATE INDEX erasures_session ON erasures(session_id)",
    """CREATE TABLE erase_authorised (
        session_id TEXT COLLATE "C" PRIMARY KEY
    )""",
)

ERASURE_HASH = "ALTER TABLE erasures ADD COLUMN hash TEXT COLLATE \"C\" NOT NULL DEFAULT ''"
"""The chain of erasure audit records (version 5)."""

FUNCTIONS = {
    "agent_journal_reject": """
BEGIN
    RAISE EXCEPTION 'agent-journal: % are append-only (% rejected)', TG_TABLE_NAME, TG_OP;
END
""",
    "agent_journal_no_delete": """
BEGIN
    IF NOT EXISTS (SELECT 1 FROM erase_authorised WHERE session_id = OLD.session_id) THEN
        RAISE EXCEPTION 'agent-journal: events are append-only (DELETE rejected)';
    END IF;
    RETURN OLD;
END
""",
    "agent_journal_no_overwrite": """
BEGIN
    IF EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND seq = NEW.seq)
        OR EXISTS (SELECT 1 FROM events WHERE pos = NEW.pos) THEN
        RAISE EXCEPTION 'agent-journal: events are append-only (INSERT over a taken seq)';
    END IF;
    RETURN NEW;
END
""",
    "agent_journal_erase_audit": """
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM erasures WHERE session_id = NEW.session_id AND head_hash = (
            SELECT hash FROM events WHERE session_id = NEW.session_id ORDER BY seq DESC LIMIT 1)
    ) THEN
        RAISE EXCEPTION 'agent-journal: an erase needs its audit record in erasures first';
    END IF;
    RETURN NEW;
END
""",
}


APPEND_FLAG = "agent_journal.append"
"""A transaction-local setting our appends turn on (with the position they take), so the
overwrite check, a plpgsql call and two index probes per row, skips rows that are plain
INSERTs or COPYs whose keys the primary key and ``pos`` constraints check anyway."""


def _trigger(
    name: str, when: str, table: str, level: str, function: str, condition: str = ""
) -> tuple[str, str]:
    guard = f"WHEN ({condition}) " if condition else ""
    return name, (
        f"CREATE TRIGGER {name} BEFORE {when} ON {table} FOR EACH {level} "
        f"{guard}EXECUTE FUNCTION {function}()"
    )


_NOT_OUR_APPEND = f"(current_setting('{APPEND_FLAG}'::text, true) IS DISTINCT FROM 'on'::text)"


TRIGGERS = dict(
    (
        _trigger("events_no_update", "UPDATE", "events", "ROW", "agent_journal_reject"),
        _trigger("events_no_delete", "DELETE", "events", "ROW", "agent_journal_no_delete"),
        _trigger("events_no_truncate", "TRUNCATE", "events", "STATEMENT", "agent_journal_reject"),
        _trigger(
            "events_no_overwrite",
            "INSERT",
            "events",
            "ROW",
            "agent_journal_no_overwrite",
            _NOT_OUR_APPEND,
        ),
        _trigger("erasures_no_update", "UPDATE", "erasures", "ROW", "agent_journal_reject"),
        _trigger("erasures_no_delete", "DELETE", "erasures", "ROW", "agent_journal_reject"),
        _trigger(
            "erasures_no_truncate", "TRUNCATE", "erasures", "STATEMENT", "agent_journal_reject"
        ),
        _trigger(
            "erase_requires_audit", "INSERT", "erase_authorised", "ROW", "agent_journal_erase_audit"
        ),
    )
)
"""Trigger name -> its definition, exactly as ``pg_get_triggerdef`` prints it (unqualified)."""

TRIGGER_PURPOSE = {
    "events_no_update": "rejecting UPDATE of events",
    "events_no_delete": "rejecting DELETE of events outside an audited erase",
    "events_no_truncate": "rejecting TRUNCATE of events",
    "events_no_overwrite": "rejecting an insert over an existing (session_id, seq)",
    "erasures_no_update": "rejecting UPDATE of erasure audit records",
    "erasures_no_delete": "rejecting DELETE of erasure audit records",
    "erasures_no_truncate": "rejecting TRUNCATE of erasure audit records",
    "erase_requires_audit": "requiring an audit record before an erase",
}

OUR_TABLES = frozenset({"meta", "events", "sessions", "erasures", "erase_authorised"})


def function_ddl(name: str) -> str:
    """Return the CREATE FUNCTION statement of one guard function."""
    return (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
        f"SET search_path FROM CURRENT AS $body${FUNCTIONS[name]}$body$"
    )


_METRICS = (
    ("repairs", "BIGINT"),
    ("committed", "BIGINT"),
    ("model_calls", "BIGINT"),
    ("latency_ms", "DOUBLE PRECISION"),
)
"""The loop's metrics in the sessions projection (added in version 2)."""


def statements() -> list[str]:
    """Return every statement that creates the current schema, in order."""
    return [
        *TABLES,
        ERASURE_HASH,
        ERASURES_CHAINED_AFTER,
        *(function_ddl(name) for name in FUNCTIONS),
        *TRIGGERS.values(),
    ]


SPEC = SchemaSpec(
    format=FORMAT,
    version=SCHEMA_VERSION,
    create=tuple(statements()),
    migrations={
        1: (
            *(
                f"ALTER TABLE sessions ADD COLUMN {name} {kind} NOT NULL DEFAULT 0"
                for name, kind in _METRICS
            ),
            "UPDATE sessions SET "
            + ", ".join(
                f"{name} = coalesce((state::json->>'{name}')::{kind}, 0)" for name, kind in _METRICS
            ),
        ),
        2: ("DROP TRIGGER events_no_overwrite ON events", TRIGGERS["events_no_overwrite"]),
        3: (
            # Rows written before keep their positions and take the upgrading transaction's
            # id (a stable default is evaluated once): later appends have larger ids.
            "ALTER TABLE events ADD COLUMN tx XID8 NOT NULL DEFAULT pg_current_xact_id()",
            "CREATE INDEX events_tx ON events(tx, pos)",
            f"CREATE SEQUENCE {POSITIONS} AS BIGINT MINVALUE 1 CACHE 1",
            f"SELECT setval('{POSITIONS}', greatest(pos, 1), pos > 0) FROM global_position",
            POSITIONS_FROM_ROW,
            "DROP TABLE global_position",
            f"ALTER TABLE sessions SET (fillfactor = {SESSIONS_FILLFACTOR})",
        ),
        4: (ERASURE_HASH, ERASURES_CHAINED_AFTER),
        5: (
            # The failed model calls (model_call_failed) beside the tool failures, for listings
            "ALTER TABLE sessions ADD COLUMN model_failures BIGINT NOT NULL DEFAULT 0",
            "UPDATE sessions SET model_failures = "
            "coalesce((state::json->>'model_failures')::BIGINT, 0)",
        ),
    },
    triggers=tuple(TRIGGERS),
    purposes=TRIGGER_PURPOSE,
)
