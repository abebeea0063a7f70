"""Triggers and rules that are not the journal's: appends refuse them, verify names them.

A foreign ``BEFORE INSERT`` trigger that drops the row (SQLite ``RAISE(IGNORE)``, a
PostgreSQL trigger function returning NULL) or a PostgreSQL ``DO INSTEAD NOTHING`` rule
must never let an append report a seq it did not store: the append fails with a store
error and nothing of it is kept. `verify` reports every such trigger and rule, unless it
is allowed by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import Journal, StoreError, UnplannedWriteError, UserInput

from .helpers import run_cli, short_session
from .stores import StoreUnderTest, open_store

DROP_FUNCTION = (
    "CREATE FUNCTION drop_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
)


def _drop_rows(store: StoreUnderTest, table: str, when: str = "INSERT") -> str:
    """Install a foreign trigger that silently drops every ``when`` on ``table``."""
    name = f"drop_{table}_{when.lower()}"
    with store.raw() as raw:
        if store.schema is None:
            raw.run(
                f"CREATE TRIGGER {name} BEFORE {when} ON {table} BEGIN SELECT RAISE(IGNORE); END"
            )
        else:
            if raw.value("SELECT to_regprocedure('drop_row()') IS NULL"):
                raw.run(DROP_FUNCTION)
            raw.run(
                f"CREATE TRIGGER {name} BEFORE {when} ON {table} FOR EACH ROW "
                "EXECUTE FUNCTION drop_row()"
            )
    return name


def _stored(store: StoreUnderTest) -> int:
    with store.raw() as raw:
        return int(raw.value("SELECT count(*) FROM events"))


@pytest.mark.parametrize("events", [1, 3], ids=["one", "several"])
def test_an_append_whose_rows_a_trigger_drops_fails(any_store: StoreUnderTest, events: int) -> None:
    journal = any_store.journal
    journal.append("s", short_session())
    before = _stored(any_store)
    name = _drop_rows(any_store, "events")
    batch = [UserInput(text=f"n{index}") for index in range(events)]
    with pytest.raises(UnplannedWriteError, match=f"0 of {events} events"):
        journal.append("s", batch)  # on this connection's cached head
    with Journal.open(any_store.target) as other, pytest.raises(UnplannedWriteError):
        other.append("s", batch)  # on the stored head
    with pytest.raises(UnplannedWriteError):
        journal.append("new", short_session())  # a new session
    assert _stored(any_store) == before
    assert journal.summary("new") is None
    report = journal.verify()
    assert [(p.kind, p.message.split(":")[0]) for p in report.problems] == [
        ("foreign_trigger", f"trigger {name} on events is not agent-journal's")
    ]
    assert journal.verify(allow_triggers=[name]).ok


def test_an_append_whose_projection_a_trigger_drops_fails(any_store: StoreUnderTest) -> None:
    journal = any_store.journal
    journal.append("s", short_session())
    before = _stored(any_store)
    _drop_rows(any_store, "events")
    _drop_rows(any_store, "sessions", "UPDATE")
    with pytest.raises(UnplannedWriteError):
        journal.append("s", [UserInput(text="again")])
    assert _stored(any_store) == before
    assert {p.kind for p in journal.verify().problems} == {"foreign_trigger"}


@pytest.mark.parametrize("table", ["events", "sessions"])
def test_a_do_instead_nothing_rule_is_refused_and_reported(tmp_path: Path, table: str) -> None:
    with open_store("postgres", tmp_path) as store:  # SQLite has no rules
        journal = store.journal
        journal.append("s", short_session())
        before = _stored(store)
        when = "INSERT" if table == "events" else "UPDATE"
        with store.raw() as raw:
            raw.run(f"CREATE RULE nothing AS ON {when} TO {table} DO INSTEAD NOTHING")
        with pytest.raises(StoreError):
            journal.append("s", [UserInput(text="again")])  # on the cached head
        with Journal.open(store.target) as other, pytest.raises(StoreError):
            other.append("s", [UserInput(text="again")])  # on the stored head
        assert _stored(store) == before
        problems = journal.verify().problems
        assert [p.message.split(":")[0] for p in problems] == [
            f"rule nothing on {table} is not agent-journal's"
        ]


def test_cli_verify_names_a_foreign_trigger_unless_allowed(tmp_path: Path) -> None:
    with open_store("sqlite", tmp_path) as store:
        store.journal.append("s", short_session())
        with store.raw() as raw:
            raw.run("CREATE TRIGGER audit_log AFTER INSERT ON events BEGIN SELECT 1; END")
    found = run_cli("verify", "--db", store.target)
    assert found.exit_code == 1
    assert "journal: foreign_trigger: trigger audit_log on events is not agent-journal's" in (
        found.stdout
    )
    allowed = run_cli("verify", "--db", store.target, "--allow-trigger", "audit_log")
    assert allowed.exit_code == 0, allowed.stdout


@pytest.mark.parametrize("statement", ["DELETE", "UPDATE"])
def test_a_trigger_whose_change_a_guard_blocks_is_an_unplanned_write_not_a_conflict(
    any_store: StoreUnderTest, statement: str
) -> None:
    """An AFTER INSERT trigger that deletes (or edits) the new row meets our guard: the
    append fails, as an `UnplannedWriteError`; a `ConflictError` would invite a retry."""
    journal = any_store.journal
    journal.append("s", short_session())
    before = _stored(any_store)
    change = (
        "DELETE FROM events WHERE pos = NEW.pos"
        if statement == "DELETE"
        else "UPDATE events SET summary = 'x' WHERE pos = NEW.pos"
    )
    with any_store.raw() as raw:
        if any_store.schema is None:
            raw.run(f"CREATE TRIGGER meddle AFTER INSERT ON events BEGIN {change}; END")
        else:
            raw.run(
                "CREATE FUNCTION meddle() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN {change}; RETURN NULL; END $$"
            )
            raw.run(
                "CREATE TRIGGER meddle AFTER INSERT ON events FOR EACH ROW "
                "EXECUTE FUNCTION meddle()"
            )
    with pytest.raises(UnplannedWriteError) as raised:
        journal.append("s", [UserInput(text="again")])
    assert f"events are append-only ({statement} rejected)" in str(raised.value)
    assert "a trigger or rule that is not agent-journal's" in str(raised.value)
    with Journal.open(any_store.target) as other, pytest.raises(UnplannedWriteError):
        other.append("new", short_session())
    assert _stored(any_store) == before


VANISH_PG = """CREATE FUNCTION vanish() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM set_config('session_replication_role', 'replica', true);
    DELETE FROM events WHERE pos = NEW.pos;
    PERFORM set_config('session_replication_role', 'origin', true);
    RETURN NULL;
