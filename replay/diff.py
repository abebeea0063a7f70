"""Aligned, field-level diff of two runs (two event sequences).

1. Trim the common prefix and suffix by comparing normalised events (their fingerprints).
2. Align the middle by content with `difflib.SequenceMatcher`, in bounded windows, so one
   inserted event does not shift everything after it and a long loop of identical calls
   stays linear instead of quadratic.
3. Compare the aligned pairs with ``==`` and run deepdiff only on pairs that differ.

The result is `DiffResult`: identical, or the aligned rows (equal, changed, inserted,
removed) with the field paths that changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .normalize import DEFAULT_RULES, NormalizationRules, fingerprint, normalize

__all__ = ["WINDOW", "Change", "DiffResult", "DiffRow", "align", "diff_records", "field_changes"]

WINDOW = 400
"""Events per side aligned at once in the middle part."""

RowKind = Literal["equal", "changed", "inserted", "removed"]


@dataclass(frozen=True)
class Change:
    """One field that differs: its path, and the value on each side (None when absent)."""

    path: str
    kind: Literal["changed", "added", "removed", "type_changed"]
    expected: Any = None
    actual: Any = None

    def as_json(self) -> dict[str, Any]:
        """The change as a JSON object."""
        return {
            "path": self.path,
            "kind": self.kind,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(frozen=True)
class DiffRow:
    """One aligned row: the index on each side (None for an insertion or removal)."""

    kind: RowKind
    a: int | None
    b: int | None
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class DiffResult:
    """Two runs compared: rows in order, and counts."""

    rows: tuple[DiffRow, ...]
    a_count: int
    b_count: int
    differences: int = field(default=0)

    @property
    def identical(self) -> bool:
        """True when every row is equal."""
        return self.differences == 0

    def first_difference(self) -> DiffRow | None:
        """The first row that is not equal."""
        return next((row for row in self.rows if row.kind != "equal"), None)


def _path(deepdiff_path: str) -> str:
    """Turn deepdiff's ``root['a'][0]['b']`` into ``a[0].b``."""
    text = deepdiff_path.removeprefix("root")
    out = text.replace("']['", ".").replace("['", ".").replace("']", "")
    return out.lstrip(".")


def field_changes(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> tuple[Change, ...]:
    """The field-level differences between two normalised records (deepdiff)."""
    from deepdiff import DeepDiff

    delta = DeepDiff(dict(expected), dict(actual), verbose_level=2, threshold_to_diff_deeper=0)
    changes: list[Change] = []
    for path, item in delta.get("values_changed", {}).items():
        changes.append(Change(_path(path), "changed", item["old_value"], item["new_value"]))
    for path, item in delta.get("type_changes", {}).items():
        changes.append(Change(_path(path), "type_changed", item["old_value"], item["new_value"]))
    for key in ("dictionary_item_added", "iterable_item_added"):
        for path, value in delta.get(key, {}).items():
            changes.append(Change(_path(path), "added", None, value))
    for key in ("dictionary_item_removed", "iterable_item_removed"):
        for path, value in delta.get(key, {}).items():
            changes.append(Change(_path(path), "removed", value, None))
    return tuple(sorted(changes, key=lambda change: change.path))


def align(
    a: Sequence[str], b: Sequence[str], window: int = WINDOW
) -> list[tuple[RowKind, int | None, int | None]]:
    """Align two fingerprint sequences; return (kind, index in a, index in b) rows.

    ``kind`` is ``equal`` for matching fingerprints, ``changed`` for a pair that occupies
    the same place but differs, ``removed``/``inserted`` for an event on one side only.
    """
    rows: list[tuple[RowKind, int | None, int | None]] = []
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        rows.append(("equal", prefix, prefix))
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(a), len(b)) - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]
    ):
        suffix += 1
    i, j = prefix, prefix
    a_end, b_end = len(a) - suffix, len(b) - suffix
    while i < a_end or j < b_end:
        a_part = a[i : min(a_end, i + window)]
        b_part = b[j : min(b_end, j + window)]
        matcher = difflib.SequenceMatcher(None, a_part, b_part, autojunk=False)
        opcodes = matcher.get_opcodes()
        last_window = i + len(a_part) >= a_end and j + len(b_part) >= b_end
        if not last_window:
            # keep only what is certain: up to the end of the last equal block before the
            # window's edge, so the next window can realign what follows
            equal_ends = [(i2, j2) for tag, _, i2, _, j2 in opcodes if tag == "equal"]
            if equal_ends:
                cut_a, cut_b = equal_ends[-1]
                opcodes = [op for op in opcodes if op[2] <= cut_a and op[4] <= cut_b]
            else:
                step = min(len(a_part), len(b_part)) or max(len(a_part), len(b_part))
                opcodes = [("replace", 0, min(step, len(a_part)), 0, min(step, len(b_part)))]
        for tag, i1, i2, j1, j2 in opcodes:
            if tag == "equal":
                rows.extend(("equal", i + k, j + k + j1 - i1) for k in range(i1, i2))
                continue
            paired = min(i2 - i1, j2 - j1)
            rows.extend(("changed", i + i1 + k, j + j1 + k) for k in range(paired))
            rows.extend(("removed", i + k, None) for k in range(i1 + paired, i2))
            rows.extend(("inserted", None, j + k) for k in range(j1 + paired, j2))
        advanced_a = max((op[2] for op in opcodes), default=0)
        advanced_b = max((op[4] for op in opcodes), default=0)
        if advanced_a == 0 and advanced_b == 0:
            break
        i += advanced_a
        j += advanced_b
    rows.extend(("equal", a_end + k, b_end + k) for k in range(suffix))
    return rows


def diff_records(
    a: Sequence[Mapping[str, Any]],
    b: Sequence[Mapping[str, Any]],
    rules: NormalizationRules = DEFAULT_RULES,
) -> DiffResult:
    """Diff two runs given as flat records (envelope beside payload), seq order."""
    prints_a = [fingerprint(record, rules) for record in a]
    prints_b = [fingerprint(record, rules) for record in b]
    rows: list[DiffRow] = []
    differences = 0
    for kind, i, j in align(prints_a, prints_b):
        if kind == "changed":
            assert i is not None and j is not None
            changes = field_changes(normalize(a[i], rules), normalize(b[j], rules))
            if not changes:
                rows.append(DiffRow("equal", i, j))
                continue
            rows.append(DiffRow("changed", i, j, changes))
        else:
            rows.append(DiffRow(kind, i, j))
        if kind != "equal":
            differences += 1
    return DiffResult(rows=tuple(rows), a_count=len(a), b_count=len(b), differences=differences)
