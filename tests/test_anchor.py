"""Anchors kept outside the journal, HMAC keys from the CLI, chained erasure records.

Each test plays an attacker with write access who covers their tracks as well as the
journal allows (chain and projection rewritten, the projection rebuilt by ``repair``):
without an anchor, `verify` says ok (the documented blind spot); with one taken before,
the rewrite, the cut or the deletion is a finding. A hand-made erasure record is found
with or without an anchor, and a chain kind that is not the key's is a finding.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from journal import Journal
from journal.anchor import check_anchor, take_anchor
from journal.postgres import describe_url

from .helpers import (
    TickingClock,
    drop_triggers,
    foreign,
    make_journal,
    one_error_line,
    rechain,
    restore_triggers,
    run_cli,
    sample_session,
    short_session,
)
from .stores import StoreUnderTest, fresh_schema, require_server


def _kinds(problems: list[object]) -> list[tuple[str | None, int | None, str]]:
    return [(p.session_id, p.seq, p.kind) for p in problems]  # type: ignore[attr-defined]


def _two_sessions(journal: Journal) -> None:
    journal.append("s1", sample_session())
    journal.append("s2", short_session())


def make_journal_at(url: str, sessions: dict[str, list[object]]) -> None:
    """`make_journal` at a PostgreSQL URL: the same content, the same hashes."""
    with Journal.open(url, clock=TickingClock()) as journal:
        for session_id, events in sessions.items():
            journal.append(session_id, events)  # type: ignore[arg-type]


def _delete_s2(db: Path) -> None:
    """Delete session ``s2`` with its projection from outside, as an attacker would."""
    with foreign(db) as conn:
        drop_triggers(conn)
        conn.execute("DELETE FROM events WHERE session_id = 's2'")
        conn.execute("DELETE FROM sessions WHERE session_id = 's2'")
        restore_triggers(conn)


def test_a_chain_rewritten_with_its_projection_is_found_only_with_an_anchor(
    tmp_path: Path,
) -> None:
    db = tmp_path / "j.db"
    with Journal.open(db) as journal:
        _two_sessions(journal)
        anchor = take_anchor(journal)
    with foreign(db) as conn:
        drop_triggers(conn)
        conn.execute(
            "UPDATE events SET body = replace(body, 'refund order 7', 'refund order 8'), "
            "summary = replace(summary, 'refund order 7', 'refund order 8') "
            "WHERE session_id = 's1' AND seq = 1"
        )
        rechain(conn, "s1")
        restore_triggers(conn)
    with Journal.open(db) as journal:
        journal.repair()  # the attacker rebuilds the projection too
        assert journal.verify().ok  # the blind spot without an anchor
        assert _kinds(check_anchor(journal, anchor)) == [("s1", 13, "anchor")]


def test_a_cut_tail_and_a_deleted_session_are_found_with_an_anchor(
    any_store: StoreUnderTest,
) -> None:
    journal = any_store.journal
    _two_sessions(journal)
    anchor = take_anchor(journal)
    any_store.tamper(
        "DELETE FROM events WHERE session_id = 's1' AND seq > 10",
        "UPDATE sessions SET last_seq = 10, head_hash = "
        "(SELECT hash FROM events WHERE session_id = 's1' AND seq = 10) WHERE session_id = 's1'",
        "DELETE FROM events WHERE session_id = 's2'",
        "DELETE FROM sessions WHERE session_id = 's2'",
    )
    with Journal.open(any_store.target) as other:
        other.repair()
        assert other.verify().ok  # the blind spot: every row above the cut went too
        assert _kinds(check_anchor(other, anchor)) == [
            ("s1", 13, "anchor"),
            ("s2", None, "anchor"),
        ]


def test_appends_and_audited_erasures_after_the_anchor_are_no_finding(
    any_store: StoreUnderTest,
) -> None:
    journal = any_store.journal
    _two_sessions(journal)
    anchor = take_anchor(journal)
    journal.append("s1", short_session()[1:])
    journal.append("s3", short_session())
    journal.erase("s2", reason="retention")
    assert journal.verify().ok
    assert check_anchor(journal, anchor) == []
    later = take_anchor(journal)
    assert later.erasures == 1 and later.erasures_head == journal.erasures()[0].hash


def test_a_hand_made_erasure_record_is_found(any_store: StoreUnderTest) -> None:
    journal = any_store.journal
    _two_sessions(journal)
    journal.erase("s1", reason="retention")
    with any_store.raw() as raw:  # the triggers let this through: it is how an erase starts
        raw.run(
            "INSERT INTO erasures(session_id, erased_at, erased_by, reason, events, head_hash) "
            "SELECT 's2', '2026-01-01T00:00:00.000000Z', 'someone', 'cover-up', 3, hash "
            "FROM events WHERE session_id = 's2' ORDER BY seq DESC LIMIT 1"
        )
        raw.run("INSERT INTO erase_authorised(session_id) VALUES ('s2')")
        raw.run("DELETE FROM events WHERE session_id = 's2'")
        raw.run("DELETE FROM erase_authorised WHERE session_id = 's2'")
        raw.run("DELETE FROM sessions WHERE session_id = 's2'")
    # SQLite: the record counts 3 events, s2 had 5, so the positions do not add up either.
    hole = [(None, None, "position")] if any_store.schema is None else []
    assert _kinds(journal.verify().problems) == [("s2", None, "erasure"), *hole]


def test_an_hmac_journal_rewritten_as_sha256_is_a_finding(tmp_path: Path) -> None:
    db, key = tmp_path / "j.db", tmp_path / "key"
    key.write_bytes(b"s3cret\n")
    with Journal.open(db, hmac_key=b"s3cret") as journal:
        _two_sessions(journal)
    anchor = tmp_path / "anchor.json"
    assert run_cli("anchor", "--db", db, "--hmac-key-file", key, "-o", anchor).exit_code == 0
    assert json.loads(anchor.read_text())["chain"] == "hmac-sha256"
    env = {"AGENT_JOURNAL_HMAC_KEY": "s3cret"}
    assert run_cli("verify", "--db", db, env=env).exit_code == 0
    with foreign(db) as conn:  # the forger rechains every session with plain sha256
        drop_triggers(conn)
        rechain(conn, "s1")
        rechain(conn, "s2")
        conn.execute("UPDATE meta SET value = 'sha256' WHERE key = 'chain'")
        restore_triggers(conn)
    keyed = run_cli("verify", "--db", db, "--hmac-key-file", key)
    assert keyed.exit_code == 1
    assert "chain_kind: " in keyed.stdout and "this journal's chain is sha256" in keyed.stdout
    unkeyed = run_cli("verify", "--db", db, "--anchor", anchor)
    assert unkeyed.exit_code == 1
    assert "chain_kind: the anchor was taken of a hmac-sha256 chain" in unkeyed.stdout


def test_cli_anchor_and_verify_anchor(tmp_path: Path) -> None:
    db = make_journal(tmp_path / "j.db", {"s1": sample_session(), "s2": short_session()})
    anchor = tmp_path / "anchor.json"
    written = run_cli("anchor", "--db", db, "-o", anchor)
    assert written.exit_code == 0
    assert written.stderr.strip() == f"anchored 2 session(s) of {db} in {anchor}"
    assert run_cli("verify", "--db", db, "--anchor", anchor).exit_code == 0
    _delete_s2(db)
    found = run_cli("verify", "--db", db, "--anchor", anchor, "--json")
    assert found.exit_code == 1
    assert [(p["session_id"], p["kind"]) for p in json.loads(found.stdout)["problems"]] == [
        ("s2", "anchor")
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"not json", "not an agent-journal anchor: "),
        (b'{"format": "agent-journal-anchor"}', "not an agent-journal anchor: target: "),
    ],
)
def test_a_bad_anchor_file_is_one_line(tmp_path: Path, content: bytes, expected: str) -> None:
    db = make_journal(tmp_path / "j.db", {"s1": short_session()})
    anchor = tmp_path / "anchor.json"
    anchor.write_bytes(content)
    line = one_error_line(run_cli("verify", "--db", db, "--anchor", anchor))
    assert line.startswith(f"agent-journal: {anchor}: {expected}")


def test_a_missing_key_file_is_one_line(tmp_path: Path) -> None:
    db = make_journal(tmp_path / "j.db", {"s1": short_session()})
    line = one_error_line(run_cli("verify", "--db", db, "--hmac-key-file", tmp_path / "nope"))
    assert line == f"agent-journal: {tmp_path / 'nope'}: cannot read the HMAC key file: " + (
        "No such file or directory"
    )


def test_every_command_that_opens_a_journal_takes_the_key_from_the_environment(
    tmp_path: Path,
) -> None:
    db = tmp_path / "j.db"
    Journal.open(db, hmac_key=b"s3cret").close()
    env = {"AGENT_JOURNAL_HMAC_KEY": "s3cret"}
    assert run_cli("init", "--db", db, env=env).exit_code == 0
    assert run_cli("demo", "--db", db, "--sessions", "1", "--no-tui", env=env).exit_code == 0
    assert run_cli("drain", "--db", db, env=env).exit_code == 0
    # The terminal UI opened the journal: what stops it is the missing terminal.
    line = one_error_line(run_cli("tui", "--db", db, env=env))
    assert line == "agent-journal: the terminal UI needs a terminal (scripts: show, state, diff)"
    with Journal.open(db, hmac_key=b"s3cret") as journal:
        assert journal.verify().ok and len(journal.sessions()) == 1
    unkeyed = one_error_line(run_cli("tui", "--db", db))
    assert "this journal's chain is hmac-sha256; open it with an HMAC key" in unkeyed


def test_an_anchor_of_another_journal_is_one_line_not_a_list_of_deletions(
    tmp_path: Path,
) -> None:
    """Same session ids, other content (two demo journals): not this journal's anchor."""
    ours = make_journal(tmp_path / "ours.db", {"s1": sample_session(), "s2": short_session()})
    theirs = make_journal(
        tmp_path / "theirs.db", {"s1": short_session(), "other": sample_session()}
    )
    anchor = tmp_path / "theirs-anchor.json"
    assert run_cli("anchor", "--db", theirs, "-o", anchor).exit_code == 0
    for extra in ([], ["--json"]):
        line = one_error_line(run_cli("verify", "--db", ours, "--anchor", anchor, *extra))
        assert line.startswith(
            f"agent-journal: {anchor}: the anchor is not of this journal: it was taken of "
            f"{theirs} at "
        )
        assert f"none of the 2 session head(s) it holds is in {ours} " in line
        assert "deleted since the anchor" not in line


