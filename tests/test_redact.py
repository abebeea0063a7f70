"""Redaction keeps formats, is stable within a session, and leaves no planted secret behind."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from journal import Journal
from journal.formats.jsonl import read_jsonl
from journal.formats.redact import Redactor, luhn_valid, rechain
from replay import replay_fixture, write_fixture

PLANTED = [
    "sk-proj-Abc123Def456Ghi789Jkl0",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
    "hunter2-password",
    "jane.doe@gmail.com",
    "4111 1111 1111 1111",
    "5500-0000-0000-0004",
    "tok_live_bearer_0123456789",
    "ORD-778899",
]


def test_placeholders_keep_the_format_and_are_stable_within_a_session() -> None:
    redactor = Redactor(key=b"fixed")
    record = {
        "session_id": "s1",
        "type": "action_committed",
        "args": {"email": "Jane.Doe@gmail.com", "card": "4111 1111 1111 1111"},
        "result": {"note": "mail jane.doe@gmail.com, card 4111-1111-1111-1111"},
    }
    out = redactor.redact_record(record)
    email = out["args"]["email"]
    assert re.fullmatch(r"user-[a-z0-9]{8}@example\.com", email)
    assert email in out["result"]["note"]  # same secret, same placeholder (case-insensitive)
    card = out["args"]["card"]
    assert len(card) == len("4111 1111 1111 1111") and card[4] == " "
    assert luhn_valid(card.replace(" ", ""))
    dashed = re.search(r"\d{4}-\d{4}-\d{4}-\d{4}", out["result"]["note"])
    assert dashed is not None and dashed.group().replace("-", "") == card.replace(" ", "")
    assert out["session_id"] == "s1" and out["type"] == "action_committed"


def test_other_sessions_get_other_placeholders_and_envelope_fields_are_kept() -> None:
    redactor = Redactor(key=b"fixed")
    one = redactor.redact_record({"session_id": "a", "text": "x@y.io", "seq": 1})
    two = redactor.redact_record({"session_id": "b", "text": "x@y.io", "seq": 1})
    assert one["text"] != two["text"] and one["seq"] == two["seq"] == 1


def test_values_under_secret_key_names_are_replaced_whatever_they_look_like() -> None:
    redactor = Redactor(key=b"fixed")
    out = redactor.redact_payload(
        "s",
        {"config": {"api_key": "plain", "DB_PASSWORD": "pw", "author": "kept", "max_tokens": 9}},
    )
    config = out["config"]
    assert config["api_key"].startswith("redacted-secret-")
    assert config["DB_PASSWORD"].startswith("redacted-secret-")
    assert config["author"] == "kept" and config["max_tokens"] == 9


def test_token_counts_are_counts_not_secrets() -> None:
    usage = {"prompt_token_count": 10, "promptTokenCount": 10, "total_token_count": 17}
    out = Redactor(key=b"fixed").redact_payload(
        "s", {"usage_metadata": {**usage, "access_token": 12345, "token": "t"}}
    )
    kept = out["usage_metadata"]
    assert {key: kept[key] for key in usage} == usage  # (Gemini's usage: a replay reads it)
    assert kept["access_token"] != 12345 and kept["token"].startswith("redacted-secret-")


def test_hashes_and_hex_digests_are_not_mistaken_for_card_numbers() -> None:
    digest = "84efa4ec0e9911552081183ed3fa502419fbb6cec64ceb09c820446b303b7ca9"
    out = Redactor().redact_payload("s", {"config": {"tools": [{"schema_hash": digest}]}})
    assert out["config"]["tools"][0]["schema_hash"] == digest


def test_redacting_twice_changes_nothing() -> None:
    redactor = Redactor()
    once = redactor.redact_text("s", " ".join(PLANTED[:9]))
    assert redactor.redact_text("s", once) == once


@given(st.text(alphabet="0123456789", min_size=13, max_size=19))
def test_card_placeholders_always_pass_luhn_and_keep_length(digits: str) -> None:
    body = digits[:-1]
    check = next(d for d in "0123456789" if luhn_valid(body + d))
    card = body + check
    out = Redactor(key=b"k").redact_text("s", f"card {card} end")
    replaced = out.split()[1]
    assert len(replaced) == len(card) and luhn_valid(replaced)


def _journal_with_secrets(path: Path) -> Journal:
    from agentloop import AgentRuntime, load_agent

    journal = Journal.open(path)
    runtime = AgentRuntime(load_agent("agentloop.examples.refund:build_fixed", seed=3), journal)
    metadata = {"api_key": PLANTED[0], "owner": PLANTED[6], "db": {"password": PLANTED[5]}}
    session = runtime.start("secrets-1", metadata=metadata)
    free_text = [secret for secret in PLANTED if secret not in (PLANTED[5], PLANTED[9])]
    runtime.run(
        "Please refund $150 for order 2210. "
        + " ".join(free_text)
        + f" Authorization: Bearer {PLANTED[9]}",
        session_id=session,
    )
    return journal


def test_no_planted_secret_survives_a_redacted_export(tmp_path: Path) -> None:
    with _journal_with_secrets(tmp_path / "j.db") as journal:
        plain = write_fixture(journal, "secrets-1", tmp_path / "plain.jsonl", redact=False)
        assert all(secret in plain.read_text() for secret in PLANTED)  # they were recorded
        redactor = Redactor(patterns={"order": r"ORD-\d+"})
        path = write_fixture(journal, "secrets-1", tmp_path / "f.jsonl", redactor=redactor)
    text = path.read_text()
    assert [secret for secret in PLANTED if secret in text] == []
    digits = re.sub(r"\D", "", "4111 1111 1111 1111")
    assert digits not in re.sub(r"[ -]", "", text)


def test_a_user_pattern_is_redacted_too(tmp_path: Path) -> None:
    redactor = Redactor(patterns={"order": r"ORD-\d+"})
    assert "ORD-778899" not in redactor.redact_text("s", "about ORD-778899 today")


def test_a_redacted_fixture_still_validates_and_replays_identically(tmp_path: Path) -> None:
    with _journal_with_secrets(tmp_path / "j.db") as journal:
        path = write_fixture(journal, "secrets-1", tmp_path / "f.jsonl")
    parsed = read_jsonl(path)
    assert parsed.records[0][1]["metadata"]["api_key"].startswith("redacted-secret-")
    outcome = replay_fixture(path)
    assert outcome.passed, outcome.result.first_divergence


def test_rechain_gives_a_chain_that_import_verifies(tmp_path: Path) -> None:
    with _journal_with_secrets(tmp_path / "j.db") as journal:
        import orjson

        records = [orjson.loads(row.body) for row in journal.stored_events("secrets-1")]
        chained = rechain(records)
        stored = [row.hash for row in journal.stored_events("secrets-1")]
    assert [record["hash"] for record in chained] == stored
