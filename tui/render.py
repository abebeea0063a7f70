"""Plain-terminal rendering for the CLI: tables and timelines built from untrusted text.

Payload text comes from models, tools and users. It is never interpreted: control
characters (terminal escape sequences included) are shown as visible escapes, and every
cell is a `rich.text.Text`, so ``[bold red]`` in a tool result prints as those characters.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from journal import SessionSummary, StoredEvent
    from journal.verify import VerifyReport

__all__ = [
    "FAILURE_TYPES",
    "console",
    "event_style",
    "format_cost",
    "format_time",
    "json_default",
    "print_sessions",
    "print_timeline",
    "print_verify",
    "safe_text",
]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")

FAILURE_TYPES = frozenset(
    {"verification_failed", "action_failed", "agent_halted", "circuit_opened"}
)
"""Event types marked as failures in timelines."""


def safe_text(text: str) -> str:
    """Replace control characters (escape sequences, bell, newlines) with visible escapes."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def format_time(ts: str | None) -> str:
    """Show a canonical timestamp as ``YYYY-MM-DD HH:MM:SS``; ``-`` for none."""
    return "-" if not ts else f"{ts[:10]} {ts[11:19]}"


def format_cost(cost: float) -> str:
    """Show a cost in dollars with four decimals."""
    return f"${cost:.4f}"


def event_style(event_type: str) -> str:
    """Return the rich style that marks an event type in timelines."""
    if event_type in FAILURE_TYPES:
        return "red"
    if event_type in ("repair_applied", "fallback_invoked", "context_compacted"):
        return "yellow"
    if event_type == "agent_completed":
        return "green"
    if event_type in ("user_input", "session_started"):
        return "cyan"
    return ""


def console(stderr: bool = False) -> Console:
    """Return a rich console that never interprets markup or emoji in what it prints."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(
        file=stream,
        width=None if stream.isatty() else 400,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=False,
    )


_STATUS_STYLE = {"completed": "green", "halted": "yellow", "failed": "red", "running": "cyan"}


def print_sessions(summaries: Iterable[SessionSummary]) -> None:
    """Print session summaries as a table."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        ("session", "left"),
        ("agent", "left"),
        ("status", "left"),
        ("events", "right"),
        ("steps", "right"),
        ("fail", "right"),
        ("tokens", "right"),
        ("cost", "right"),
        ("started", "left"),
        ("lineage", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for s in summaries:
        lineage = (
            f"replay of {s.replay_of}"
            if s.replay_of
            else f"fork of {s.forked_from}@{s.fork_seq}"
            if s.forked_from
            else ""
        )
        table.add_row(
            Text(safe_text(s.session_id)),
            Text(safe_text(s.agent or "-")),
            Text(s.status, style=_STATUS_STYLE.get(s.status, "")),
            str(s.events),
            str(s.steps),
            Text(str(s.failures), style="red" if s.failures else ""),
            str(s.tokens_in + s.tokens_out),
            format_cost(s.cost),
            format_time(s.started),
            Text(safe_text(lineage)),
        )
    console().print(table)


def print_timeline(summary: SessionSummary, rows: Iterable[StoredEvent]) -> None:
    """Print a session's header line and one line per event: seq, time, type, summary."""
    from rich.text import Text

    out = console()
    header = Text(safe_text(f"{summary.session_id}  {summary.agent or '-'}  "), style="bold")
    header.append(summary.status, style=_STATUS_STYLE.get(summary.status, ""))
    header.append(
        f"  events={summary.events} steps={summary.steps} failures={summary.failures} "
        f"tokens={summary.tokens_in + summary.tokens_out} cost={format_cost(summary.cost)}"
    )
    if summary.halt_rule:
        header.append(safe_text(f"  halt={summary.halt_rule}"), style="red")
    out.print(header)
    width = len(str(summary.last_seq))
    for row in rows:
        line = Text(f"{row.seq:>{width}} {row.ts[11:23]} ", style="dim")
        line.append(f"{row.type:<19} ", style=event_style(row.type) or None)
        line.append(safe_text(row.summary))
        out.print(line, overflow="ellipsis", no_wrap=True)


def print_verify(report: VerifyReport) -> None:
    """Print a verify report: one line per problem, then a verdict line."""
    out = console()
    for problem in report.problems:
        place = "journal" if problem.session_id is None else f"session {problem.session_id}"
        if problem.seq is not None:
            place += f" seq {problem.seq}"
        out.print(safe_text(f"{place}: {problem.kind}: {problem.message}"))
    verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
    out.print(f"{verdict}: {report.sessions} session(s), {report.events} event(s) checked")


def json_default(value: Any) -> Any:
    """`orjson` default for models in CLI output."""
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")
    return dump(mode="json")
