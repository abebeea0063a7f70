"""What a shared page holds, as JSON: each run's rows, events and states, the diff, the verdict.

The page must open a 10,000-event session as fast as a 100-event one (within 3x), and
grow linearly with the session. So:

* the rows the timeline draws (seq, time, type, summary, mark) are one small array,
  parsed when the page opens;
* the events' bodies (canonical JSON text, parsed only when an event is opened) and the
  states are in chunks of `CHUNK` events, each its own JSON block parsed on first need;
* the state is not repeated per event: each chunk carries the whole state before its
  first event, and each event the few fields it changed (``["=", key, value]``,
  ``["=", key, sub, value]`` or ``["-", key, sub]``), so the page rebuilds the state
  before and after any event from at most `CHUNK` small patches. The states are the
  journal's own fold (`journal.apply`) over the page's (redacted) events: the page never
  folds anything itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from journal import SessionState, apply

from ..text import FAILURE_TYPES, event_style
from .runs import SharedRuns

__all__ = ["CHUNK", "page_data", "run_data", "state_patch"]

CHUNK = 256
"""Events per chunk of bodies and state patches."""

_SIGNS = {
    "agent_halted": "■",
    "circuit_opened": "!",
    "repair_applied": "~",
    "fallback_invoked": "↪",
    "context_compacted": "≡",
    "agent_completed": "✓",
}
_CLASSES = {"red": "fail", "yellow": "repair", "green": "ok", "cyan": "input", "": ""}


def _mark(event_type: str) -> str:
    """The class a row of this type is drawn with (``halt``, ``fail``, ``repair``, ...)."""
    if event_type == "agent_halted":
        return "halt"
    return _CLASSES.get(event_style(event_type), "")


def _sign(event_type: str) -> str:
    return _SIGNS.get(event_type, "✗" if event_type in FAILURE_TYPES else "")


def state_patch(before: dict[str, Any], after: dict[str, Any]) -> list[list[Any]]:
    """The operations that turn the dumped state ``before`` into ``after``, exactly.

    A field whose value is an object on both sides is patched key by key (a key gone is a
    ``"-"``); any other changed field is set whole.
    """
    ops: list[list[Any]] = []
    for key, new in after.items():
        old = before.get(key)
        if old == new and type(old) is type(new):
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            for sub, value in new.items():
                if sub not in old or old[sub] != value or type(old[sub]) is not type(value):
                    ops.append(["=", key, sub, value])
            ops.extend(["-", key, sub] for sub in old if sub not in new)
        else:
            ops.append(["=", key, new])
    return ops


def _chunks(runs: SharedRuns, session_id: str) -> Iterator[dict[str, Any]]:
    """Each chunk: the state before its first event, and per event its body and patch."""
    stored = runs.view.stored_events(session_id)
    state = SessionState()
    dumped = state.model_dump(mode="json")
    chunk: dict[str, Any] = {"state": dumped, "events": []}
    for row, recorded in zip(stored, runs.view.events(session_id), strict=True):
        state = apply(state, recorded)
        after = state.model_dump(mode="json")
        chunk["events"].append([row.body, state_patch(dumped, after)])
        dumped = after
        if len(chunk["events"]) == CHUNK:
            yield chunk
            chunk = {"state": dumped, "events": []}
    if chunk["events"]:
        yield chunk


def run_data(runs: SharedRuns, session_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's header and rows, and its chunks (bodies and state patches)."""
    rows = [
        [row.seq, row.ts, row.type, row.summary, _mark(row.type), _sign(row.type)]
        for row in runs.view.stored_events(session_id)
    ]
    chunks = list(_chunks(runs, session_id))
    final = runs.view.state(session_id)
    header = {
        "id": session_id,
        "name": runs.names.get(session_id, session_id),
        "state": final.model_dump(mode="json"),
        "rows": rows,
        "chunk": CHUNK,
    }
    return header, chunks


def _diff(runs: SharedRuns) -> dict[str, Any] | None:
    if runs.other_id is None:
        return None
    from replay import diff_records, session_records

    a = session_records(runs.view, runs.session_id)
    b = session_records(runs.view, runs.other_id)
    result = diff_records(a, b) if runs.rules is None else diff_records(a, b, runs.rules)
    first = next((i for i, row in enumerate(result.rows) if row.kind != "equal"), None)
    return {
        "identical": result.identical,
        "differences": result.differences,
        "beyond_end": result.beyond_end,
        "config_changes": [change.as_json() for change in result.config_changes],
        "rows": [
            [row.kind, row.a, row.b, [change.as_json() for change in row.changes]]
            for row in result.rows
        ],
        "first": first,
    }


def page_data(runs: SharedRuns) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """The page's JSON: its index (runs, diff, verdict) and, per run, its chunks."""
    headers: list[dict[str, Any]] = []
    chunks: list[list[dict[str, Any]]] = []
    for session_id in (runs.session_id, runs.other_id):
        if session_id is None:
            continue
        header, run_chunks = run_data(runs, session_id)
        headers.append(header)
        chunks.append(run_chunks)
    replay = None
    if runs.replay is not None:
        replay = {"summary": runs.replay.summary, **runs.replay.as_json()}
    index = {
        "format": 1,
        "redacted": runs.redacted,
        "runs": headers,
        "diff": _diff(runs),
        "replay": replay,
        "initial": SessionState().model_dump(mode="json"),
    }
    return index, chunks
