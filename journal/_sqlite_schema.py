"""DDL of the SQLite journal, versioned; the triggers are the append-only guarantee.

Version 2 added erasure: the ``erasures`` audit table (append-only itself) and the
``erase_authorised`` table, whose row for a session is the only thing that lets the
``events_no_delete`` trigger through; a row there needs an audit record of the same session
and head hash first. Version 3 added the loop's metrics to the sessions projection (repairs,
committed calls, model calls, model latency), filled from each session's folded state.
Version 4 chained the erasure audit records (`ERASURE_HASH`: each row's ``hash`` links it
to the one before, as events are chained; rows written before keep an empty hash).
Version 5 made a one-event commit write fewer pages: ``events.pos`` lost AUTOINCREMENT (which
rewrote ``sqlite_sequence`` on every commit) and ``sessions`` its status index (the status
flips between running and completed every turn) for a partial one of the halted and failed
sessions (`ENDED_BADLY_INDEX`). Positions are still never given
twice: the meta row `POSITION_FLOOR`, written only by an erase, holds the highest position
given before it, and an insert numbers its row past both it and the rows in place
(`NEXT_POSITION`). `MIGRATIONS` takes an older file to the current version in place.
"""

from __future__ import annotations

from ._sqltx import ERASURES_CHAINED_AFTER, SchemaSpec

FORMAT = "agent-journal"
SCHEMA_VERSION = 6

EVENTS_TABLE = """CREATE TABLE events (
    pos INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts TEXT NOT NULL,
    type TEXT NOT NULL,
    v INTEGER NOT NULL,
    body TEXT NOT NULL,
    hash TEXT NOT NULL,
    summary TEXT NOT NULL,
    UNIQUE (session_id, seq)
)"""

ENDED_BADLY = "status IN ('halted', 'failed')"
"""The sessions a triage lists (``sessions --status failed``); a listing by one of these
statuses adds this very term to its WHERE, so SQLite may use `ENDED_BADLY_INDEX`."""
ENDED_BADLY_INDEX = (
    f"CREATE INDEX sessions_ended_badly ON sessions(status, started) WHERE {ENDED_BADLY}"
)
"""Version 5's status index: partial, so the flips between running and completed at every
turn never write it (a session enters it once, when it halts or fails)."""

TABLES = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    EVENTS_TABLE,
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        agent TEXT,
        model TEXT,
        status TEXT NOT NULL,
        events INTEGER NOT NULL,
        turns INTEGER NOT NULL,
        steps INTEGER NOT NULL,
        failures INTEGER NOT NULL,
        tokens_in INTEGER NOT NULL,
        tokens_out INTEGER NOT NULL,
        tokens_cached INTEGER NOT NULL,
        cost REAL NOT NULL,
        started TEXT,
        ended TEXT,
        last_seq INTEGER NOT NULL,
        head_hash TEXT NOT NULL,
        replay_of TEXT,
        forked_from TEXT,
        fork_seq INTEGER,
        halt_rule TEXT,
        repairs INTEGER NOT NULL DEFAULT 0,
        committed INTEGER NOT NULL DEFAULT 0,
        model_calls INTEGER NOT NULL DEFAULT 0,
        latency_ms REAL NOT NULL DEFAULT 0,
        model_failures INTEGER NOT NULL DEFAULT 0,
        fold_version INTEGER NOT NULL,
        state TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_started ON sessions(started)",
    "CREATE INDEX sessions_agent ON sessions(agent, started)",
    ENDED_BADLY_INDEX,
)

ERASE_TABLES = (
    """CREATE TABLE erasures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        erased_at TEXT NOT NULL,
        erased_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        events INTEGER NOT NULL,
        head_hash TEXT NOT NULL
    )""",
    "CREATE INDEX erasures_session ON erasures(session_id)",
    """CREATE TABLE erase_authorised (
        session_id TEXT PRIMARY KEY
    )""",
)

POSITION_FLOOR = "position_floor"
"""The meta key of the highest position given before an erase (version 5): no row is ever
numbered at or below it, so an erase of the rows with the highest positions does not hand
their positions out again (``read_after`` consumers hold them)."""

NEXT_POSITION = (
    "(SELECT max(coalesce(max(pos), 0), CAST((SELECT value FROM meta "
    f"WHERE key = '{POSITION_FLOOR}') AS INTEGER)) + 1 FROM events)"
)
"""The position of the next row inserted: past every row in place and past `POSITION_FLOOR`
(two seeks: the table's last rowid and one meta key). Once a transaction numbered a row so,
the rows after it may take SQLite's own next rowid (one past the last), past it already."""

LAST_POSITION = 2**63 - 1
"""The largest position: SQLite's largest rowid."""
POSITIONS_READ = (
    "SELECT count(*), min(pos), max(pos), "
    f"(SELECT value FROM meta WHERE key = '{POSITION_FLOOR}'), "
    "(SELECT coalesce(sum(events), 0) FROM erasures) FROM events"
)
"""What `verify` checks the positions by: the rows, the lowest and highest position, the
floor and the events the erasure audit records count."""

