"""The hot paths' shortcuts agree with the plain code they stand in for."""

from __future__ import annotations

import enum
import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import field_serializer

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentEvent,
    AgentHalted,
    Journal,
    SessionStarted,
    SessionState,
    ToolCall,
    Usage,
    UserInput,
    fold,
    upcasting,
)
from journal.canonical import (
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    _check_json_walk,
    canonical_object,
    chain_hash,
    check_json,
    check_ts,
    dumps_canonical,
    parse_ts,
    plainly_canonical,
)
from journal.errors import ConflictError, InvalidEventError, JournalError
from journal.events import EventModel, _as_given, _as_given_of, ordered_text
from journal.fold import apply
from journal.projection import _ROW_COLUMNS, projection_row, projection_values, state_json
from journal.records import (
    RecordedEvent,
    StoredEvent,
    canonical_record,
    decode,
    decode_body,
    decode_payload,
    encode,
    from_record,
    where,
)

from .strategies import events, finite_floats, sessions, timestamps


class _Str(str):
    pass


class _Int(enum.IntEnum):
    ONE = 1


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.integers(min_value=INT64_MIN - 2, max_value=INT64_MAX + 2),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([_Str("x"), _Int.ONE, b"bytes", object(), 1j]),
)
_values = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.dictionaries(st.integers(0, 3) | st.text(max_size=2), children, max_size=3),
    ),
    max_leaves=20,
)


def _verdict(check: Any, value: Any) -> str | None:
    try:
        check(value, "$", 0)
    except InvalidEventError as e:
        return str(e)
    return None


@settings(max_examples=400)
@given(_values)
def test_check_json_fast_path_agrees_with_the_full_walk(value: Any) -> None:
    assert _verdict(check_json, value) == _verdict(_check_json_walk, value)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
@pytest.mark.parametrize("leaf", [1, [], {}, [1]])
def test_check_json_depth_limit_is_unchanged(depth: int, leaf: Any) -> None:
    value = _nested(depth, leaf)
    assert _verdict(check_json, value) == _verdict(_check_json_walk, value)


# -- encode: the event's fields as they are, instead of model_dump() --------------------


class _Call(ToolCall):
    """A subclass of a part model: not known to be plain, so dumped by pydantic."""


class _Renamed(ActionCommitted):
    """A subclass of an event model with a serialiser of its own, which encode must honour."""

    @field_serializer("tool")
    def _upper(self, tool: str) -> str:
        return tool.upper()


def _plainly_encoded(event: AgentEvent, seq: int) -> str:
    """The body encode would give going through model_dump(), or the error it raises."""
    payload = event.model_dump()
    try:
        check_json(payload)
    except InvalidEventError as e:
        return f"{where('s', seq)}: {event.type}: {e}"
    payload.update(session_id="s", seq=seq, ts="2026-11-29T23:00:00.000000Z", v=event.VERSION)
    return dumps_canonical(payload).decode()


def _encoded(event: AgentEvent, seq: int) -> str:
    try:
        row = encode("s", seq, "2026-11-29T23:00:00.000000Z", event, "0" * 64, chain_hash)
    except InvalidEventError as e:
        return str(e)
    return row.body


_odd_events = _values.flatmap(
    lambda value: st.sampled_from(
        [
            ActionCommitted(call_id="c", tool="t", args={"a": value}, result=value),
            ActionProposed(calls=[ToolCall(call_id="c", tool="t", args={"a": value})]),
            ActionProposed(calls=[_Call(call_id="c", tool="t", args={"a": value})]),
            ActionFailed(call_id="c", tool="t", kind="timeout", message="m", args={"u": Usage()}),
            SessionStarted(metadata={"k": value}),
            _Renamed(call_id="c", tool="t", result=value),
        ]
    )
)


@settings(max_examples=200)
@given(events, st.integers(0, 5))
def test_encode_agrees_with_encoding_the_model_dump(event: AgentEvent, seq: int) -> None:
    assert _encoded(event, seq) == _plainly_encoded(event, seq)


@settings(max_examples=300)
@given(_odd_events, st.integers(0, 5))
def test_encode_of_odd_values_and_subclasses_agrees_with_encoding_the_model_dump(
    event: AgentEvent, seq: int
) -> None:
    assert _encoded(event, seq) == _plainly_encoded(event, seq)


