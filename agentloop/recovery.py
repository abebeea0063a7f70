"""Recovery: repairs of the model's output that keep a session on track, each one an event.

* truncation: arguments cut off by a token limit (``{"q": "refund``) are closed with the
  fewest quotes and brackets that make them a JSON object again;
* scavenge: a response with no ``tool_calls`` whose text or reasoning spells calls out
  (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, a JSON block, an OpenAI
  ``{"tool_calls": [...]}`` object) gets them back, for tools that allow it (reads by
  default: a write that was only written down never runs);
* flatten: arguments given in a flattened schema (``address__city``) are nested again.

Storm suppression (dropping duplicate calls of one response, once per turn, with a
reflection message) is decided by the gate and recorded as a ``storm`` repair.
All functions here are pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from journal import ToolCall, loads_strict

__all__ = ["repair_truncated_json", "scavenge_calls"]

_MAX_REPAIR_INPUT = 20_000
_MAX_ATTEMPTS = 64
_CLOSERS = {"{": "}", "[": "]"}
_BOUNDARY = set('"}]0123456789el{[')
_CALL_KEYS = frozenset({"name", "tool", "function"})


def _closing(prefix: str) -> str | None:
    """Return what closes ``prefix`` (quotes and brackets), or None if it cannot end here."""
    return _closings(prefix, {len(prefix)})[len(prefix)]


def _closings(text: str, ends: set[int]) -> dict[int, str | None]:
    """For each ``end`` in ``ends``: what closes ``text[:end]``, or None; in one pass."""
    found: dict[int, str | None] = dict.fromkeys(ends)
    stack: list[str] = []
    in_string = escaped = False
    if 0 in ends:
        found[0] = ""
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                break  # a closer that closes nothing: no longer prefix can be closed
        if index + 1 in ends and not escaped:
            found[index + 1] = ('"' if in_string else "") + "".join(reversed(stack))
    return found


def repair_truncated_json(raw: str) -> dict[str, Any] | None:
    """Return the object a truncated JSON text most likely meant, or None.

    Tries the longest prefix that ends on a value boundary, drops a dangling comma or key,
    and closes open strings, arrays and objects. Only objects are returned. At most
    ``_MAX_ATTEMPTS`` prefixes are parsed, so a long text broken early costs little.
    """
    text = raw.strip()
    if not text.startswith("{") or len(text) > _MAX_REPAIR_INPUT:
        return None
    ends = [
        end for end in range(len(text), 0, -1) if end == len(text) or text[end - 1] in _BOUNDARY
    ]
    closings = _closings(text, set(ends))
    attempts = 0
    for end in ends:
        closing = closings[end]
        if closing is None:
            continue
        attempts += 1
        if attempts > _MAX_ATTEMPTS:
            return None
        prefix = text[:end]
        candidate = prefix + closing
        for attempt in (candidate, _drop_dangling(prefix, closing)):
            if attempt is None:
                continue
            try:
                value = loads_strict(attempt)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _drop_dangling(prefix: str, closing: str) -> str | None:
    """Drop a trailing ``, "key"`` (a key whose value was cut off) before closing."""
    if not closing.startswith('"'):
        return None
    cut = prefix.rfind('"')
    head = prefix[:cut].rstrip()
    if head.endswith(","):
        head = head[:-1]
    elif not head.endswith("{"):
        return None
    rest = _closing(head)
    return None if rest is None else head + rest


def _objects_in(text: str) -> Iterable[dict[str, Any]]:
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            yield value
        index = text.find("{", end)


def _as_call(candidate: dict[str, Any], known: set[str]) -> tuple[str, Any] | None:
    function = candidate.get("function")
    if isinstance(function, dict):
        candidate = function
    name = candidate.get("name", candidate.get("tool"))
    if not isinstance(name, str) or name not in known:
        return None
    for key in ("arguments", "args", "parameters", "input"):
        if key in candidate:
            args = candidate[key]
            if isinstance(args, str):
                try:
                    args = loads_strict(args)
                except ValueError:
                    return name, args
            return (name, args) if isinstance(args, dict) else None
    return name, {}


def _calls_in(value: Any, known: set[str]) -> Iterable[tuple[str, Any]]:
    """Yield the calls in a JSON value: itself, or calls nested in a wrapper.

    A wrapper is anything that is not call-shaped, such as ``{"tool_calls": [...]}``; a
    call's own arguments are not searched.
    """
    if isinstance(value, list):
        for item in value:
            yield from _calls_in(item, known)
    elif isinstance(value, dict):
        found = _as_call(value, known)
        if found is not None:
            yield found
        elif not _CALL_KEYS.intersection(value):
            for item in value.values():
                yield from _calls_in(item, known)


def scavenge_calls(
    sources: Iterable[str | None], known_tools: Iterable[str], id_prefix: str
) -> list[ToolCall]:
    """Find tool calls written out in text or reasoning, for tools that exist.

    Ids are ``<id_prefix>-<n>``, so a replay finds the same ones.
    """
    known = set(known_tools)
    calls: list[ToolCall] = []
    for text in sources:
        if not text:
            continue
        for candidate in _objects_in(text):
            for name, args in _calls_in(candidate, known):
                calls.append(
                    ToolCall(call_id=f"{id_prefix}-{len(calls) + 1}", tool=name, args=args)
                )
        if calls:
            break
    return calls
