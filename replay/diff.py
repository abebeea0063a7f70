"""Aligned, field-level diff of two runs (two event sequences).

1. Trim the common prefix and suffix by comparing normalised events (their fingerprints).
2. Align the middle by content: walk along the diagonal while both sides agree; at a
   difference, find the nearest point where they agree again for `ANCHOR` events in a row
   (the fewest events skipped on either side, a change preferred to an insertion plus a
   removal) and align the gap with `difflib.SequenceMatcher`. Only when no such point is
   within `NEAR` events does difflib align a whole bounded window. So one inserted event
   is one insertion, and a long loop of identical calls stays linear: difflib alone picks
   the earliest of equally long matches, which in a repeating loop is often off the
   diagonal, and shifts everything after it.
3. Compare the aligned pairs with ``==`` and run deepdiff only on pairs that differ.

The configuration each run was recorded with (`replay.normalize.CONFIG_FIELDS` of its
``session_started``) is compared apart (`config_changes`), so a changed prompt or tool
schema is reported as what it is, and the alignment goes on to the first behavioural
difference. The result is `DiffResult`: identical, or the configuration changes and the
aligned rows (equal, changed, inserted, removed) with the field paths that changed.
"""

from __future__ import annotations

import difflib
import json
import math
import unicodedata
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

import orjson

from journal import CAPTURED_WITH_KEY

from .normalize import (
    CONFIG_FIELDS,
    DEFAULT_RULES,
    NormalizationRules,
    normalize,
    normalized_bytes,
)

__all__ = [
    "ABSENT",
    "ANCHOR",
    "NEAR",
    "WINDOW",
    "Change",
    "DiffResult",
    "DiffRow",
    "align",
    "behaviour_rules",
    "config_changes",
    "diff_records",
    "field_changes",
]

WINDOW = 400
"""Events per side aligned at once by difflib when no nearby resync point exists."""

ANCHOR = 3
"""Events that must agree in a row for the alignment to resynchronise after a difference."""

