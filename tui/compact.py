"""Bounded JSON text for a reader with a small window: a coding agent calling MCP tools.

`bounded` turns a tool's answer (a JSON object) into compact JSON text of at most
`MAX_CHARS` characters, and says what it left out, so the agent knows to ask again with a
narrower range or a smaller limit. Two cuts, in order:

1. strings longer than a limit (`MAX_STRING`, then a quarter of it, down to
   `MIN_STRING`) keep their start and end with the number of characters cut between
   (``…[1234 characters cut]…``); a tool result of 50 kB becomes a readable sketch;
2. if that is not enough, the longest list (anywhere in the answer) keeps its first items,
   as many as would fit were they alike but at most half, again until the answer fits.

Every cut is named in ``"truncated"`` (a list of sentences) beside the answer's own keys.
The result is always valid JSON: nothing is cut from the text itself.
"""

from __future__ import annotations

from collections.abc import Iterator
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


def _lists(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[int, Any]]:
    """The lists ``value`` could be cut at, with their paths, their size as JSON first.

    A list of two or more items is one (the lists inside it are smaller than it); the one
    item of a list of one is looked into instead, so a long list inside it can be cut.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, (*path, key))
    elif isinstance(value, list) and len(value) == 1:
        yield from _lists(value[0], (*path, 0))
    elif isinstance(value, list) and value:
        yield len(_dumps(value)), path


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``value`` with the item at ``path`` replaced by ``new`` (copies along the path only)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    return [*value[:head], _replaced(value[head], rest, new), *value[head + 1 :]]


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _name(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def bounded(doc: dict[str, Any], *, max_chars: int = MAX_CHARS) -> str:
    """``doc`` as compact JSON of at most ``max_chars`` characters, cuts named in ``truncated``.

    ``doc`` is not changed. Cost: one serialisation per quartering of the string limit and
    two per cut of a list: 0.13 s for a 1.1 MB answer (1,000 events), 1.5 s for 11 MB.
    """
    room = max_chars - 400  # for the notes
    limit = MAX_STRING
    cut = [0]
    shown = _clip(doc, limit, cut)
    while len(_dumps(shown)) > room and limit > MIN_STRING:
        limit = max(MIN_STRING, limit // 4)
        cut = [0]
        shown = _clip(doc, limit, cut)
    notes = [f"{cut[0]} long strings cut to {limit} characters"] if cut[0] else []
    lengths: dict[tuple[Any, ...], int] = {}
    while len(_dumps(shown)) > room:
        found = max(_lists(shown), default=None)
        if found is None:
            break
        size, path = found
        items = _at(shown, path)
        lengths.setdefault(path, len(items))
        over = len(_dumps(shown)) - room  # keep what fits if the items are alike, at most half
        keep = min(len(items) // 2, len(items) * max(0, size - over) // size)
        shown = _replaced(shown, path, items[:keep])
    for path, length in lengths.items():
        kept = len(_at(shown, path))
        notes.append(
            f"{_name(path)}: the first {kept} of {length} shown; ask for fewer (limit) "
            "or a narrower range"
        )
    if notes:
        shown = {**shown, "truncated": notes[:5]}
    text = _dumps(shown)
    if len(text) > max_chars:  # no list left to cut (a huge object of many keys)
        text = _dumps(
            {"truncated": [f"the answer ({len(text)} characters) is too large to show, even cut"]}
        )
    return text
