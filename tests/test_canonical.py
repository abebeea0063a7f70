"""Canonical bytes, timestamps, the hash chain and strict parsing of untrusted JSON."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import (
    ActionCommitted,
    ActionProposed,
    InvalidEventError,
    InvalidInputError,
    Journal,
    RepairApplied,
    SessionStarted,
    UserInput,
    canonical_bytes,
    chain_hash,
    encode,
    format_ts,
    import_file,
    loads_strict,
    parse_ts,
)
from journal.canonical import INT64_MAX, INT64_MIN, MAX_DEPTH, sets_ordered

from .helpers import TS0, dump_tables, foreign, make_journal, sample_session, write_lines
from .strategies import events, json_trees, json_values, texts, timestamps

ZEROS = "0" * 64


def reference_bytes(value: Any) -> bytes:
    """What any JSON library produces with sorted keys, no whitespace and raw UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def nested(depth: int) -> Any:
    """A scalar inside ``depth`` levels of alternating arrays and objects."""
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# -- canonical bytes ---------------------------------------------------------------------


def test_keys_are_sorted_at_every_level_without_whitespace_in_raw_utf8() -> None:
    value = {"b": [{"z": 1, "a": "é"}, {"y": None}], "a": {"d": True, "c": -2.5}}
    assert canonical_bytes(value) == (
        b'{"a":{"c":-2.5,"d":true},"b":[{"a":"\xc3\xa9","z":1},{"y":null}]}'
    )


def test_keys_sort_by_code_point_not_utf16() -> None:
    # UTF-16 order would put the emoji (a surrogate pair, 0xD83D...) before U+FF5A.
    value = {"😀": 1, "ｚ": 2, "z": 3, "Z": 4, "é": 5}
    assert canonical_bytes(value) == '{"Z":4,"z":3,"é":5,"ｚ":2,"😀":1}'.encode()


def test_control_characters_are_escaped_and_other_text_is_raw() -> None:
    assert canonical_bytes("\x1b[31m\n\t\u2028é") == b'"\\u001b[31m\\n\\t\xe2\x80\xa8\xc3\xa9"'


@settings(max_examples=200)
@given(json_trees(st.none() | st.booleans() | st.integers(INT64_MIN, INT64_MAX) | texts))
def test_any_language_gets_the_same_bytes_for_floatless_values(value: Any) -> None:
    assert canonical_bytes(value) == reference_bytes(value)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (math.nan, "$"),
        (math.inf, "$"),
        (-math.inf, "$"),
        ({"a": [1, {"b": math.nan}]}, "$.a[1].b"),
        (INT64_MAX + 1, "$"),
        (INT64_MIN - 1, "$"),
        ([2**64], "$[0]"),
        ({"x": {1, 2}}, "$.x"),
        ({"x": b"raw"}, "$.x"),
        ({1: "non-string key"}, "$"),
    ],
)
def test_values_outside_canonical_json_are_rejected_naming_the_path(value: Any, where: str) -> None:
    with pytest.raises(InvalidEventError, match=rf"^{re.escape(where)}: "):
        canonical_bytes(value)


def test_int64_bounds_are_accepted() -> None:
    assert canonical_bytes([INT64_MIN, INT64_MAX]) == f"[{INT64_MIN},{INT64_MAX}]".encode()


def test_depth_limit_is_the_same_for_values_and_parsed_text() -> None:
    deepest = nested(MAX_DEPTH)
    text = canonical_bytes(deepest)
    assert loads_strict(text) == deepest
    with pytest.raises(InvalidEventError, match="nested deeper"):
        canonical_bytes(nested(MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nested deeper"):
        loads_strict(orjson.dumps(nested(MAX_DEPTH + 1)))


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (ActionProposed(cost=math.nan), "action_proposed: $.cost: nan is not a finite number"),
        (ActionProposed(cost=math.inf), "action_proposed: $.cost: inf is not a finite number"),
        (
            ActionCommitted(call_id="c", tool="t", result={"deep": [math.nan]}),
            "action_committed: $.result.deep[0]: nan is not a finite number",
        ),
        (
            ActionCommitted(call_id="c", tool="t", result=INT64_MAX + 1),
            "action_committed: $.result: integer 9223372036854775808 is outside signed 64 bits",
        ),
        (
            ActionCommitted(call_id="c", tool="t", args={"n": -(2**70)}),
            "action_committed: $.args.n: integer -1180591620717411303424 is outside signed 64",
        ),
        (UserInput(text="lone \ud800 surrogate"), "user_input: not canonical JSON: str is not"),
        (
            ActionCommitted(call_id="c", tool="t", result={"when": datetime(2026, 1, 1)}),
            "action_committed: $.result.when: datetime is not a JSON value",
        ),
        (
            RepairApplied(level="flatten", detail="d", after=[{"ids": {1, 2}}]),
            "repair_applied: $.after[0].ids: set is not a JSON value",
        ),
    ],
    ids=[
        "nan",
        "inf",
        "nested-nan",
        "int64-overflow",
        "big-negative",
        "surrogate",
        "datetime",
        "set",
    ],
)
def test_append_rejects_what_is_not_canonical_and_writes_nothing(
    db_path: Path, event: Any, error: str
) -> None:
    with Journal.open(db_path) as journal:
        journal.append("s", [SessionStarted()])
        before = dump_tables(db_path)
        with pytest.raises(InvalidEventError) as caught:
            journal.append("s", [UserInput(text="ok"), event])
        assert str(caught.value).startswith(f"session s seq 2: {error}")
        assert dump_tables(db_path) == before
        assert [e.seq for e in journal.events("s")] == [0]


