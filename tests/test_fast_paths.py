"""The hot paths' shortcuts agree with the plain code they stand in for."""

from __future__ import annotations

import enum
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
)
from journal.canonical import INT64_MAX, INT64_MIN, MAX_DEPTH, _check_json_walk, check_json
from journal.errors import InvalidEventError
from journal.sessions import projection_row


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