# -- the sessions projection: an UPDATE of what changed equals a full rewrite -------------


def _projection(path: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(path)) as conn:
        cursor = conn.execute("SELECT * FROM sessions WHERE session_id = 's'")
        names = [column[0] for column in cursor.description]
        row = cursor.fetchone()
    return dict(zip(names, row, strict=True))


def _expected(journal: Journal) -> dict[str, Any]:
    recorded = list(journal.events("s"))
    row = projection_row(fold(recorded), recorded[-1].hash)
    row["session_id"] = "s"
    return {name: value for name, value in row.items() if name != "state"}


_TURNS: list[AgentEvent] = [
    SessionStarted(agent="app.agents:one", model="m"),
    UserInput(text="hi"),
    ActionProposed(
        calls=[ToolCall(call_id="c1", tool="t", args={"q": 1})],
        usage=Usage(input_tokens=10, output_tokens=2),
        cost=0.5,
    ),
    ActionCommitted(call_id="c1", tool="t", args={"q": 1}, result={"ok": True}),
    AgentCompleted(answer="done"),
    UserInput(text="again"),
    ActionFailed(call_id="c2", tool="t", kind="infrastructure", message="down"),
    AgentHalted(rule="error", reason="boom"),
]


def test_projection_after_each_append_from_two_connections(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as one, Journal.open(path) as two:
        for index, event in enumerate(_TURNS):
            (one if index % 2 else two).append("s", [event])
            stored = _projection(path)
            assert {k: v for k, v in stored.items() if k != "state"} == _expected(one)
            folded = fold(one.events("s"))
            assert SessionState.model_validate(orjson.loads(stored["state"])) == folded
            assert stored["state"] == orjson.dumps(folded.model_dump(mode="json")).decode()
            assert one.state("s") == two.state("s") == folded


def test_cached_state_is_not_used_for_a_session_rewritten_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as one, Journal.open(path) as two:
        one.append("s", [SessionStarted(agent="app.agents:one"), UserInput(text="a")])
        two.erase("s", reason="test")
        two.append("s", [SessionStarted(agent="app.agents:two"), UserInput(text="b")])
        one.append("s", [AgentCompleted(answer="ok")])
        assert one.state("s").agent == "app.agents:two"
        assert _projection(path)["agent"] == "app.agents:two"
        assert one.state("s") == fold(one.events("s"))


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE sessions SET status = 'halted'",
        "UPDATE sessions SET agent = NULL",
        "UPDATE sessions SET started = 'x', steps = 99",
        "UPDATE sessions SET fold_version = 1",
    ],
)
def test_a_projection_changed_by_a_foreign_writer_is_rewritten_by_the_next_append(
    tmp_path: Path, tamper: str
) -> None:
    """The cached head only stands in for the stored one while the row is what we wrote."""
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        journal.append("s", _TURNS[:3])
        with closing(sqlite3.connect(path)) as foreign:
            foreign.execute(tamper)
            foreign.commit()
        journal.append("s", _TURNS[3:5])
        assert {k: v for k, v in _projection(path).items() if k != "state"} == _expected(journal)


