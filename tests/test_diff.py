"""The aligned diff: content alignment (an inserted event is one insertion, not a shifted
tail), bounded windows for long repeating loops, field-level changes, volatile fields."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import Journal
from replay import align, diff_records, field_changes, fingerprint
from replay import diff as diff_module

from . import replay_helpers as rh
from .helpers import run_cli


def loop_records(count: int, period: int = 3, *, session_id: str = "a") -> list[dict[str, Any]]:
    """A repeating loop: ``period`` different tool calls over and over, flat records."""
    return [
        {
            "type": "action_committed",
            "session_id": session_id,
            "seq": seq,
            "ts": f"2026-01-01T00:00:{seq % 60:02d}.000000Z",
            "hash": f"{seq:064x}",
            "v": 1,
            "call_id": f"c{seq % period}",
            "tool": "poll",
            "args": {"ticket": seq % period},
            "result": {"status": "pending"},
            "duration_ms": float(seq % 7),
        }
        for seq in range(count)
    ]


def distinct_records(count: int) -> list[dict[str, Any]]:
    return [{"type": "user_input", "seq": seq, "text": f"message {seq}"} for seq in range(count)]


def kinds(result: Any) -> list[tuple[str, int | None, int | None]]:
    return [(row.kind, row.a, row.b) for row in result.rows if row.kind != "equal"]


def check_rows(rows: list[tuple[str, int | None, int | None]], a: list[Any], b: list[Any]) -> None:
    """Every index of each side appears once, in order; equal rows pair equal items."""
    assert [i for _, i, _ in rows if i is not None] == list(range(len(a)))
    assert [j for _, _, j in rows if j is not None] == list(range(len(b)))
    for kind, i, j in rows:
        assert (i is None) == (kind == "inserted") and (j is None) == (kind == "removed")
        if kind == "equal":
            assert a[i] == b[j]


@settings(max_examples=300, deadline=None)
@given(
    a=st.lists(st.sampled_from("abcd"), max_size=60),
    b=st.lists(st.sampled_from("abcd"), max_size=60),
    window=st.integers(1, 12),
)
def test_align_covers_both_sides_in_order(a: list[str], b: list[str], window: int) -> None:
    check_rows(align(a, b, window=window), a, b)


@settings(max_examples=100, deadline=None)
@given(
    base=st.lists(st.integers(0, 1000), min_size=1, max_size=80, unique=True),
    data=st.data(),
)
def test_one_inserted_item_is_one_insertion(base: list[int], data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(base)))
    window = data.draw(st.integers(2, 16))
    b = [*base[:at], -1, *base[at:]]
    rows = align(base, b, window=window)
    check_rows(rows, base, b)
    assert [r for r in rows if r[0] != "equal"] == [("inserted", None, at)]
    rows = align(b, base, window=window)
    assert [r for r in rows if r[0] != "equal"] == [("removed", at, None)]


@settings(max_examples=300, deadline=None)
@given(
    period=st.integers(1, 4),
    length=st.integers(20, 400),
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["insert", "remove", "change"])),
        max_size=8,
    ),
)
def test_scattered_edits_of_a_repeating_loop_are_one_row_each(
    period: int, length: int, edits: list[tuple[int, str]]
) -> None:
    a = [str(k % period) for k in range(length)]
    b = list(a)
    places = sorted({at % length for at, _ in edits})
    spaced = [at for n, at in enumerate(places) if n == 0 or at - places[n - 1] >= 8]
    kinds_of = {at % length: kind for at, kind in edits}
    for at in reversed(spaced):  # from the end, so earlier places keep their index
        kind = kinds_of.get(at, "change")
        if kind == "insert":
            b.insert(at, "X")
        elif kind == "remove":
            del b[at]
        else:
            b[at] = "X"
    rows = align(a, b, window=16)
    check_rows(rows, a, b)
    assert len([r for r in rows if r[0] != "equal"]) <= len(spaced)


def test_one_inserted_event_in_a_long_session_is_one_row() -> None:
    a = distinct_records(3000)
    b = [*a[:1700], {"type": "user_input", "seq": 0, "text": "new"}, *a[1700:]]
    result = diff_records(a, b)
    assert kinds(result) == [("inserted", None, 1700)]
    assert result.differences == 1 and not result.identical
    assert result.first_difference() is not None
    assert (result.a_count, result.b_count) == (3000, 3001)


def test_a_changed_event_is_one_changed_row_with_field_paths() -> None:
    a = loop_records(1000)
    b = loop_records(1000, session_id="b")
    b[500] = {**b[500], "result": {"status": "resolved"}, "args": {"ticket": 9}}
    result = diff_records(a, b)
    [row] = [row for row in result.rows if row.kind != "equal"]
    assert (row.kind, row.a, row.b) == ("changed", 500, 500)
    assert [(c.path, c.kind, c.expected, c.actual) for c in row.changes] == [
        ("args.ticket", "changed", 500 % 3, 9),
        ("result.status", "changed", "pending", "resolved"),
    ]


def test_volatile_fields_are_ignored() -> None:
    a = loop_records(50)
    b = [
        {**r, "session_id": "other", "ts": "2030-01-01T00:00:00.000000Z", "duration_ms": 99.0}
        for r in a
    ]
    assert diff_records(a, b).identical
    b[3] = {**b[3], "result": None}
    assert kinds(diff_records(a, b)) == [("changed", 3, 3)]


class CountingMatcher(difflib.SequenceMatcher):
    made: list[tuple[int, int]] = []

    def __init__(self, isjunk: Any, a: Any, b: Any, autojunk: bool = True) -> None:
        CountingMatcher.made.append((len(a), len(b)))
        super().__init__(isjunk, a, b, autojunk)


def test_a_long_repeating_loop_is_aligned_in_bounded_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(diff_module.difflib, "SequenceMatcher", CountingMatcher)
    CountingMatcher.made = []
    a = loop_records(6000, period=3)
    b = loop_records(6000, period=3, session_id="b")
    for index in range(100, 6000, 700):  # changes all along: nothing to trim
        b[index] = {**b[index], "result": {"status": "done"}}
    del b[3000]
    result = diff_records(a, b)
    prints_a, prints_b = [fingerprint(r) for r in a], [fingerprint(r) for r in b]
    check_rows([(r.kind, r.a, r.b) for r in result.rows], prints_a, prints_b)
    assert all(max(sizes) <= diff_module.WINDOW for sizes in CountingMatcher.made)
    assert len(CountingMatcher.made) <= 2 * 6000 // diff_module.WINDOW + 2
    assert result.differences <= 12


def test_field_changes_names_paths() -> None:
    changes = field_changes(
        {"a": 1, "b": {"c": [1, 2]}, "gone": True},
        {"a": 2, "b": {"c": [1, 2, 3]}, "new": "x"},
    )
    assert [(c.path, c.kind) for c in changes] == [
        ("a", "changed"),
        ("b.c[2]", "added"),
        ("gone", "removed"),
        ("new", "added"),
    ]
    assert field_changes({"a": 1}, {"a": "1"})[0].kind == "type_changed"


def test_diff_of_a_session_and_a_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        rh.record(journal, "build_pay", ["pay 90"], session_id="p")
        rh.record(journal, "build_pay", ["pay 40"], session_id="q")
        rh.write_export(journal, "p", tmp_path / "p.jsonl")
        rh.write_export(journal, "p", tmp_path / "p-cut.jsonl", keep=5)
    assert run_cli("diff", "p", tmp_path / "p.jsonl", "--db", path).exit_code == 0
    result = run_cli("diff", tmp_path / "p.jsonl", tmp_path / "p-cut.jsonl", "--json")
    assert result.exit_code == 1
    import json

    document = json.loads(result.stdout)
    assert [row["kind"] for row in document["rows"]] == ["removed"] * 3
    result = run_cli("diff", "p", "q", "--db", path, "--json")
    first = json.loads(result.stdout)["first_divergence"]
    assert first["seq"] == 1 and first["changes"][0]["path"] == "text"


def test_a_nested_configuration_path_the_rules_ignore_is_not_a_config_change() -> None:
    from replay import DEFAULT_RULES, config_changes

    def started(max_steps: int) -> dict[str, Any]:
        return {
            "type": "session_started",
            "agent": "a:b",
            "config": {"guardrails": {"max_steps": max_steps}},
        }

    assert [c.path for c in config_changes(started(10), started(4))] == [
        "config.guardrails.max_steps"
    ]
    ignoring = DEFAULT_RULES.extended({"session_started": ["config.guardrails.max_steps"]})
    assert config_changes(started(10), started(4), ignoring) == ()
