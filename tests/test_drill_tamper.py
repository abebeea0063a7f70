"""The tampering drill: what an attacker with write access tries, and what stops or finds it.

Each attempt runs on a fresh journal of each store (two sessions, an anchor taken first):
through a plain connection with the guards in place, or, where that is refused, as the file
owner or a superuser would (SQLite: the triggers dropped and put back; PostgreSQL:
``session_replication_role = replica``), covering their tracks as far as the journal lets
them (hashes recomputed, the projection rebuilt with ``repair``). An attempt is *refused*
when the write fails, *detected* when `verify` reports it, *anchored* when only
`verify --anchor` does, and *undetected* otherwise. Run with ``-s`` to print the table
(bench/README.md and the README's fault drills quote it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from journal import (
    Journal,
    JournalError,
    PositionError,
    UserInput,
    chain_hash,
    check_anchor,
    take_anchor,
)
from journal.canonical import GENESIS_HASH
from replay import Timeline

from .helpers import sample_session, short_session
from .stores import StoreUnderTest, open_store
from .test_foreign_writes import VANISH_PG, VANISH_SQLITE

Attempt = Callable[[StoreUnderTest], None]


def _param(store: StoreUnderTest) -> str:
    return "?" if store.schema is None else "%s"


def _as_owner(store: StoreUnderTest, action: Callable[[object], None]) -> None:
    """Run ``action(connection)`` with the guards out of the way, then put them back."""
    with store.raw() as raw:
        if store.schema is None:
            for name in store.triggers:
                raw.run(f"DROP TRIGGER {name}")
        else:
            raw.run("SET session_replication_role = replica")
        action(raw.conn)
        if store.schema is None:
            for definition in store.triggers.values():
                raw.run(definition)


def _rechain(store: StoreUnderTest, session_id: str) -> None:
    """Recompute a session's chain from its stored bodies and set the projection's head."""
    q = _param(store)

    def run(conn: object) -> None:
        execute = conn.execute  # type: ignore[attr-defined]
        rows = execute(
            f"SELECT seq, body FROM events WHERE session_id = {q} ORDER BY seq", (session_id,)
        ).fetchall()
        previous = GENESIS_HASH
        for seq, body in rows:
            previous = chain_hash(previous, body.encode("utf-8"))
            execute(
                f"UPDATE events SET hash = {q} WHERE session_id = {q} AND seq = {q}",
                (previous, session_id, seq),
            )
        execute(
            f"UPDATE sessions SET head_hash = {q} WHERE session_id = {q}", (previous, session_id)
        )

    _as_owner(store, run)


def _plain(*statements: str) -> Attempt:
    def attempt(store: StoreUnderTest) -> None:
        with store.raw() as raw:
            for statement in statements:
                raw.run(statement)

    return attempt


def _owner(*statements: str, rechain: bool = False, repair: bool = False) -> Attempt:
    def attempt(store: StoreUnderTest) -> None:
        store.tamper(*statements)
        if rechain:
            _rechain(store, "s1")
        if repair:
            with Journal.open(store.target) as journal:
                journal.repair()

    return attempt


def _foreign_then_append(*statements: str) -> Attempt:
    def attempt(store: StoreUnderTest) -> None:
        with store.raw() as raw:
            for statement in statements:
                raw.run(statement.replace("{drop}", _drop_body(store)))
        store.journal.append("s1", [UserInput(text="after the trigger")])

    return attempt


def _drop_body(store: StoreUnderTest) -> str:
    if store.schema is None:
        return "BEGIN SELECT RAISE(IGNORE); END"
    with store.raw() as raw:
        raw.run(
            "CREATE OR REPLACE FUNCTION drop_row() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN NULL; END $$"
        )
    return "FOR EACH ROW EXECUTE FUNCTION drop_row()"


def _unguarded_update(store: StoreUnderTest) -> None:
    on = "" if store.schema is None else " ON events"
    _plain(
        f"DROP TRIGGER events_no_update{on}",
        f"UPDATE events SET body = {EDIT} WHERE {S1} AND seq = 1",
    )(store)


def _erased_then(attempt: Attempt) -> Attempt:
    def erased(store: StoreUnderTest) -> None:
        store.journal.erase("s2", reason="retention")
        attempt(store)

    return erased


def _snapshot_forged(store: StoreUnderTest) -> None:
    Timeline(store.journal, "s1", interval=4).state_at(12)
    _plain(
        "UPDATE snapshots SET state = (SELECT state FROM snapshots WHERE seq = 3) WHERE seq = 7"
    )(store)


def _erasure_forged(store: StoreUnderTest) -> None:
    _plain(
        "INSERT INTO erasures(session_id, erased_at, erased_by, reason, events, head_hash) "
        "SELECT 's2', '2026-01-01T00:00:00.000000Z', 'x', 'cover-up', 3, hash FROM events "
        "WHERE session_id = 's2' ORDER BY seq DESC LIMIT 1",
        "INSERT INTO erase_authorised(session_id) VALUES ('s2')",
        "DELETE FROM events WHERE session_id = 's2'",
        "DELETE FROM erase_authorised WHERE session_id = 's2'",
        "DELETE FROM sessions WHERE session_id = 's2'",
    )(store)


EDIT = "replace(body, 'refund order 7', 'refund order 8')"
S1 = "session_id = 's1'"


def _per_store(sqlite: Attempt, postgres: Attempt) -> Attempt:
    """One attempt made the way each store allows."""

    def attempt(store: StoreUnderTest) -> None:
        (sqlite if store.schema is None else postgres)(store)

    return attempt


def _vanish_then_append(store: StoreUnderTest) -> None:
    """A foreign trigger deletes each appended row once inserted, guards off (issue 45 #2)."""
    with store.raw() as raw:
        if store.schema is None:
            raw.run(VANISH_SQLITE.format(name="zz_vanish"))
        else:
            raw.run(VANISH_PG)
            raw.run(
                "CREATE TRIGGER zz_vanish AFTER INSERT ON events FOR EACH ROW "
                "EXECUTE FUNCTION vanish()"
            )
    store.journal.append("s1", [UserInput(text="after the trigger")])


TOP = 2**63 - 1
Outcome = str | dict[str, str]
"""What stops or finds an attempt, on both stores or on each (``sqlite``, ``postgres``)."""

ATTEMPTS: dict[str, tuple[Attempt, Outcome]] = {
    "UPDATE an event": (
        _plain(f"UPDATE events SET body = {EDIT} WHERE {S1} AND seq = 1"),
        "refused",
    ),
    "DELETE an event": (_plain(f"DELETE FROM events WHERE {S1} AND seq = 3"), "refused"),
    "DELETE a whole session's events": (_plain(f"DELETE FROM events WHERE {S1}"), "refused"),
    "INSERT over a taken seq": (
        _plain(
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary, pos) "
            f"SELECT session_id, seq, ts, type, v, body, hash, summary, pos + 1000 FROM events "
            f"WHERE {S1} AND seq = 2"
        ),
        "refused",
    ),
    "UPDATE an erasure record": (
        _erased_then(_plain("UPDATE erasures SET reason = 'x'")),
        "refused",
    ),
    "owner: edit an erasure record": (
        _erased_then(_owner("UPDATE erasures SET reason = 'x'")),
        "detected",
    ),
    "forge the projection (status)": (
        _plain(f"UPDATE sessions SET status = 'completed' WHERE {S1}"),
        "detected",
    ),
    "forge the projection (state JSON)": (
        _plain(
            f"UPDATE sessions SET state = replace(state, '\"steps\":', '\"steps\":9') WHERE {S1}"
        ),
        "detected",
    ),
    "forge a snapshot": (_snapshot_forged, "detected"),
    "forge an erasure record and erase": (_erasure_forged, "detected"),
    "append a row by hand": (
        _plain(
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary, pos) "
            "SELECT session_id, seq + 1, ts, type, v, body, hash, summary, pos + 1000 "
            f"FROM events WHERE {S1} AND seq = 13"
        ),
        "detected",
    ),
    "a trigger that drops appended events": (
        _foreign_then_append("CREATE TRIGGER drop_events BEFORE INSERT ON events {drop}"),
        "refused",
    ),
    "drop a guard trigger, then UPDATE an event": (_unguarded_update, "detected"),
    "owner: edit an event": (
        _owner(f"UPDATE events SET body = {EDIT} WHERE {S1} AND seq = 1"),
        "detected",
    ),
    "owner: edit the summary column": (
        _owner(f"UPDATE events SET summary = 'all good' WHERE {S1} AND seq = 1"),
        "detected",
    ),
    "owner: edit an event, rechain, rebuild the projection": (
        _owner(
            f"UPDATE events SET body = {EDIT}, summary = replace(summary, 'order 7', 'order 8') "
            f"WHERE {S1} AND seq = 1",
            rechain=True,
            repair=True,
        ),
        "anchored",
    ),
    "owner: cut the tail, fix the projection": (
        _owner(
            f"DELETE FROM events WHERE {S1} AND seq > 10",
            "UPDATE sessions SET last_seq = 10, head_hash = (SELECT hash FROM events "
            f"WHERE {S1} AND seq = 10) WHERE {S1}",
            repair=True,
        ),
        # SQLite's positions are dense: s2's rows above the cut leave a hole
        {"sqlite": "detected", "postgres": "anchored"},
    ),
    "a trigger that deletes appended rows afterwards, guards off": (_vanish_then_append, "refused"),
    "owner: shift every position (pos + 1000000)": (
        _owner("UPDATE events SET pos = pos + 1000000"),
        "detected",
    ),
    "owner: reverse a session's positions": (
        _owner(
            f"UPDATE events SET pos = -pos WHERE {S1}",
            f"UPDATE events SET pos = 100 + pos WHERE {S1}",
        ),
        "detected",
    ),
    "set what hands out positions past the top, or back": (
        _per_store(
            _plain(f"UPDATE meta SET value = '{TOP - 1}' WHERE key = 'position_floor'"),
            _plain("SELECT setval('event_positions', 1)"),
        ),
        "detected",
    ),
    "owner: delete a session and its projection": (
        _owner(
            "DELETE FROM events WHERE session_id = 's2'",
            "DELETE FROM sessions WHERE session_id = 's2'",
        ),
        "anchored",
    ),
}

