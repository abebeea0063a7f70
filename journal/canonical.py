"""Canonical bytes: the one serialisation that is stored, exported and hashed.

The rules (any language can reproduce the hash over the stored bytes):

* JSON, keys sorted by code point at every level, no insignificant whitespace, UTF-8;
* integers within signed 64 bits; floats finite (NaN and Infinity are rejected, never
  turned into ``null``); booleans, null, strings, arrays and objects with string keys;
* timestamps as RFC 3339 UTC strings with microseconds: ``2026-11-29T23:00:00.123456Z``;
* ``hash`` = sha256 hex of (previous event's hash, or 64 zeros for seq 0) + the canonical
  bytes of the event without its ``hash``.

Untrusted text is parsed with `loads_strict`, which also rejects duplicate keys, integers
outside int64 and non-finite numbers instead of silently changing them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from .errors import InvalidEventError

__all__ = [
    "GENESIS_HASH",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_DEPTH",
    "canonical_bytes",
    "chain_hash",
    "check_json",
    "check_ts",
    "dumps_canonical",
    "format_ts",
    "loads_exact",
    "loads_strict",
    "parse_ts",
    "plainly_canonical",
    "prefix_hash",
    "sets_ordered",
    "valid_session_id",
]

GENESIS_HASH = "0" * 64
"""The previous-hash value used for seq 0 of every session."""

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in an event."""

_NO_MODELS: frozenset[type] = frozenset()

_SESSION_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z", re.ASCII)


def check_json(value: Any, path: str = "$", depth: int = 0) -> None:
    """Raise `InvalidEventError` naming the path of the first value that is not canonical JSON.

    Accepts None, bool, int64 integers, finite floats, str, lists and dicts with str keys.
    """
    # Fast path: a walk that builds no paths and accepts only exact builtin types. Anything
    # it is unsure of (a subclass, a tuple, a bad value, the depth limit) goes to the full
    # walk, which decides and names the path: same verdicts, same messages.
    kind = type(value)
    if (kind is dict or kind is list) and plainly_canonical(value, _NO_MODELS, depth):
        return
    _check_json_walk(value, path, depth)


def plainly_canonical(
    value: dict[Any, Any] | list[Any], models: frozenset[type] = _NO_MODELS, depth: int = 0
) -> bool:
    """Tell whether a dict or list is certainly canonical JSON; False means "look closer".

    Exact builtin types only; an instance of one of ``models`` (pydantic models without
    aliases or custom serialisers) counts as the dict of its fields. Cheap: it builds no
    paths and no copies. `check_json` decides the rest and names the path.
    """
    if depth >= MAX_DEPTH:
        return False
    if type(value) is dict:
        for key in value:
            if type(key) is not str:
                return False
        items: Any = value.values()
    else:
        items = value
    for item in items:
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return False
        elif kind is float:
            if not _isfinite(item):
                return False
        elif kind is dict or kind is list:
            if not plainly_canonical(item, models, depth + 1):
                return False
        elif kind in models:
            if not plainly_canonical(item.__dict__, models, depth + 1):
                return False
        else:
            return False
    return True


_isfinite = math.isfinite