@pytest.mark.parametrize(
    ("literal", "reason"),
    [
        ("NaN", "not a finite number"),
        ("Infinity", "not a finite number"),
        ("-Infinity", "not a finite number"),
        ("1e999", "overflows to infinity"),
        ("9223372036854775808", "outside signed 64 bits"),
        ("-9223372036854775809", "outside signed 64 bits"),
    ],
)
def test_import_rejects_non_canonical_numbers_never_turning_them_into_null(
    tmp_path: Path, literal: str, reason: str
) -> None:
    header = {"format": "agent-journal", "format_version": 1, "session_id": "s"}
    start = canonical_bytes(
        {"session_id": "s", "seq": 0, "ts": TS0, "type": "session_started", "v": 1}
    )
    fields = f'"call_id":"c","seq":1,"session_id":"s","tool":"t","ts":"{TS0}","v":1'
    line = f'{{{fields},"type":"action_committed","result":{literal}}}'.encode()
    source = write_lines(tmp_path / "in.jsonl", [header, start, line])
    with Journal.open(tmp_path / "j.db") as journal:
        with pytest.raises(InvalidInputError, match=rf"in\.jsonl:3: .*{reason}"):
            import_file(journal, source)
        assert journal.sessions() == []


# -- timestamps --------------------------------------------------------------------------


def test_ts_is_rfc3339_utc_with_microseconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert format_ts(datetime(2026, 11, 30, 1, 0, 0, 123456, tzinfo=plus_two)) == (
        "2026-11-29T23:00:00.123456Z"
    )
    assert format_ts(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000000Z"
    assert format_ts(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000000Z"


@given(st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31), timezones=st.timezones()))
def test_ts_is_the_utc_isoformat_of_any_aware_moment(moment: datetime) -> None:
    utc = moment.astimezone(UTC).isoformat(timespec="microseconds")
    assert format_ts(moment) == utc.removesuffix("+00:00") + "Z"


def test_ts_of_moments_in_turns_each_carry_their_own_minute() -> None:
    moments = [
        datetime(2026, 11, 29, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 29, 23, 59, 0, 1, tzinfo=UTC),
        datetime(2026, 11, 30, 0, 0, 0, tzinfo=UTC),
        datetime(2026, 11, 29, 23, 59, 30, tzinfo=UTC),
        datetime(2027, 11, 29, 23, 59, 30, tzinfo=UTC),
    ]
    assert [format_ts(moment) for moment in moments] == [
        "2026-11-29T23:59:59.999999Z",
        "2026-11-29T23:59:00.000001Z",
        "2026-11-30T00:00:00.000000Z",
        "2026-11-29T23:59:30.000000Z",
        "2027-11-29T23:59:30.000000Z",
    ]


def test_ts_without_timezone_is_rejected() -> None:
    with pytest.raises(InvalidEventError, match="no timezone"):
        format_ts(datetime(2026, 11, 29))


@given(timestamps)
def test_ts_round_trips(text: str) -> None:
    assert format_ts(parse_ts(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T23:00:00Z",
        "2026-11-29T23:00:00.123Z",
        "2026-11-29T23:00:00.123456+00:00",
        "2026-11-29 23:00:00.123456Z",
        "2026-11-29T23:00:00.123456z",
        "2026-02-30T23:00:00.123456Z",
        "２０２６-11-29T23:00:00.123456Z",
        " 2026-11-29T23:00:00.123456Z",
        "",
    ],
)
def test_other_ts_shapes_are_rejected(text: str) -> None:
    with pytest.raises(InvalidEventError, match="timestamp"):
        parse_ts(text)