REFUSED_ERRORS = (sqlite3.DatabaseError, psycopg.Error, JournalError)


def run_attempt(kind: str, where: Path, attempt: Attempt) -> str:
    """Run one attempt on a fresh journal of ``kind``; return what stopped or found it."""
    with open_store(kind, where) as store:
        store.journal.append("s1", sample_session())
        store.journal.append("s2", short_session())
        anchor = take_anchor(store.journal)
        try:
            attempt(store)
        except REFUSED_ERRORS:
            return "refused"
        with Journal.open(store.target) as journal:
            if not journal.verify().ok:
                return "detected"
            return "anchored" if check_anchor(journal, anchor) else "undetected"


def tally(kind: str, where: Path) -> dict[str, str]:
    """Every attempt's outcome on one store."""
    found = {}
    for index, (name, (attempt, _)) in enumerate(ATTEMPTS.items()):
        (where / str(index)).mkdir(parents=True)
        found[name] = run_attempt(kind, where / str(index), attempt)
    return found


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_drill_tampering(kind: str, tmp_path: Path) -> None:
    found = tally(kind, tmp_path)
    counts = {
        outcome: sum(1 for value in found.values() if value == outcome)
        for outcome in ("refused", "detected", "anchored", "undetected")
    }
    print(
        f"\n{kind}: tried {len(found)}, refused at write {counts['refused']}, detected by verify "
        f"{counts['detected']}, detected only with an anchor {counts['anchored']}, "
        f"undetected {counts['undetected']}"
    )
    for name, outcome in found.items():
        print(f"  {outcome:<10} {name}")
    assert found == {name: _expected(outcome, kind) for name, (_, outcome) in ATTEMPTS.items()}