def test_a_plan_refused_against_a_stale_cache_is_made_again_on_the_stored_head(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as one, Journal.open(path) as two:
        one.append("s", _TURNS[:2])
        two.erase("s", reason="test")
        # Against one's cache (last seq 1) a session_started is out of place; stored, the
        # session is gone and it belongs at seq 0.
        assert one.append("s", [SessionStarted(agent="app.agents:new")], expected_seq=0) == 0
        assert one.state("s").agent == "app.agents:new"
        with pytest.raises(ConflictError, match="next seq is 1"):
            one.append("s", [UserInput(text="late")], expected_seq=2)
        assert [e.seq for e in two.events("s")] == [0]


@given(st.permutations(_ROW_COLUMNS), st.integers(0, len(_ROW_COLUMNS)))
@settings(max_examples=100, deadline=None)
def test_projection_values_pick_what_the_row_holds_in_any_order(
    order: list[str], size: int
) -> None:
    state = fold([SessionStarted(agent="a", model="m"), UserInput(text="hi")])
    names = tuple(order[:size])
    plain = {**state.__dict__, "head_hash": "h" * 64, "state": state_json(state)}
    assert projection_values(state, "h" * 64, names) == [plain[name] for name in names]


def test_apply_builds_a_state_like_a_validated_one() -> None:
    before = fold(_TURNS[:4])
    kept = before.model_dump()
    after = apply(before, _TURNS[4])
    assert type(after) is SessionState and after is not before
    assert after.__dict__ is not before.__dict__
    assert before.model_dump() == kept  # the input is left as it was
    validated = SessionState.model_validate(after.model_dump())
    assert after == validated
    assert after.model_fields_set == validated.model_fields_set
    assert after.__pydantic_extra__ == validated.__pydantic_extra__
    assert after.__pydantic_private__ == validated.__pydantic_private__
    # What _build relies on: no private attributes and no extra fields.
    assert not SessionState.__private_attributes__
    assert SessionState.model_config.get("extra") == "forbid"


@given(sessions())
def test_the_plain_build_folds_every_session_like_the_fast_one(events: list[EventModel]) -> None:
    """The fold's fallback (taken when pydantic's internals move) gives the same states."""
    module = sys.modules["journal.fold"]
    assert module._build is module._fast_build  # this pydantic passes the import-time probe
    fast = [state.model_dump() for state in _states(events)]
    module._build = module._plain_build
    try:
        plain = [state.model_dump() for state in _states(events)]
    finally:
        module._build = module._fast_build
    assert plain == fast


def _states(events: list[EventModel]) -> list[SessionState]:
    states = [fold([])]
    for event in events:
        states.append(apply(states[-1], event))
    return states


def test_a_fast_build_that_misbehaves_is_not_taken() -> None:
    module = sys.modules["journal.fold"]
    fast = module._fast_build
    module._fast_build = lambda values: fast({**values, "steps": values["steps"] + 1})
    try:
        assert not module._fast_build_behaves()
    finally:
        module._fast_build = fast
    assert module._fast_build_behaves()


# -- decode: the direct validation equals the original path, results and errors ----------


def _plain_decode(stored: StoredEvent) -> RecordedEvent:
    """The decode this module replaced, kept verbatim as the reference."""
    at = where(stored.session_id, stored.seq)
    try:
        payload = orjson.loads(stored.body)
    except orjson.JSONDecodeError as e:
        raise InvalidEventError(f"{at}: stored body is not JSON: {e}") from e
    if not isinstance(payload, dict):
        raise InvalidEventError(f"{at}: stored body is not a JSON object")
    for name in ("session_id", "seq", "type", "v", "ts"):
        if payload.pop(name, None) != getattr(stored, name):
            raise InvalidEventError(f"{at}: body field {name!r} disagrees with its envelope")
    payload["type"] = stored.type
    event = decode_payload(stored.type, stored.v, payload, at)
    return RecordedEvent(
        session_id=stored.session_id,
        seq=stored.seq,
        ts=stored.ts,
        v=stored.v,
        hash=stored.hash,
        event=event,
        position=stored.position,
    )


def _outcome(function: Any, stored: StoredEvent) -> tuple[Any, ...]:
    try:
        found = function(stored)
    except JournalError as e:
        return ("error", type(e), str(e))
    return ("ok", found, type(found.event), found.event.model_fields_set)


_TAMPER = st.sampled_from(
    [
        ("drop", "seq"),
        ("drop", "type"),
        ("drop", "v"),
        ("set", "seq", "7"),
        ("set", "seq", 7.0),
        ("set", "v", True),
        ("set", "v", 1.0),
        ("set", "ts", 5),
        ("set", "type", "user_input"),
        ("set", "v", 2),
        ("set", "type", "user_input"),
        ("set", "type", "no_such_type"),
        ("set", "call_id", 5),
        ("set", "text", None),
        ("set", "extra_field", 1),
        ("set", "latency_ms", "12.5"),
        ("set", "usage", {"input_tokens": "3"}),
        ("set", "result", [1, {"a": None}]),
        ("raw", "not json"),
        ("raw", "[1, 2]"),
    ]
)


@settings(max_examples=300)
@given(events, st.integers(0, 5), st.one_of(st.none(), _TAMPER))
def test_decode_agrees_with_the_plain_path(event: Any, seq: int, tamper: Any) -> None:
    stored = encode("s1", seq, "2026-11-29T23:00:00.123456Z", event, "0" * 64, chain_hash)
    if tamper is not None:
        record = orjson.loads(stored.body)
        if tamper[0] == "drop":
            record.pop(tamper[1], None)
            body = orjson.dumps(record).decode()
        elif tamper[0] == "set":
            record[tamper[1]] = tamper[2]
            body = orjson.dumps(record).decode()
        else:
            body = tamper[1]
        stored = stored._replace(body=body, position=3)
    assert _outcome(decode, stored) == _outcome(_plain_decode, stored)


@settings(max_examples=300)
@given(events, st.integers(0, 5), st.one_of(st.none(), _TAMPER))
def test_decode_body_reads_what_decode_reads_whenever_the_row_agrees(
    event: Any, seq: int, tamper: Any
) -> None:
    stored = encode("s1", seq, "2026-11-29T23:00:00.123456Z", event, "0" * 64, chain_hash)
    if tamper is not None:
        record = orjson.loads(stored.body)
        if tamper[0] == "drop":
            record.pop(tamper[1], None)
        elif tamper[0] == "set":
            record[tamper[1]] = tamper[2]
        body = orjson.dumps(record).decode() if tamper[0] != "raw" else tamper[1]
        stored = stored._replace(body=body, position=3)
    strict, from_body = _outcome(decode, stored), _outcome(_decode_body, stored)
    if strict[0] == "ok":
        assert from_body == strict
    else:
        assert from_body[0] == "ok" or issubclass(from_body[1], InvalidEventError)


def _decode_body(stored: StoredEvent) -> RecordedEvent:
    return decode_body(stored.session_id, stored.seq, stored.body, stored.hash, stored.position)


def test_events_read_the_body_and_verify_reports_a_row_that_disagrees(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        journal.append("s", _TURNS[:2], ts="2026-11-29T23:00:00.000000Z")
        last = list(journal.stored_events("s"))[-1]
    row = encode("s", 2, "2026-11-29T23:00:01.000000Z", UserInput(text="b"), last.hash, chain_hash)
    with closing(sqlite3.connect(path)) as conn:  # the ts column lies about the body
        conn.execute(
            "INSERT INTO events(session_id, seq, ts, type, v, body, hash, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.session_id,
                row.seq,
                "2000-01-01T00:00:00.000000Z",
                row.type,
                row.v,
                row.body,
                row.hash,
                row.summary,
            ),
        )
        conn.commit()
    with Journal.open(path) as journal:
        assert [e.ts for e in journal.events("s")][-1] == "2026-11-29T23:00:01.000000Z"
        problems = journal.verify(["s"]).problems
        assert [(p.seq, p.kind) for p in problems if p.kind == "undecodable"] == [
            (2, "undecodable")
        ]
        assert "'ts' disagrees with its envelope" in problems[0].message


def test_decode_runs_upcasters_for_old_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = encode(
        "s1", 1, "2026-11-29T23:00:00.123456Z", UserInput(text="hi"), "0" * 64, chain_hash
    )
    old = stored._replace(body=stored.body.replace('"text"', '"message"'), v=0)
    old = old._replace(body=old.body.replace('"v":1', '"v":0'))
    assert _outcome(decode, old) == _outcome(_plain_decode, old)  # no upcaster: an error
    monkeypatch.setitem(
        upcasting._UPCASTERS,
        ("user_input", 0),
        lambda payload: {
            **{k: v for k, v in payload.items() if k != "message"},
            "text": payload["message"],
        },
    )
    assert _outcome(decode, old) == _outcome(_plain_decode, old)
    assert decode(old).event == UserInput(text="hi")


@pytest.mark.parametrize("depth", [1, 150, 197, 198, 250, 253, 254, 255, 256, 300])
def test_decode_of_deeply_nested_values_agrees(depth: int) -> None:
    stored = encode(
        "s1",
        1,
        "2026-11-29T23:00:00.123456Z",
        ActionCommitted(call_id="c", tool="t"),
        "0" * 64,
        chain_hash,
    )
    nested = "[" * depth + "1" + "]" * depth
    body = stored.body.replace('"result":null', f'"result":{nested}')
    assert body != stored.body
    stored = stored._replace(body=body)
    assert _outcome(decode, stored) == _outcome(_plain_decode, stored)


_KEYED = st.recursive(
    st.none() | st.booleans() | st.integers() | finite_floats | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | st.integers(0, 9), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_KEYED)
@settings(max_examples=300, deadline=None)
def test_ordered_text_is_none_exactly_when_the_sorted_text_is_the_same(value: Any) -> None:
    try:
        text = json.dumps(value, ensure_ascii=False)
        plain = None if text == json.dumps(value, ensure_ascii=False, sort_keys=True) else text
    except TypeError:  # keys of mixed types cannot be sorted
        with pytest.raises(TypeError):
            ordered_text(value)
        return
    assert ordered_text(value) == plain


@given(_KEYED | st.floats() | st.integers() | st.lists(st.floats() | st.text()))
@settings(max_examples=300, deadline=None)
def test_the_text_as_given_is_what_json_dumps_gives(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert _as_given(value) == text  # one C encoder, made once
    assert _as_given_of(None)(value) == text  # the stdlib's own, where there is no C


# -- import: canonical lines read once, without the walk or a second dump ----------------


def _plain_canonical_object(raw: bytes) -> dict[str, Any] | None:
    """`canonical_object` as it was: orjson's parse, the whole walk, then the re-dump."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(value) is dict and plainly_canonical(value) and dumps_canonical(value) == raw:
        return value
    return None


def _as_text(value: Any) -> bytes:
    """JSON text of ``value``: canonical when orjson can write it, else some other text."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return repr(value).encode()


_texts = st.one_of(
    _values.map(lambda value: _as_text({"v": value})),
    _values.map(lambda value: _as_text({"v": value}) + b" "),
    st.integers(0, MAX_DEPTH + 3).map(lambda depth: _as_text({"v": _nested(depth, 1)})),
    st.integers(2**63 - 3, 2**64 + 3).map(lambda n: b'{"big":%d,"n":-%d}' % (n, n)),
    st.integers(2**53 - 3, 2**53 + 3).map(lambda n: b'{"a":[%d],"n":-%d}' % (n, n)),
    st.sampled_from([b'{"a":1,"a":2}', b'{"a":1e400}', b'{"a":"\\ud800"}', b'{"b":1,"a":2}']),
    st.binary(max_size=20),
)


@settings(max_examples=500)
@given(_texts)
def test_canonical_object_agrees_with_the_walk_it_skips(raw: bytes) -> None:
    assert canonical_object(raw) == _plain_canonical_object(raw)


def _outcome_of(make: Any) -> Any:
    try:
        return make()
    except JournalError as e:
        return type(e), str(e)


@settings(max_examples=300)
@given(
    events,
    st.integers(0, 5),
    st.booleans(),
    st.sampled_from(["", "nested", "first", "number"]),
)
def test_a_canonical_line_imports_as_its_dict_does(
    event: Any, seq: int, hashed: bool, oddity: str
) -> None:
    """The fast path (the line's own bytes, the hash member cut out) == the dict's path."""
    stored = encode("s1", seq, "2026-11-29T23:00:00.123456Z", event, "0" * 64, chain_hash)
    record = orjson.loads(stored.body)
    if oddity == "nested":  # the hash member repeated in a value before it (not valid: extra)
        record["a"] = {"hash": stored.hash}
    elif oddity == "first":  # a hash that sorts before every other key
        record = {k: v for k, v in record.items() if k in ("seq", "session_id", "ts", "v")}
    elif oddity == "number":
        record["hash"] = 7
    if hashed and oddity != "number":
        record["hash"] = stored.hash
    line = dumps_canonical(record)
    fast = canonical_record(line)
    assert fast is not None
    assert fast.body == dumps_canonical({k: v for k, v in record.items() if k != "hash"})
    assert fast.flat() == record
    slow = _outcome_of(lambda: from_record(record, "0" * 64, chain_hash, "f:2"))
    assert _outcome_of(lambda: from_record(fast, "0" * 64, chain_hash, "f:2")) == slow


@given(timestamps | st.text(max_size=30) | st.sampled_from(["2026-02-30T00:00:00.000000Z", 5]))
def test_check_ts_agrees_with_parse_ts(text: Any) -> None:
    assert _outcome_of(lambda: check_ts(text)) == _outcome_of(lambda: parse_ts(text) and None)