def test_append_stamps_canonical_ts_and_rejects_a_non_canonical_string(db_path: Path) -> None:
    moment = datetime(2026, 11, 30, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    with Journal.open(db_path, clock=lambda: moment) as journal:
        journal.append("s", [SessionStarted()])
        with pytest.raises(InvalidEventError, match="timestamp 'yesterday'"):
            journal.append("s", [UserInput(text="x")], ts="yesterday")
        journal.append("s", [UserInput(text="y")], ts="2026-11-29T23:00:01.500000Z")
        assert [e.ts for e in journal.events("s")] == [
            "2026-11-29T23:00:00.000000Z",
            "2026-11-29T23:00:01.500000Z",
        ]


# -- the hash chain ----------------------------------------------------------------------


def test_hash_is_sha256_of_previous_hash_and_stored_body(db_path: Path) -> None:
    make_journal(db_path, {"s": sample_session()})
    with foreign(db_path) as conn:
        rows = conn.execute("SELECT seq, body, hash FROM events ORDER BY seq").fetchall()
    previous = ZEROS
    for seq, body, stored in rows:
        record = json.loads(body)
        assert "hash" not in record
        assert (record["seq"], record["session_id"]) == (seq, "s")
        assert body.encode() == reference_bytes(record)
        expected = hashlib.sha256(previous.encode() + body.encode()).hexdigest()
        assert stored == expected
        previous = expected
    assert len(rows) == len(sample_session())


def test_exported_lines_carry_a_hash_any_language_can_recompute(db_path: Path) -> None:
    from journal import export_session

    make_journal(db_path, {"s": sample_session()})
    with Journal.open(db_path) as journal:
        lines = export_session(journal, "s").splitlines()[1:]
    previous = ZEROS
    for line in lines:
        record = json.loads(line)
        assert line == reference_bytes(record)
        claimed = record.pop("hash")
        assert claimed == hashlib.sha256(previous.encode() + reference_bytes(record)).hexdigest()
        previous = claimed


def test_hmac_chain_uses_the_key(db_path: Path) -> None:
    key = b"secret"
    with Journal.open(db_path, hmac_key=key) as journal:
        journal.append("s", [SessionStarted(), UserInput(text="hi")])
        rows = list(journal.stored_events("s"))
    previous = ZEROS
    for row in rows:
        mac = hmac.new(key, previous.encode() + row.body.encode(), hashlib.sha256).hexdigest()
        assert row.hash == mac != chain_hash(previous, row.body.encode())
        previous = mac


# -- strict parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"x": [{"b": 1, "b": 1}]}', "duplicate key 'b'"),
        ("[9223372036854775808]", "outside signed 64 bits"),
        ("-9223372036854775809", "outside signed 64 bits"),
        ("[NaN]", "not a finite number"),
        ('{"a": Infinity}', "not a finite number"),
        ("-Infinity", "not a finite number"),
        ("1e400", "overflows to infinity"),
        ("[" * 100_000 + "]" * 100_000, "nested"),
        ("{'a': 1}", "Expecting property name"),
        ('{"a": 1} x', "Extra data"),
    ],
)
def test_loads_strict_rejects_what_a_lenient_parser_would_change(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        loads_strict(text)


def test_loads_strict_rejects_invalid_utf8_and_accepts_the_bounds() -> None:
    with pytest.raises(ValueError):
        loads_strict(b'"\xff"')
    assert loads_strict(b'{"i":[9223372036854775807,-9223372036854775808],"f":-0.0}') == {
        "i": [INT64_MAX, INT64_MIN],
        "f": -0.0,
    }


# -- properties --------------------------------------------------------------------------


@settings(max_examples=300)
@given(json_values)
def test_codec_round_trip_of_any_json_value(value: Any) -> None:
    data = canonical_bytes(value)
    assert canonical_bytes(loads_strict(data)) == data
    assert canonical_bytes(orjson.loads(data)) == data
    assert loads_strict(data) == value


@given(texts)
def test_any_text_survives_a_round_trip(text: str) -> None:
    assert loads_strict(canonical_bytes({"t": text})) == {"t": text}


@settings(max_examples=200)
@given(events, timestamps)
def test_stored_body_of_any_event_is_canonical_and_chained(event: Any, ts: str) -> None:
    row = encode("s-1", 3, ts, event, ZEROS, chain_hash)
    body = row.body.encode()
    assert canonical_bytes(loads_strict(body)) == body
    assert row.hash == hashlib.sha256(ZEROS.encode() + body).hexdigest()
    record = loads_strict(body)
    assert {k: record.pop(k) for k in ("session_id", "seq", "ts", "type", "v")} == {
        "session_id": "s-1",
        "seq": 3,
        "ts": ts,
        "type": event.type,
        "v": type(event).VERSION,
    }
    assert record == event.model_dump(mode="json", exclude={"type"})


_with_sets = st.recursive(
    st.integers(-5, 5) | st.text(alphabet="ab", max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="xyz", max_size=2), inner, max_size=3)
        | st.frozensets(st.integers(-5, 5), max_size=4)
    ),
    max_leaves=12,
)


def _sorted_sets(value: Any) -> Any:
    """What `sets_ordered` gives, rebuilt all the way down (no sharing)."""
    if isinstance(value, dict):
        return {key: _sorted_sets(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_sorted_sets(item) for item in value]
    if isinstance(value, frozenset):
        return sorted(value)
    return value


@given(_with_sets)
def test_sets_ordered_sorts_every_set_and_copies_nothing_without_one(value: Any) -> None:
    found = sets_ordered(value)
    assert found == _sorted_sets(value)
    if found == value:  # no set anywhere (a set never equals a list)
        assert found is value
