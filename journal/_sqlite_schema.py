"""DDL of the SQLite journal, versioned; the triggers are the append-only guarantee."""

from __future__ import annotations

FORMAT = "agent-journal"
SCHEMA_VERSION = 1

TABLES = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE events (
        pos INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts TEXT NOT NULL,
        type TEXT NOT NULL,
        v INTEGER NOT NULL,
        body TEXT NOT NULL,
        hash TEXT NOT NULL,
        summary TEXT NOT NULL,
        UNIQUE (session_id, seq)
    )""",
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
        fold_version INTEGER NOT NULL,
        state TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_started ON sessions(started)",
    "CREATE INDEX sessions_status ON sessions(status, started)",
    "CREATE INDEX sessions_agent ON sessions(agent, started)",
)

TRIGGERS = {
    "events_no_update": """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (UPDATE rejected)');
END""",
    "events_no_delete": """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (DELETE rejected)');
END""",
    "events_no_overwrite": """CREATE TRIGGER events_no_overwrite BEFORE INSERT ON events
WHEN EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id AND seq = NEW.seq)
    OR EXISTS (SELECT 1 FROM events WHERE pos = NEW.pos)
BEGIN
    SELECT RAISE(ABORT, 'agent-journal: events are append-only (INSERT over a taken seq)');
END""",
}

TRIGGER_PURPOSE = {
    "events_no_update": "rejecting UPDATE of events",
    "events_no_delete": "rejecting DELETE of events",
    "events_no_overwrite": "rejecting an insert over an existing (session_id, seq)",
}


def statements() -> list[str]:
    """Return every statement that creates the current schema, in order."""
    return [*TABLES, *TRIGGERS.values()]
