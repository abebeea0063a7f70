"""Bounded JSON text for a reader with a small window: a coding agent calling MCP tools.

`bounded` turns a tool's answer (a JSON object) into compact JSON text of at most
`MAX_CHARS` characters, and says what it left out, so the agent knows to ask again with a
narrower range or a smaller limit. Two cuts, in order:

1. strings longer than a limit (`MAX_STRING`, then a quarter of it, down to
   `MIN_STRING`) keep their start and end with the number of characters cut between
   (``…[1234 characters cut]…``); a tool result of 50 kB becomes a readable sketch;
2. if that is not enough, the longest list at the top level keeps its first items only.

Every cut is named in ``"truncated"`` (a list of sentences) beside the answer's own keys.
The result is always valid JSON: nothing is cut from the text itself.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["MAX_CHARS", "MAX_STRING", "MIN_STRING", "bounded"]

MAX_CHARS = 60_000
"""The most characters one answer takes: about 15,000 tokens, a tenth of a 150k window."""
MAX_STRING = 2_000
"""The most characters one string keeps before the first cut."""
MIN_STRING = 120
"""The shortest a cut string gets (enough for an error message or an id with context)."""
_CUT = "…[{n} characters cut]…"


def _dumps(value: Any) -> str:
    from .render import json_default

    return orjson.dumps(value, default=json_default).decode()


def _clip(value: Any, limit: int, cut: list[int]) -> Any:
    """``value`` with every string longer than ``limit`` cut in its middle (counted in ``cut``)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        cut[0] += 1
        head = limit * 3 // 4
        tail = limit - head
        return value[:head] + _CUT.format(n=len(value) - limit) + value[len(value) - tail :]
    if isinstance(value, dict):
        return {key: _clip(item, limit, cut) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clip(item, limit, cut) for item in value]
    return value


def _longest_list(doc: dict[str, Any]) -> str | None:
    lists = [(len(_dumps(v)), key) for key, v in doc.items() if isinstance(v, list) and v]
    return max(lists)[1] if lists else None


def bounded(doc: dict[str, Any], *, max_chars: int = MAX_CHARS) -> str:
    """``doc`` as compact JSON of at most ``max_chars`` characters, cuts named in ``truncated``.

    ``doc`` is not changed. Cost: one serialisation per halving of the string limit and
    per step of a binary search over the longest list (a few dozen at most).
    """
    notes: list[str] = []
    limit = MAX_STRING
    cut = [0]
    shown = _clip(doc, limit, cut)
    while len(_dumps(shown)) > max_chars and limit > MIN_STRING:
        limit = max(MIN_STRING, limit // 4)
        cut = [0]
        shown = _clip(doc, limit, cut)
    if cut[0]:
        notes.append(f"{cut[0]} long strings cut to {limit} characters")
    key = _longest_list(shown) if len(_dumps(shown)) > max_chars else None
    if key is not None:
        items = shown[key]
        low, high = 0, len(items)
        while low < high:  # the most items that fit
            middle = (low + high + 1) // 2
            if len(_dumps({**shown, key: items[:middle], "truncated": notes + ["x" * 80]})) <= (
                max_chars
            ):
                low = middle
            else:
                high = middle - 1
        shown = {**shown, key: items[:low]}
        notes.append(
            f"{key}: the first {low} of {len(items)} shown; ask for fewer (limit) "
            "or a narrower range"
        )
    if notes:
        shown = {**shown, "truncated": notes}
    return _dumps(shown)