NEAR = 24
"""How many events (on either side) a resync point is searched for before a difflib window."""

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

    def sides(self) -> tuple[Any, Any]:
        """The value on each side, with `ABSENT` where a side has no such field."""
        return (
            ABSENT if self.kind == "added" else self.expected,
            ABSENT if self.kind == "removed" else self.actual,
        )

    def shown(self, width: int) -> tuple[str, str]:
        """Each side as JSON text of at most ``width`` characters, cut around the change.

        The cut starts shortly before the first character where the two differ, so a
        change at the end of a long value is what shows; ``(absent)`` stands for a side
        without the field. Sides that would read the same (NFC against NFD, an invisible
        character) are written with JSON's ASCII escapes, so the difference shows.
        """
        before, after = (_json_text(side) for side in self.sides())
        if before != after and _looks_alike(before) == _looks_alike(after):
            before, after = (_json_text(side, escaped=True) for side in self.sides())
        if len(before) <= width and len(after) <= width:
            return before, after
        same = 0
        for x, y in zip(before, after, strict=False):
            if x != y:
                break
            same += 1
        start = max(0, same - width // 3)
        return _window_text(before, start, width), _window_text(after, start, width)


class _Absent:
    """Where a field does not exist on one side of a change (not the same as null)."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()
"""`Change.sides` of a field that exists on one side only."""


def _json_text(value: Any, *, escaped: bool = False) -> str:
    if value is ABSENT:
        return "(absent)"
    if escaped:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _looks_alike(text: str) -> str:
    """``text`` as a reader sees it: composed (NFC), without invisible format characters."""
    return "".join(c for c in unicodedata.normalize("NFC", text) if unicodedata.category(c) != "Cf")


def _window_text(text: str, start: int, width: int) -> str:
    """``text`` from ``start``, at most ``width`` characters, with … where it was cut."""
    head = "…" if start else ""
    body = text[start:]
    room = width - len(head)
    return head + (body if len(body) <= room else body[: room - 1] + "…")


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One aligned row: the index on each side (None for an insertion or removal)."""

    kind: RowKind
    a: int | None
    b: int | None
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class DiffResult:
    """Two runs compared: configuration changes, rows in order, and counts."""

    rows: tuple[DiffRow, ...]
    a_count: int
    b_count: int
    differences: int = field(default=0)
    config_changes: tuple[Change, ...] = ()
    beyond_end: int = 0
    """Events of b after the end of a run a that has no ending (cut off), not compared:
    what a cut run would have done next is unknown, as in a replay of it."""

    @property
    def identical(self) -> bool:
        """True when the configurations agree and every row is equal."""
        return self.differences == 0 and not self.config_changes

    def first_difference(self) -> DiffRow | None:
        """The first row that is not equal."""
        return next((row for row in self.rows if row.kind != "equal"), None)


def _path(deepdiff_path: str) -> str:
    """Turn deepdiff's ``root['a'][0]['b']`` into ``a[0].b``."""
    text = deepdiff_path.removeprefix("root")
    out = text.replace("']['", ".").replace("['", ".").replace("']", "")
    return out.lstrip(".")


def field_changes(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> tuple[Change, ...]:
    """The field-level differences between two normalised records (deepdiff).

    A zero that changed sign counts too: deepdiff takes ``0.0 == -0.0``, but the canonical
    bytes (and the JSON code sends on) differ. A field one side does not have and the other
    leaves empty (None: not recorded), as records of two types may, is no change.
    """
    from deepdiff import DeepDiff

    expected = {k: v for k, v in expected.items() if v is not None or k in actual}
    actual = {k: v for k, v in actual.items() if v is not None or k in expected}
    delta = DeepDiff(expected, actual, verbose_level=2, threshold_to_diff_deeper=0)
    changes = list(_signed_zeros(expected, actual, ""))
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


def _signed_zeros(expected: Any, actual: Any, path: str) -> Iterator[Change]:
    """The places where both sides hold a float zero, of opposite signs."""
    if type(expected) is float and type(actual) is float:
        if expected == actual == 0 and math.copysign(1, expected) != math.copysign(1, actual):
            yield Change(path, "changed", expected, actual)
    elif isinstance(expected, Mapping) and isinstance(actual, Mapping):
        for key in expected.keys() & actual.keys():
            yield from _signed_zeros(expected[key], actual[key], f"{path}.{key}".lstrip("."))
    elif isinstance(expected, list) and isinstance(actual, list):
        for index, (old, new) in enumerate(zip(expected, actual, strict=False)):
            yield from _signed_zeros(old, new, f"{path}[{index}]")


def _is_start(record: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
    """Whether a record is a ``session_started`` with a configuration."""
    return (
        record is not None
        and record.get("type") == "session_started"
        and record.get("config") is not None
    )


def _configured(start: Mapping[str, Any] | None) -> bool:
    """Whether a record is a ``session_started`` that says how its run was configured.

    A session imported from a transcript names no agent: nothing configured it, so there
    is no configuration to compare with; nor with a captured session that names none
    (what its capture saw of the model and prompt), but against a run the same capture
    recorded (`_captured_alike`). A session the runtime ran records its agent's whole
    configuration, with or without a reference (an `Agent` built by hand has none).
    """
    if not _is_start(start):
        return False
    metadata = start.get("metadata") or {}
    from_outside = "imported_from" in metadata or CAPTURED_WITH_KEY in metadata
    return start.get("agent") is not None or not from_outside


def _captured_alike(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Whether one capture (the same integration) recorded both runs' ``session_started``.

    Neither names an agent (a replay by the runtime names the agent it ran). The model, its
    settings, the prompt and the tools as the capture saw them are then comparable (a
    pydantic-ai agent whose model changed, captured with no agent reference).
    """
    runs = (expected, actual)
    captured = {(run.get("metadata") or {}).get(CAPTURED_WITH_KEY) for run in runs}
    return None not in captured and len(captured) == 1 and all(r.get("agent") is None for r in runs)


def config_changes(
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    rules: NormalizationRules = DEFAULT_RULES,
) -> tuple[Change, ...]:
    """The configuration differences of two runs, from their ``session_started`` records.

    None when either run says nothing of its configuration (an imported transcript), or
    either record is not a ``session_started``. Paths ``rules`` ignore are left out.
    """
    if not (_is_start(expected) and _is_start(actual)):
        return ()
    if not (_configured(expected) and _configured(actual) or _captured_alike(expected, actual)):
        return ()
    pick = [name for name in CONFIG_FIELDS if name not in rules.paths_for("session_started")]
    # (typed, so that nested paths the rules ignore, session_started.config.x, are dropped)
    return field_changes(
        normalize(
            {"type": "session_started", **{name: expected.get(name) for name in pick}}, rules
        ),
        normalize({"type": "session_started", **{name: actual.get(name) for name in pick}}, rules),
    )


def behaviour_rules(rules: NormalizationRules = DEFAULT_RULES) -> NormalizationRules:
    """``rules`` without the configuration fields: what compares the runs' behaviour."""
    return rules.extended({"session_started": CONFIG_FIELDS})


Row = tuple[RowKind, int | None, int | None]

_ENDINGS = ("agent_completed", "agent_halted")


def _gap_rows(
    rows: list[Row], opcodes: Sequence[tuple[str, int, int, int, int]], i: int, j: int
) -> None:
    """Append the rows of difflib opcodes over parts starting at ``i`` in a and ``j`` in b."""
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            rows.extend(("equal", i + k, j + k + j1 - i1) for k in range(i1, i2))
            continue
        paired = min(i2 - i1, j2 - j1)
        rows.extend(("changed", i + i1 + k, j + j1 + k) for k in range(paired))
        rows.extend(("removed", i + k, None) for k in range(i1 + paired, i2))
        rows.extend(("inserted", None, j + k) for k in range(j1 + paired, j2))


def _agreeing(
    a: Sequence[Hashable], b: Sequence[Hashable], x: int, y: int, a_end: int, b_end: int
) -> int:
    """How many events agree from (x, y) on, counting at most `WINDOW`."""
    limit = min(WINDOW, a_end - x, b_end - y)
    run = 0
    while run < limit and a[x + run] == b[y + run]:
        run += 1
    return run


def _resync(
    a: Sequence[Hashable], b: Sequence[Hashable], i: int, j: int, a_end: int, b_end: int
) -> tuple[int, int] | None:
    """The nearest point after a difference at (i, j) where both sides agree again.

    Skipping ``da`` events of a and ``db`` of b costs ``max(da, db)``. A point must start
    `ANCHOR` agreeing events (fewer where a side ends), or be both ends. Among the points
    of the lowest cost, the one followed by the longest agreement wins (in a repeating
    loop several fit, and only the longest run tells an insertion from a change), then
    the one whose shift goes towards the difference in length still to account for,
    then the one nearest the diagonal (a change before an insertion plus a removal).
    """
    owed = (b_end - j) - (a_end - i)
    for cost in range(1, NEAR + 1):
        best: tuple[int, int, int, int, int] | None = None
        for off in range(cost + 1):
            for da, db in ((cost, cost),) if off == 0 else ((cost - off, cost), (cost, cost - off)):
                x, y = i + da, j + db
                if x > a_end or y > b_end:
                    continue
                need = min(ANCHOR, a_end - x, b_end - y)
                if need == 0 and (x < a_end or y < b_end):
                    continue
                run = _agreeing(a, b, x, y, a_end, b_end)
                if run < need:
                    continue
                score = (run, -abs(owed - (db - da)), -off, x, y)
                if best is None or score > best:
                    best = score
        if best is not None:
            return best[3], best[4]
    return None


def _window(
    rows: list[Row],
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    i: int,
    j: int,
    a_end: int,
    b_end: int,
    window: int,
) -> tuple[int, int]:
    """Align one bounded window with difflib; return where the next step starts.

    Unless the window reaches both ends, only what is certain is kept: up to the end of
    the first equal block of `ANCHOR` events or more (else of the last equal block), so
    the walk resumes on agreeing events.
    """
    a_part = a[i : min(a_end, i + window)]
    b_part = b[j : min(b_end, j + window)]
    opcodes = difflib.SequenceMatcher(None, a_part, b_part, autojunk=False).get_opcodes()
    if i + len(a_part) < a_end or j + len(b_part) < b_end:
        equal = [op for op in opcodes if op[0] == "equal"]
        anchored = [op for op in equal if op[2] - op[1] >= ANCHOR]
        if anchored or equal:
            cut = (anchored or equal[::-1])[0]
            opcodes = [op for op in opcodes if op[2] <= cut[2] and op[4] <= cut[4]]
        else:
            step = min(len(a_part), len(b_part)) or max(len(a_part), len(b_part))
            opcodes = [("replace", 0, min(step, len(a_part)), 0, min(step, len(b_part)))]
    _gap_rows(rows, opcodes, i, j)
    return i + max(op[2] for op in opcodes), j + max(op[4] for op in opcodes)


def align(a: Sequence[Hashable], b: Sequence[Hashable], window: int = WINDOW) -> list[Row]:
    """Align two sequences of fingerprints (any hashables); return (kind, i, j) rows.

    ``kind`` is ``equal`` for matching fingerprints, ``changed`` for a pair that occupies
    the same place but differs, ``removed``/``inserted`` for an event on one side only.
    The work is linear in the length plus, per difference, a bounded search.
    """
    rows: list[Row] = []
    prefix = 0
    shorter = min(len(a), len(b))
    while prefix < shorter and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shorter - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
        suffix += 1
    a_end, b_end = len(a) - suffix, len(b) - suffix
    rows.extend(("equal", k, k) for k in range(prefix))
    i = j = prefix
    while i < a_end or j < b_end:
        while i < a_end and j < b_end and a[i] == b[j]:
            rows.append(("equal", i, j))
            i, j = i + 1, j + 1
        if i == a_end or j == b_end:
            found: tuple[int, int] | None = (a_end, b_end)
        else:
            found = _resync(a, b, i, j, a_end, b_end)
        if found is None:
            i, j = _window(rows, a, b, i, j, a_end, b_end, window)
            continue
        gap_a, gap_b = a[i : found[0]], b[j : found[1]]
        _gap_rows(
            rows, difflib.SequenceMatcher(None, gap_a, gap_b, autojunk=False).get_opcodes(), i, j
        )
        i, j = found
    rows.extend(("equal", a_end + k, b_end + k) for k in range(suffix))
    return rows


def in_order_of(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]
) -> Sequence[Mapping[str, Any]]:
    """``b`` with each outcome's ``ran_after`` as ``a`` has it where the two orders agree.

    Calls on other threads or tasks run in an order timing picks, so two runs of the same
    code may say different things of them (`capture.RecordedOrder`): only two calls
    run the other way round, one after the other, are a difference.
    """
    from capture import RecordedOrder

    order = RecordedOrder(a)
    out: list[Mapping[str, Any]] = []
    for record in b:
        if record.get("type") in ("action_committed", "action_failed"):
            seen = tuple(record.get("ran_after") or ()) or None
            agreed = order.ran_after(int(record.get("seq", -1)), str(record.get("call_id")), seen)
            if agreed != seen:
                record = {**record, "ran_after": list(agreed) if agreed else None}
        out.append(record)
    return out


def diff_records(
    a: Sequence[Mapping[str, Any]],
    b: Sequence[Mapping[str, Any]],
    rules: NormalizationRules = DEFAULT_RULES,
) -> DiffResult:
    """Diff two runs given as flat records (envelope beside payload), seq order.

    The configurations are compared by `config_changes`, the behaviour row by row. When
    ``a`` has no ending (no ``agent_completed`` or ``agent_halted`` last: a run cut off),
    what ``b`` did after ``a``'s end is not compared (`DiffResult.beyond_end`).
    """
    changed_config = config_changes(a[0] if a else None, b[0] if b else None, rules)
    rules = behaviour_rules(rules)
    b = in_order_of(a, b)
    prints_a = normalized_bytes(a, rules)
    prints_b = normalized_bytes(b, rules)
    aligned = align(prints_a, prints_b)
    beyond = 0
    if a and a[-1].get("type") not in _ENDINGS:
        while aligned and aligned[-1][0] == "inserted":
            aligned.pop()
            beyond += 1
    rows: list[DiffRow] = []
    differences = 0
    for kind, i, j in aligned:
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
    return DiffResult(
        rows=tuple(rows),
        a_count=len(a),
        b_count=len(b),
        differences=differences,
        config_changes=changed_config,
        beyond_end=beyond,
    )
