"""Full-text search across sessions: what is indexed, the filters, the hits and their snippets.

The index is derived data, like the snapshots: a table named `SEARCH_INDEX_TABLE` (SQLite:
an FTS5 index kept by sqlite-utils over it; PostgreSQL: a ``tsvector`` column with a GIN
index), one row per event, keyed by the event's global position. It is never written by an
append: `Journal.search` first catches it up from the last position it holds (one read of
the events after it, in batches), so the first search over a large journal pays for
indexing it and later ones only for what was appended since. An erase removes the
session's rows in its own transaction; the index is never exported. Like every derived
table it is a claim, checked against the events (`journal._search_check`): a search drops
(and puts right) a hit whose row its event does not make, so it never shows text its event
lacks; `verify` reports rows that disagree and events the index skips (``search_index``),
and ``repair`` rebuilds it. Every table whose name starts with `SEARCH_INDEX_TABLE` is the
journal's own.

What an event contributes (`indexed_text`): its one-line summary, then every key and value
of its payload (tool arguments and results, user inputs, answers, error messages, halt
reasons, metadata) except the envelope and what would only add noise or size: the system
prompt and configuration (the same in every session), token usage, and the raw model
request and response captured beside a proposal (its text and calls are indexed). The text
is cut at `SEARCH_TEXT_LIMIT` characters.

A query is words and ``"quoted phrases"`` (`query_parts`); a hit has every part, as a
phrase, case-insensitively, words split at anything not a letter or digit, no stemming.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidInputError
from .records import StoredEvent

__all__ = [
    "SEARCH_INDEX_TABLE",
    "SEARCH_TEXT_LIMIT",
    "SearchFilters",
    "SearchHit",
    "indexed_text",
    "query_parts",
    "snippet",
]

SEARCH_INDEX_TABLE = "search_index"
"""The derived table of the search index; tables whose names start with it are its parts."""

SEARCH_TEXT_LIMIT = 32_768
"""The most characters of one event that are indexed (a huge tool result is cut there)."""

_SKIPPED = frozenset(
    {
        "session_id",
        "seq",
        "ts",
        "v",
        "type",
        "hash",
        "system_prompt",
        "system_prompt_hash",
        "config",
        "model_settings",
        "usage",
        "request",
        "response",
        "result_text",
    }
)
"""Top-level payload keys left out of the index: the envelope, and noise or duplicates."""

_PARTS = re.compile(r'"([^"]*)"?|(\S+)')


class SearchFilters(BaseModel):
    """What narrows a search besides its words; every filter given must hold (AND).

    ``since`` and ``until`` bound the event's time (canonical UTC timestamps, ``until``
    exclusive); ``status`` and ``rule`` are the session's status and halt rule; ``meta``
    are metadata keys and the values the session was started with (a value matches a string
    equal to it, or a number or boolean written that way: ``3``, ``true``).
    """

    model_config = ConfigDict(frozen=True)

    tool: str | None = None
    type: str | None = None
    status: str | None = None
    rule: str | None = None
    meta: Mapping[str, str] = Field(default_factory=dict)
    since: str | None = None
    until: str | None = None
    session_id: str | None = None


class SearchHit(BaseModel):
    """One event that matched: where it is, what it is, and a snippet around the match.

    ``rank``: higher is better, comparable only between the hits of one search.
    """

    model_config = ConfigDict(frozen=True)

    session_id: str
    seq: int
    type: str
    ts: str
    tools: list[str]
    snippet: str
    rank: float


def query_parts(query: str) -> list[str]:
    """Split a query into its words and quoted phrases (an unclosed quote runs to the end).

    Raises:
        InvalidInputError: the query has no word.
    """
    parts = [" ".join((quoted or word).split()) for quoted, word in _PARTS.findall(query)]
    parts = [part for part in parts if re.search(r"\w", part)]
    if not parts:
        raise InvalidInputError(f"search {query!r}: give at least one word to search for")
    return parts


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append(str(key))
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif value is not None:
        out.append(orjson.dumps(value).decode())


def indexed_text(row: StoredEvent) -> tuple[str, str]:
    """Return the tools an event names (``" a b "``: space-delimited) and its indexed text.

    A body that is not a JSON object (a journal altered outside agent-journal) is indexed
    by its summary alone.
    """
    try:
        payload = orjson.loads(row.body)
    except orjson.JSONDecodeError:
        payload = None
    if not isinstance(payload, dict):
        return " ", row.summary[:SEARCH_TEXT_LIMIT].replace("\x00", " ")
    tools = [payload.get("tool")]
    calls = payload.get("calls")
    if isinstance(calls, list):
        tools += [call.get("tool") for call in calls if isinstance(call, dict)]
    named = dict.fromkeys(t for t in tools if isinstance(t, str) and t and " " not in t)
    out = [row.summary]
    for key, value in payload.items():
        if key not in _SKIPPED:
            out.append(key)
            _leaves(value, out)
    text = "\n".join(out)[:SEARCH_TEXT_LIMIT].replace("\x00", " ")  # PostgreSQL text has no NUL
    return " " + " ".join(named) + " ", text


def snippet(text: str, parts: list[str], width: int = 120) -> str:
    """Return one line of ``text`` around the first match of any of ``parts``, ``width`` long.

    The match is sought as each part's words in order, whatever lies between them (as the
    index matched it); without one the snippet is the beginning of the text.
    """
    flat = " ".join(text.split())
    found = [
        match.start()
        for part in parts
        if (match := re.search(r"\W+".join(map(re.escape, re.findall(r"\w+", part))), flat, re.I))
    ]
    start = max(0, min(found, default=0) - width // 3)
    cut = flat[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(flat) else "")
