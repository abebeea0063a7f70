"""The hot paths' shortcuts agree with the plain code they stand in for."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.canonical import INT64_MAX, INT64_MIN, MAX_DEPTH, _check_json_walk, check_json
from journal.errors import InvalidEventError


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