def _expected(outcome: Outcome, kind: str) -> str:
    return outcome if isinstance(outcome, str) else outcome[kind]


def _events(store: StoreUnderTest) -> list[tuple[int, int]]:
    with store.raw() as raw:
        return [tuple(row) for row in raw.conn.execute("SELECT seq, pos FROM events ORDER BY pos")]


@pytest.mark.parametrize("events", [1, 3], ids=["one", "several"])
def test_an_append_past_the_last_sqlite_position_is_a_position_error(
    tmp_path: Path, events: int
) -> None:
    """Issue 45 item 5: a floor set near 2^63 fails every append with an error that says so
    (no ConflictError to retry, no position lower than one given: SQLite's next rowid past
    its largest is a random one), and verify reports the floor."""
    with open_store("sqlite", tmp_path) as store:
        store.journal.append("s1", short_session())
        with store.raw() as raw:
            raw.run(f"UPDATE meta SET value = '{TOP - 1}' WHERE key = 'position_floor'")
        before = _events(store)
        for _ in range(2):  # the first lands at the very top when it is one event: retried
            try:
                store.journal.append("s1", [UserInput(text="n")] * events)
            except PositionError as e:
                assert "not consecutive" in str(e) or "past the largest" in str(e)
                assert str(e).endswith("nothing was written, and a retry fails the same")
            else:
                assert events == 1 and _events(store)[-1] == (5, TOP)
                before = _events(store)
        assert _events(store) == before
        assert all(
            pos > previous for (_, previous), (_, pos) in zip(before, before[1:], strict=False)
        )
        assert [p.kind for p in store.journal.verify().problems] == ["position"]


def test_a_sequence_set_back_is_a_position_error_not_a_conflict(tmp_path: Path) -> None:
    """Issue 45 item 5: ``setval('event_positions', 1)`` made every append a ConflictError,
    so writers that retry on conflict looped forever."""
    with open_store("postgres", tmp_path) as store:
        store.journal.append("s1", short_session())
        for attempt in range(3):  # the cached head, the stored head, a new session
            with store.raw() as raw:  # each failed append takes positions: set it back again
                raw.run("SELECT setval('event_positions', 1)")
            with pytest.raises(PositionError, match="is taken already \\(it was set back\\)"):
                if attempt == 2:
                    store.journal.append("s2", short_session())
                elif attempt == 1:
                    with Journal.open(store.target) as other:
                        other.append("s1", [UserInput(text="n")] * 70)  # COPY
                else:
                    store.journal.append("s1", [UserInput(text="n")])
        assert len(_events(store)) == 5
        with store.raw() as raw:  # (the failed appends moved it on)
            raw.run("SELECT setval('event_positions', 1)")
        found = store.journal.verify().problems
        assert [p.kind for p in found] == ["position"]
        assert "past the last one the sequence event_positions handed out (1)" in found[0].message