END $$"""
"""A function that deletes the row its trigger fired for, with the guards off (replica)."""

VANISH_SQLITE = """CREATE TRIGGER {name} AFTER INSERT ON events BEGIN
    INSERT INTO erasures(session_id, erased_at, erased_by, reason, events, head_hash)
        VALUES (NEW.session_id, '2026-01-01T00:00:00Z', 'x', 'x', 1, NEW.hash);
    INSERT INTO erase_authorised(session_id) VALUES (NEW.session_id);
    DELETE FROM events WHERE pos = NEW.pos;
    DELETE FROM erase_authorised WHERE session_id = NEW.session_id;
END"""
"""SQLite's way past the delete guard: a forged audit record authorises the delete."""


def _vanish_rows(store: StoreUnderTest, *, deferred: bool = False) -> str:
    """Install a foreign trigger that deletes every new events row after it is inserted."""
    name = "zz_vanish"  # sorts after every trigger of ours
    with store.raw() as raw:
        if store.schema is None:
            raw.run(VANISH_SQLITE.format(name=name))
            return name
        raw.run(VANISH_PG)
        kind = "CONSTRAINT TRIGGER" if deferred else "TRIGGER"
        later = "DEFERRABLE INITIALLY DEFERRED " if deferred else ""
        raw.run(
            f"CREATE {kind} {name} AFTER INSERT ON events {later}FOR EACH ROW "
            "EXECUTE FUNCTION vanish()"
        )
    return name


def _import_one(journal: Journal, source: Journal, session_id: str) -> int:
    rows = [("-", row.record()) for row in source.stored_events(session_id)]
    return journal.import_records(session_id, rows)


@pytest.mark.parametrize(
    ("kind", "deferred"),
    [("sqlite", False), ("postgres", False), ("postgres", True)],  # SQLite defers no trigger
    ids=["sqlite", "postgres", "postgres-deferred"],
)
def test_an_append_whose_rows_a_trigger_deletes_afterwards_is_refused(
    tmp_path: Path, kind: str, deferred: bool
) -> None:
    """Issue 45 item 2: rows counted as inserted, then deleted by a foreign AFTER trigger
    (or a deferred one, at commit), must not make an acknowledged append."""
    with open_store(kind, tmp_path) as store:
        _refused_though_counted(store, tmp_path, deferred)


def _refused_though_counted(any_store: StoreUnderTest, tmp_path: Path, deferred: bool) -> None:
    journal = any_store.journal
    journal.append("s", short_session())
    with Journal.open(tmp_path / "source.db") as source:
        source.append("imported", short_session())
        before = _stored(any_store)
        name = _vanish_rows(any_store, deferred=deferred)
        batches = {"one": [UserInput(text="n")], "many": [UserInput(text="m")] * 70}
        for label, batch in batches.items():  # 70: past the one-statement path (COPY)
            with pytest.raises(UnplannedWriteError, match="events are there at commit"):
                journal.append("s", batch)  # on the cached head
            with Journal.open(any_store.target) as other, pytest.raises(UnplannedWriteError):
                other.append("s", batch)  # on the stored head
            assert _stored(any_store) == before, label
        with pytest.raises(UnplannedWriteError):
            journal.append("new", short_session())
        with pytest.raises(UnplannedWriteError):
            _import_one(journal, source, "imported")
    assert _stored(any_store) == before
    assert journal.summary("new") is None and journal.summary("imported") is None
    assert journal.summary("s") is not None and journal.summary("s").events == 5
    problems = journal.verify().problems
    assert [(p.kind, p.message.split(":")[0]) for p in problems] == [
        ("foreign_trigger", f"trigger {name} on events is not agent-journal's")
    ]