def test_an_anchor_of_a_moved_journal_that_still_holds_one_head_is_checked(
    tmp_path: Path,
) -> None:
    """Another path, but one anchored head is there: the journal moved; the rest are findings."""
    db = make_journal(tmp_path / "j.db", {"s1": sample_session(), "s2": short_session()})
    anchor = tmp_path / "anchor.json"
    assert run_cli("anchor", "--db", db, "-o", anchor).exit_code == 0
    moved = tmp_path / "moved.db"
    shutil.copyfile(db, moved)
    _delete_s2(moved)
    found = run_cli("verify", "--db", moved, "--anchor", anchor, "--json")
    assert found.exit_code == 1, found.stderr
    assert [(p["session_id"], p["kind"]) for p in json.loads(found.stdout)["problems"]] == [
        ("s2", "anchor")
    ]


def test_positions_moved_are_found_by_verify_and_by_an_anchor(any_store: StoreUnderTest) -> None:
    """Issue 45 item 5: every position shifted (guards off) keeps the order, not the rest."""
    journal = any_store.journal
    _two_sessions(journal)
    anchor = take_anchor(journal)
    any_store.tamper("UPDATE events SET pos = pos + 1000000")
    with Journal.open(any_store.target) as other:
        found = other.verify().problems
        assert _kinds(found) == [(None, None, "position")]
        past = "1000019 is past the last one the sequence event_positions handed out (19)"
        assert past in found[0].message if any_store.schema else "run to 1000019" in str(found)
        moved = check_anchor(other, anchor)
        assert _kinds(moved) == [("s1", 13, "anchor"), ("s2", 4, "anchor")]
        assert moved[0].message == "seq 13 moved from global position 14, where the anchor " + (
            "saw it, to 1000014"
        )