KEEP_POSITIONS = (
    f"UPDATE meta SET value = CAST(max(CAST(value AS INTEGER), "
    f"coalesce((SELECT max(pos) FROM events), 0)) AS TEXT) WHERE key = '{POSITION_FLOOR}'"
)
"""Run by an erase before it deletes rows: `POSITION_FLOOR` past every position given."""

ERASURE_HASH = "ALTER TABLE erasures ADD COLUMN hash TEXT NOT NULL DEFAULT ''"
"""The chain of erasure audit records (version 4)."""

TRIGGERS = {
    "events_no_update": """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (UPDATE rejected)');
END""",
    "events_no_delete": """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM erase_authorised WHERE session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (DELETE rejected)');
END""",
    "events_no_overwrite": """CREATE TRIGGER events_no_overwrite BEFORE INSERT ON events
WHEN EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND seq = NEW.seq)
    OR EXISTS (SELECT 1 FROM events WHERE pos = NEW.pos)
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (INSERT over a taken seq)');
END""",
    "erasures_no_update": """CREATE TRIGGER erasures_no_update BEFORE UPDATE ON erasures
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: erasures are append-only (UPDATE rejected)');
END""",
    "erasures_no_delete": """CREATE TRIGGER erasures_no_delete BEFORE DELETE ON erasures
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: erasures are append-only (DELETE rejected)');
END""",
    "erase_requires_audit": """CREATE TRIGGER erase_requires_audit BEFORE INSERT ON erase_authorised
WHEN NOT EXISTS (
    SELECT 1 FROM erasures WHERE session_id = NEW.session_id AND head_hash = (
        SELECT hash FROM events WHERE session_id = NEW.session_id ORDER BY seq DESC LIMIT 1))
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: an erase needs its audit record in erasures first');
END""",
}

TRIGGER_PURPOSE = {
    "events_no_update": "rejecting UPDATE of events",
    "events_no_delete": "rejecting DELETE of events outside an audited erase",
    "events_no_overwrite": "rejecting an insert over an existing (session_id, seq)",
    "erasures_no_update": "rejecting UPDATE of erasure audit records",
    "erasures_no_delete": "rejecting DELETE of erasure audit records",
    "erase_requires_audit": "requiring an audit record before an erase",
}

_ON_EVENTS = ("events_no_update", "events_no_delete", "events_no_overwrite", "erase_requires_audit")
"""The triggers that name the events table."""
_KEPT_IN_V2 = ("events_no_update", "events_no_overwrite")
_METRICS = (
    ("repairs", "INTEGER"),
    ("committed", "INTEGER"),
    ("model_calls", "INTEGER"),
    ("latency_ms", "REAL"),
)

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        *ERASE_TABLES,
        "DROP TRIGGER IF EXISTS events_no_delete",
        *(TRIGGERS[name] for name in TRIGGERS if name not in _KEPT_IN_V2),
    ),
    2: (
        *(
            f"ALTER TABLE sessions ADD COLUMN {name} {kind} NOT NULL DEFAULT 0"
            for name, kind in _METRICS
        ),
        "UPDATE sessions SET "
        + ", ".join(
            f"{name} = coalesce(json_extract(state, '$.{name}'), 0)" for name, _ in _METRICS
        ),
    ),
    3: (ERASURE_HASH, ERASURES_CHAINED_AFTER),
    4: (
        # Version 4's AUTOINCREMENT kept the highest position ever given in sqlite_sequence:
        # that is the floor (an erase may have removed the rows above the highest left).
        f"INSERT INTO meta(key, value) SELECT '{POSITION_FLOOR}', CAST(coalesce(("
        "SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS TEXT)",
        # The triggers go with the table rebuilt (erase_requires_audit reads events).
        *(f"DROP TRIGGER IF EXISTS {name}" for name in _ON_EVENTS),
        "ALTER TABLE events RENAME TO events_v4",
        EVENTS_TABLE,
        "INSERT INTO events(pos, session_id, seq, ts, type, v, body, hash, summary) "
        "SELECT pos, session_id, seq, ts, type, v, body, hash, summary FROM events_v4 "
        "ORDER BY pos",
        "DROP TABLE events_v4",
        *(TRIGGERS[name] for name in _ON_EVENTS),
        "DROP INDEX IF EXISTS sessions_status",
        ENDED_BADLY_INDEX,
    ),
    5: (
        # The failed model calls (model_call_failed) beside the tool failures, for listings
        "ALTER TABLE sessions ADD COLUMN model_failures INTEGER NOT NULL DEFAULT 0",
        "UPDATE sessions SET model_failures = coalesce(json_extract(state, '$.model_failures'), 0)",
    ),
}
"""Statements that take a schema from version ``key`` to ``key + 1``."""


def statements() -> list[str]:
    """Return every statement that creates the current schema, in order."""
    return [
        *TABLES,
        f"INSERT INTO meta(key, value) VALUES ('{POSITION_FLOOR}', '0')",
        *ERASE_TABLES,
        ERASURE_HASH,
        ERASURES_CHAINED_AFTER,
        *TRIGGERS.values(),
    ]


SPEC = SchemaSpec(
    format=FORMAT,
    version=SCHEMA_VERSION,
    create=tuple(statements()),
    migrations=MIGRATIONS,
    triggers=tuple(TRIGGERS),
    purposes=TRIGGER_PURPOSE,
)