def _check_json_walk(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InvalidEventError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidEventError(f"{path}: integer {value} is outside signed 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEventError(f"{path}: {value} is not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEventError(f"{path}: object key {key!r} is not a string")
            _check_json_walk(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json_walk(item, f"{path}[{index}]", depth + 1)
    else:
        raise InvalidEventError(f"{path}: {type(value).__name__} is not a JSON value")


def sets_ordered(value: Any) -> Any:
    """``value`` with the sets in its plain dicts, lists and tuples as sorted lists.

    A set's iteration order follows the hash seed and what was added and removed, so two
    runs of the same code would journal two orders of it. Members are sorted as ``sorted``
    sorts them, or by their JSON text when they do not compare. ``value`` itself when it
    holds no set.
    """
    kind = type(value)
    if kind is dict:  # copied only where a set was found (a tool's result, on a hot path)
        changed = {k: new for k, item in value.items() if (new := sets_ordered(item)) is not item}
        return {**value, **changed} if changed else value
    if kind is list or kind is tuple:
        moved = {i: new for i, item in enumerate(value) if (new := sets_ordered(item)) is not item}
        if not moved:
            return value
        found = list(value)
        for index, new in moved.items():
            found[index] = new
        return found
    if kind is set or kind is frozenset:
        members = [sets_ordered(item) for item in value]
        try:
            return sorted(members)
        except TypeError:  # mixed or unorderable members
            return sorted(members, key=lambda item: json.dumps(item, sort_keys=True, default=repr))
    return value


def dumps_canonical(value: Any, fields: Callable[[Any], Any] | None = None) -> bytes:
    """Serialise an already-checked JSON value to canonical bytes (no validation).

    ``fields`` gives the dict of fields of a model that `plainly_canonical` let by.
    """
    try:
        return orjson.dumps(value, default=fields, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError) as e:
        raise InvalidEventError(f"not canonical JSON: {e}") from e


def canonical_bytes(value: Any) -> bytes:
    """Check ``value`` against the canonical rules and return its canonical bytes."""
    check_json(value)
    return dumps_canonical(value)


def prefix_hash(system_prompt: str, tools: Sequence[Any]) -> str:
    """The sha256 hex of a session's immutable prefix: its system prompt and the tools shown.

    ``tools`` as the model is shown them (OpenAI tool specs). Every path that records a
    ``session_started`` (the runtime, the recorder, the importers) hashes with this one.

    Raises:
        InvalidEventError: ``tools`` is not canonical JSON.
    """
    digest = hashlib.sha256(system_prompt.encode("utf-8"))
    digest.update(canonical_bytes(list(tools)))
    return digest.hexdigest()


def chain_hash(previous: str, body: bytes, key: bytes | None = None) -> str:
    """Return the chained hash of one event: sha256(previous + body), or HMAC-SHA256 with key."""
    if key is None:
        digest = hashlib.sha256(previous.encode("utf-8"))
        digest.update(body)
        return digest.hexdigest()
    return hmac.new(key, previous.encode("utf-8") + body, hashlib.sha256).hexdigest()


def format_ts(moment: datetime) -> str:
    """Format a timezone-aware datetime as RFC 3339 UTC with microseconds."""
    if moment.tzinfo is not UTC:
        if moment.tzinfo is None:
            raise InvalidEventError(f"timestamp {moment.isoformat()} has no timezone")
        moment = moment.astimezone(UTC)
    # %-formatting of the fields: a third of isoformat's cost (one is formatted per append),
    # and "%04d" pads the year as isoformat does (strftime("%Y") gives "999" for year 999).
    # The text up to the minute is kept from the last call in the same minute (the appends
    # of a process mostly are): formatting it is half of the cost. One tuple, read once and
    # replaced whole, so threads never mix two minutes.
    minute = moment.year, moment.month, moment.day, moment.hour, moment.minute
    last = _LAST_MINUTE[0]
    if last[0] != minute:
        last = _LAST_MINUTE[0] = (minute, _MINUTE_FORMAT % minute)
    return _TS_FORMAT % (last[1], moment.second, moment.microsecond)


_MINUTE_FORMAT = "%04d-%02d-%02dT%02d:%02d:"
_TS_FORMAT = "%s%02d.%06dZ"
_LAST_MINUTE: list[tuple[tuple[int, ...], str]] = [((), "")]
"""The last minute `format_ts` formatted, and its text (a one-item list: replaced whole)."""


def parse_ts(text: str) -> datetime:
    """Parse a canonical timestamp string; raise `InvalidEventError` for any other shape."""
    return _naive_ts(text).replace(tzinfo=UTC)


def check_ts(text: object) -> None:
    """Raise `InvalidEventError` unless ``text`` is what `parse_ts` reads (same messages).

    The check alone, without building the aware datetime (an import checks every event's).
    """
    _naive_ts(text)


def _naive_ts(text: object) -> datetime:
    if not isinstance(text, str) or _TS.fullmatch(text) is None:
        raise InvalidEventError(
            f"timestamp {text!r} is not RFC 3339 UTC with microseconds "
            "(2026-11-29T23:00:00.123456Z)"
        )
    try:
        # The shape is checked above, so the C parser of ISO dates reads exactly this form.
        return datetime.fromisoformat(text[:-1])
    except ValueError as e:
        raise InvalidEventError(f"timestamp {text!r} is not a real date: {e}") from e


def valid_session_id(session_id: object) -> bool:
    """Tell whether a session id has 1 to 128 characters from letters, digits and ``-_.:``."""
    return isinstance(session_id, str) and _valid_id_text(session_id)


@functools.lru_cache(maxsize=1024)
def _valid_id_text(text: str) -> bool:
    """`valid_session_id` of a string, remembered (an import checks one id on every line)."""
    return _SESSION_ID.fullmatch(text) is not None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _checked_int(text: str) -> int:
    if len(text) > 20:  # longer than any int64 ("-9223372036854775808"): never convert it
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits is outside signed 64 bits")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"integer {text} is outside signed 64 bits")
    return value


def _checked_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} overflows to infinity")
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def canonical_object(raw: bytes) -> dict[str, Any] | None:
    """The JSON object ``raw`` holds if ``raw`` is its own canonical form, else None.

    The fast path in front of `loads_strict` for text that is usually canonical (an
    export's lines, stored bodies): orjson's parse plus a check that the value is plainly
    canonical and re-dumps to the same bytes. No duplicate key, number out of range or lone
    surrogate survives that round trip, so a value returned is what `loads_strict` reads;
    None means "ask `loads_strict`" (which decides and words the error).
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    # orjson reads only exact builtin types, finite floats and integers up to 2**64 - 1, so
    # `plainly_canonical` can find nothing wrong unless the text nests deeper than its limit
    # (at most one level per bracket) or holds an integer past 53 bits (the re-dump with
    # OPT_STRICT_INTEGER refuses one; rare in events): only then is the walk needed. It
    # comes before the plain re-dump, which refuses values nested deeper than orjson's own
    # limit.
    dumped = None
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        try:
            dumped = orjson.dumps(value, option=_SORTED_53_BITS)
        except orjson.JSONEncodeError:
            pass
    if dumped is None:
        if not plainly_canonical(value):
            return None
        dumped = dumps_canonical(value)
    return value if dumped == raw else None


_SORTED_53_BITS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
"""The canonical dump, refusing integers past 53 bits (`canonical_object` checks those)."""


def loads_strict(text: str | bytes) -> Any:
    """Parse untrusted JSON text, rejecting what `orjson.loads` would silently change.

    Raises:
        ValueError: invalid JSON, invalid UTF-8 (lone surrogates included), duplicate keys,
            integers outside int64, NaN or Infinity, or nesting deeper than `MAX_DEPTH`.
    """
    return _loads(text, exact=False)


def loads_exact(text: str | bytes) -> Any:
    """`loads_strict`, but keeping NaN, Infinity and integers of any size as Python has them.

    For the text of a value as code gave it (`journal.events.ActionCommitted.result_text`),
    which canonical JSON could only hold as strings.

    Raises:
        ValueError: invalid JSON, invalid UTF-8, duplicate keys, nesting deeper than
            `MAX_DEPTH`, or an integer longer than Python parses.
    """
    return _loads(text, exact=True)


def _loads(text: str | bytes, *, exact: bool) -> Any:
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    checks: dict[str, Any] = (
        {}
        if exact
        else {
            "parse_int": _checked_int,
            "parse_float": _checked_float,
            "parse_constant": _reject_constant,
        }
    )
    try:
        value = json.loads(text, object_pairs_hook=_unique_object, **checks)
    except RecursionError as e:
        raise ValueError("nested too deeply") from e
    _check_depth(value)
    if _SURROGATE_ESCAPE.search(text) is not None:
        _check_surrogates(value)
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A ``\\uD800``-``\\uDFFF`` escape: half of a pair, or a lone surrogate no UTF-8 can hold."""


def _check_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"lone surrogate in {item[:40]!r}: not valid UTF-8") from None
        elif type(item) is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)


def _check_depth(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        if type(item) is dict:
            stack.extend((child, depth + 1) for child in item.values())
        elif type(item) is list:
            stack.extend((child, depth + 1) for child in item)