def test_an_anchor_of_format_1_is_still_read_and_checked(tmp_path: Path) -> None:
    """Anchors written before positions and schemas were anchored (format 1) still work."""
    db = make_journal(tmp_path / "j.db", {"s1": sample_session(), "s2": short_session()})
    anchor = tmp_path / "anchor.json"
    assert run_cli("anchor", "--db", db, "-o", anchor).exit_code == 0
    taken = json.loads(anchor.read_text())
    assert taken["format_version"] == 2 and taken["sessions"][0]["position"] == 14
    old = {key: value for key, value in taken.items() if key != "schema_name"}
    old["format_version"] = 1
    old["sessions"] = [
        {key: value for key, value in item.items() if key != "position"}
        for item in taken["sessions"]
    ]
    anchor.write_text(json.dumps(old))
    assert run_cli("verify", "--db", db, "--anchor", anchor).exit_code == 0
    _delete_s2(db)
    found = run_cli("verify", "--db", db, "--anchor", anchor, "--json")
    assert found.exit_code == 1
    assert [(p["session_id"], p["kind"]) for p in json.loads(found.stdout)["problems"]] == [
        ("s2", "anchor")
    ]


def test_an_anchor_of_another_schema_of_the_same_database_is_refused(tmp_path: Path) -> None:
    """Issue 45 item 10: two schemas of one database, one journal each: the anchors differ,
    and one is refused against the other's journal, even with the same heads in both."""
    server = require_server()
    with fresh_schema(server) as one, fresh_schema(server) as two:
        for schema in (one, two):
            make_journal_at(schema.url, {"s1": sample_session()})  # the same heads in both
        anchor = tmp_path / "one.json"
        assert run_cli("anchor", "--db", one.url, "-o", anchor).exit_code == 0
        assert json.loads(anchor.read_text())["schema_name"] == one.name
        assert run_cli("verify", "--db", one.url, "--anchor", anchor).exit_code == 0
        line = one_error_line(run_cli("verify", "--db", two.url, "--anchor", anchor))
        target = describe_url(server)
        assert line.startswith(
            f"agent-journal: {anchor}: the anchor is not of this journal: it was taken of "
            f"{target} (schema {one.name}) at "
        )
        assert line.endswith(
            f", and this is {target} (schema {two.name}): two schemas of one database are two "
            "journals"
        )
