"""The columns of a session listing, and how they give way when the terminal is narrow.

One definition serves ``agent-journal sessions``, the demo's summary table and the TUI's
sessions list. Each column says what it shows, how it sorts, and how it gives way:

* never cut: ``session``, ``status``, ``fail``, ``ok%`` and ``cost`` (``session`` is cut
  in the middle only when even those do not fit);
* then, while they fit, in this order: ``outcome`` (32 cells, or down to 16: it says why
  a session failed, so it comes before the time), ``mfail``, ``started``, ``lineage``, ``steps``,
  ``events``, ``tokens``, ``rep``, ``cache%``, ``lat ms``, and last ``agent`` (24 cells,
  or down to 16). A column that does not fit is left out whole:
  a lineage is shown whole or not at all (never ``replay of de…``). A column with nothing
  to show (no session has a lineage, or a failed model call) is left out too;
* the space left over goes to ``session``, ``agent`` and ``outcome``, up to their widest
  cell (on a wide terminal, or in a pipe, nothing is cut);
* what is still left goes to ``meta`` (the metadata given at capture, where the listing
  reads it: ``sessions``), when there are 12 cells or more.

What ``fail`` and ``ok%`` count, from the fold's `journal.SessionState`:

* ``fail``: the tool calls that failed (``action_failed``) or that the gate rejected
  (``verification_failed``), plus one for a session that itself failed: halted with rule
  ``error`` (an exception in the agent's code or an unrecoverable fault), so a crash never
  shows 0;
* ``mfail``: the model calls that raised (``model_call_failed``: a rate limit a retry
  absorbed, a 500 the code caught), blank for none: they are not tool calls, so they are
  not in ``fail`` or ``ok%``;
* ``ok%``: committed calls over the calls decided, that failure counting as one more
  decided call (a session that committed one call and then raised shows 50%). A session
  with no ending (``running``: still being written, or cut off by a crash) shows ``?``:
  its outcome is not in the journal; one that decided no call shows ``-``;
* ``outcome``: the last event in its one-line form: the answer of a completed session,
  ``rule: reason`` of a halted or failed one, ``type: summary`` of the event a session
  without an ending stopped at. It is what the agent said or did, not a judgement: a
  refund the guard should have refused still reads ``Done: refunded $150.0 ...``.

Widths are terminal cells (a wide character takes two), so rows line up whatever the text.
Costs: the cells come from the ``sessions`` projection and one batched read of each
session's last event summary (`Journal.last_summaries`), never a payload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from rich.cells import cell_len

from journal import REPLAY_KEYS, SessionDetails, SessionSummary

from .text import STATUS_STYLE, cut, cut_middle, format_cost, format_time, safe_text

if TYPE_CHECKING:
    from rich.text import Text

__all__ = [
    "COLUMNS",
    "KEPT",
    "Column",
    "Layout",
    "Listed",
    "failures",
    "layout",
    "lineage",
    "listed",
    "metadata",
    "ok_rate",
    "outcome",
]


@dataclass(frozen=True, slots=True)
class Listed:
    """One session of a listing: its summary, last event and details.

    The last event is its type and one-line summary; the details (metadata, halt reason)
    are there when the listing read them.
    """

    summary: SessionSummary
    last: tuple[str, str] | None = None
    details: SessionDetails | None = None


def listed(
    summaries: Iterable[SessionSummary],
    last: dict[str, tuple[str, str]],
    details: dict[str, SessionDetails] | None = None,
) -> list[Listed]:
    """Pair each summary with its last event from `Journal.last_summaries`.

    And with its `Journal.session_details`, when given.
    """
    found = details or {}
    return [Listed(s, last.get(s.session_id), found.get(s.session_id)) for s in summaries]


def metadata(row: Listed) -> str:
    """The session's metadata as ``key=value`` words (values other than strings as JSON).

    The keys a capture writes to replay the session (`journal.REPLAY_KEYS`) are left out:
    they are not the user's (``--json`` has them).
    """
    if row.details is None:
        return ""
    return " ".join(
        f"{key}={value if isinstance(value, str) else orjson.dumps(value).decode()}"
        for key, value in row.details.metadata.items()
        if key not in REPLAY_KEYS
    )


def failures(s: SessionSummary) -> int:
    """Failed and rejected calls, plus one when the session itself failed (rule ``error``)."""
    return s.failures + (s.status == "failed")


def ok_rate(s: SessionSummary) -> float | None:
    """Committed calls over calls decided (a failed session's error counts as one).

    None when there is nothing to divide: no call was decided, or the session has no
    ending (its outcome is not known).
    """
    decided = s.steps + (s.status == "failed")
    if s.status == "running" or not decided:
        return None
    return s.committed / decided


def _ok_text(s: SessionSummary) -> str:
    rate = ok_rate(s)
    if rate is not None:
        return f"{rate:.0%}"
    return "?" if s.status == "running" else "-"


def lineage(s: SessionSummary) -> str:
    """``replay of X`` or ``fork of X@N`` (empty for an original session)."""
    if s.replay_of:
        return f"replay of {s.replay_of}"
    if s.forked_from:
        return f"fork of {s.forked_from}@{s.fork_seq}"
    return ""


def outcome(row: Listed) -> str:
    """The last event in one line: an answer, ``rule: reason``, or ``type: summary``."""
    if row.last is None:
        return ""
    kind, summary = row.last
    return summary if kind in ("agent_completed", "agent_halted") else f"{kind}: {summary}"


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its cell text, sort key and style, and how it gives way."""

    name: str
    help: str
    text: Callable[[Listed], str]
    key: Callable[[Listed], Any]
    right: bool = False
    flexible: bool = False
    """May be shown cut (with an ellipsis); otherwise shown whole or not at all."""
    least: int = 0
    """The narrowest a flexible column is shown."""
    want: int = 0
    """How wide a flexible column is made when it comes in (before other columns)."""
    middle: bool = False
    """Cut in the middle (ids: both ends tell them apart) rather than at the end."""
    style: Callable[[Listed], str] = lambda _: ""


def _number(get: Callable[[SessionSummary], int], name: str, help: str) -> Column:
    return Column(name, help, lambda r: str(get(r.summary)), lambda r: get(r.summary), True)


def _rate(get: Callable[[SessionSummary], float | None]) -> Callable[[Listed], float]:
    return lambda r: -1.0 if (rate := get(r.summary)) is None else rate


COLUMNS: dict[str, Column] = {
    column.name: column
    for column in (
        Column(
            "session",
            "the session id",
            lambda r: safe_text(r.summary.session_id),
            lambda r: r.summary.session_id,
            flexible=True,
            least=12,
            middle=True,
        ),
        Column(
            "agent",
            "the agent reference (module:factory)",
            lambda r: safe_text(r.summary.agent or "-"),
            lambda r: r.summary.agent or "",
            flexible=True,
            least=16,
            want=24,
            middle=True,
        ),
        Column(
            "status",
            "completed, halted, failed, or running (no ending yet, or cut off)",
            lambda r: r.summary.status,
            lambda r: r.summary.status,
            style=lambda r: STATUS_STYLE.get(r.summary.status, ""),
        ),
        _number(lambda s: s.events, "events", "events in the session"),
        _number(lambda s: s.steps, "steps", "tool calls decided: committed, failed or rejected"),
        Column(
            "fail",
            "failed or rejected calls, +1 if the session failed (rule error)",
            lambda r: str(failures(r.summary)),
            lambda r: failures(r.summary),
            right=True,
            style=lambda r: "red" if failures(r.summary) else "",
        ),
        Column(
            "ok%",
            "committed over decided calls (+1 if failed); ? no ending, - none",
            lambda r: _ok_text(r.summary),
            _rate(ok_rate),
            right=True,
        ),
        Column(
            "mfail",
            "failed model calls (a retried 429, a caught 500); blank: none",
            lambda r: str(r.summary.model_failures or ""),
            lambda r: r.summary.model_failures,
            right=True,
            style=lambda r: "yellow" if r.summary.model_failures else "",
        ),
        Column(
            "rep",
            "repairs of the model's output",
            lambda r: str(r.summary.repairs),
            lambda r: r.summary.repairs,
            right=True,
            style=lambda r: "yellow" if r.summary.repairs else "",
        ),
        _number(lambda s: s.tokens_in + s.tokens_out, "tokens", "input and output tokens"),
        Column(
            "cache%",
            "share of input tokens served from the prompt cache",
            lambda r: f"{r.summary.cache_hit_rate:.0%}" if r.summary.tokens_in else "-",
            _rate(lambda s: s.cache_hit_rate if s.tokens_in else None),
            right=True,
        ),
        Column(
            "cost",
            "the model's cost in dollars",
            lambda r: format_cost(r.summary.cost),
            lambda r: r.summary.cost,
            right=True,
        ),
        Column(
            "lat ms",
            "mean model latency per call",
            lambda r: f"{r.summary.mean_latency_ms:.0f}" if r.summary.model_calls else "-",
            lambda r: r.summary.mean_latency_ms,
            right=True,
        ),
        Column(
            "started",
            "when the session started (UTC)",
            lambda r: format_time(r.summary.started),
            lambda r: r.summary.started or "",
        ),
        Column(
            "outcome",
            "last event: the answer, a halt's rule: reason, or where it stopped",
            lambda r: safe_text(outcome(r)),
            outcome,
            flexible=True,
            least=16,
            want=32,
        ),
        Column(
            "lineage",
            "replay of X, or fork of X@N",
            lambda r: safe_text(lineage(r.summary)),
            lambda r: lineage(r.summary),
        ),
        Column(
            "meta",
            "the metadata the session was started with, key=value",
            lambda r: safe_text(metadata(r)),
            metadata,
            flexible=True,
            least=12,
        ),
    )
}
"""Every column, in the order they are shown."""

KEPT: tuple[str, ...] = ("session", "status", "fail", "ok%", "cost")
"""The columns never left out."""

_ADDED: tuple[str, ...] = (
    "outcome",
    "mfail",
    "started",
    "lineage",
    "steps",
    "events",
    "tokens",
    "rep",
    "cache%",
    "lat ms",
    "agent",
)
"""The other columns, in the order they are added while they fit."""

_GROWN: tuple[str, ...] = ("session", "agent", "outcome")
"""Flexible columns, in the order they take the space left over."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Which columns are shown, how wide each is, and the gap between them."""

    widths: dict[str, int]
    gap: int

    def line(self, cells: dict[str, tuple[str, str]]) -> Text:
        """One line: each shown cell (text, style) padded or cut to its column's width."""
        from rich.text import Text

        text = Text(no_wrap=True, overflow="ellipsis", end="")
        for index, (name, width) in enumerate(self.widths.items()):
            column = COLUMNS[name]
            value, style = cells[name]
            if cell_len(value) > width:
                value = cut_middle(value, width) if column.middle else cut(value, width)
            pad = " " * (width - cell_len(value))
            if index:
                text.append(" " * self.gap)
            text.append(pad + value if column.right else value + pad, style)
        text.rstrip()
        return text

    def header(self) -> Text:
        """The column titles, bold."""
        return self.line({name: (name, "bold") for name in self.widths})

    def row(self, row: Listed) -> Text:
        """The cells of one session."""
        return self.line(
            {name: (COLUMNS[name].text(row), COLUMNS[name].style(row)) for name in self.widths}
        )


def natural_widths(rows: Sequence[Listed]) -> dict[str, int]:
    """How wide each column would like to be: its widest cell or title (0: nothing to show)."""
    widths = dict.fromkeys(COLUMNS, 0)
    for row in rows:
        for name, column in COLUMNS.items():
            widths[name] = max(widths[name], cell_len(column.text(row)))
    for name in COLUMNS:
        if widths[name]:
            widths[name] = max(widths[name], len(name))
    return widths


def layout(natural: dict[str, int], width: int) -> Layout:
    """Choose the columns that fit in ``width`` cells and their widths (see the module doc).

    The kept columns always come: with a gap of two cells, or one when two do not fit,
    the session id cut in the middle when even that does not fit.
    """
    kept = {name: max(natural[name], len(name)) for name in KEPT}
    gap = 2 if sum(kept.values()) + 2 * (len(kept) - 1) <= width else 1
    chosen = dict(kept)
    used = sum(chosen.values()) + gap * (len(chosen) - 1)
    if used > width:
        least = COLUMNS["session"].least
        chosen["session"] = max(least, chosen["session"] - (used - width))
        used = sum(chosen.values()) + gap * (len(chosen) - 1)
    for name in _ADDED:
        column = COLUMNS[name]
        room = width - used - gap
        if not natural[name]:
            continue
        if column.flexible and room >= min(natural[name], column.least):
            chosen[name] = min(natural[name], column.want, room)
        elif natural[name] <= room:
            chosen[name] = natural[name]
        else:
            continue
        used += gap + chosen[name]
    for name in _GROWN:
        if name in chosen and chosen[name] < natural[name] and used < width:
            more = min(natural[name] - chosen[name], width - used)
            chosen[name] += more
            used += more
    room = width - used - gap
    if natural["meta"] and room >= min(natural["meta"], COLUMNS["meta"].least):
        chosen["meta"] = min(natural["meta"], room)  # only what the others left over
    return Layout({name: chosen[name] for name in COLUMNS if name in chosen}, gap)


def help_text() -> str:
    """One line per column: its name, then what it shows (``sessions --help``, the docs)."""
    return "\n".join(f"{name:<8} {column.help}" for name, column in COLUMNS.items())
