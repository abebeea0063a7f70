"""Plain-terminal rendering for the CLI: tables and timelines built from untrusted text.

Payload text comes from models, tools and users. It is never interpreted: control
characters (terminal escape sequences included) are shown as visible escapes
(`tui.text.safe_text`), and every cell is a `rich.text.Text`, so ``[bold red]`` in a tool
result prints as those characters.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .columns import failures
from .text import STATUS_STYLE, event_style, format_cost, safe_text, short_json, tidy_floats

if TYPE_CHECKING:
    from rich.console import Console

    from journal import Problem, SessionState, SessionSummary, StoredEvent, VerifyReport
    from replay import Change, DiffResult, DiffRow, ReplayResult, StateChange

    from .columns import Listed  # (imported when printing: rich.cells costs every start)


__all__ = [
    "SERVED_ANYWAY",
    "console",
    "diff_json",
    "json_default",
    "print_diff",
    "print_repaired",
    "print_replay",
    "print_sessions",
    "print_state",
    "print_timeline",
    "print_verify",
]


def console(stderr: bool = False) -> Console:
    """Return a rich console that never interprets markup or emoji in what it prints.

    Its width is the terminal's; ``COLUMNS`` (when set) overrides it, and output that is
    not a terminal is 400 cells wide unless ``COLUMNS`` says otherwise.
    """
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 here; the CLI's stdout drops what a reader that went away (| head)
            # does not read, and the command keeps its own exit code
            self.quiet = True

    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "")
    return _Console(
        file=stream,
        width=None if stream.isatty() else int(columns) if columns.isdigit() else 400,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=False,
    )


def print_sessions(rows: Sequence[Listed]) -> None:
    """Print sessions as a table whose columns give way by priority (see `tui.columns`).

    The table fits the terminal's width (``COLUMNS`` when set; 400 cells when the output
    is not a terminal, so nothing is left out of a pipe).
    """
    from .columns import layout, natural_widths

    out = console()
    shape = layout(natural_widths(rows), out.width)
    out.print(shape.header())
    for row in rows:
        out.print(shape.row(row))


def print_timeline(summary: SessionSummary, rows: Iterable[StoredEvent]) -> None:
    """Print a session's header line and one line per event: seq, time, type, summary.

    The header's ``fail`` is the `sessions` column of that name (`tui.columns.failures`);
    the failed model calls the session holds (a 429 a retry absorbed) are named when there
    are any.
    """
    from rich.text import Text

    out = console()
    header = Text(safe_text(f"{summary.session_id}  {summary.agent or '-'}  "), style="bold")
    header.append(summary.status, style=STATUS_STYLE.get(summary.status, ""))
    header.append(
        f"  events={summary.events} steps={summary.steps} fail={failures(summary)} "
        f"tokens={summary.tokens_in + summary.tokens_out} cost={format_cost(summary.cost)}"
    )
    if summary.model_failures:
        header.append(f"  failed model calls={summary.model_failures}", style="yellow")
    if summary.halt_rule:
        header.append(safe_text(f"  halt={summary.halt_rule}"), style="red")
    out.print(header)
    width = len(str(summary.last_seq))
    for row in rows:
        line = Text(f"{row.seq:>{width}} {row.ts[11:23]} ", style="dim")
        line.append(f"{row.type:<19} ", style=event_style(row.type) or None)
        line.append(safe_text(row.summary))
        out.print(line, overflow="ellipsis", no_wrap=True)


def _problem_line(problem: Problem) -> str:
    place = "journal" if problem.session_id is None else f"session {problem.session_id}"
    if problem.seq is not None:
        place += f" seq {problem.seq}"
    return safe_text(f"{place}: {problem.kind}: {problem.message}")


def print_repaired(repaired: Sequence[Problem]) -> None:
    """Print what ``verify --repair`` rebuilt: one line per finding mended, then a count."""
    out = console()
    for problem in repaired:
        out.print(f"repaired {_problem_line(problem)}")
    out.print(f"repaired: {len(repaired)} finding(s)")


def print_verify(report: VerifyReport) -> None:
    """Print a verify report: one line per problem, then a verdict line."""
    out = console()
    for problem in report.problems:
        out.print(_problem_line(problem))
    verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
    out.print(f"{verdict}: {report.sessions} session(s), {report.events} event(s) checked")


def json_default(value: Any) -> Any:
    """`orjson` default for models in CLI output."""
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")
    return dump(mode="json")


def _record_line(record: dict[str, Any] | None, changes: Sequence[Change] = ()) -> str:
    """The record in one line; with ``changes``, only its fields that differ.

    A changed ``session_started`` whose metadata differs by one key shows its metadata,
    not its whole configuration again (the change lines below say what moved).
    """
    from replay import describe

    line = describe(record)
    if not changes or record is None:
        return safe_text(line)
    fields = {re.split(r"[.\[]", change.path, maxsplit=1)[0] for change in changes}
    kept = {key: value for key, value in record.items() if key in fields or key == "type"}
    return safe_text(describe(kept))


def _change_line(path: str, before: Any, after: Any, width: int, *, indent: int) -> str:
    before_text, after_text = short_json(before, width), short_json(after, width)
    return f"{' ' * indent}{safe_text(path)}: {before_text} -> {after_text}"


def _diff_line(change: Change, width: int, *, indent: int) -> str:
    before, after = change.shown(width)
    return f"{' ' * indent}{safe_text(change.path)}: {safe_text(before)} -> {safe_text(after)}"


def print_state(
    session_id: str, seq: int, state: SessionState, changes: Sequence[StateChange]
) -> None:
    """Print a folded state as ``field  value`` lines, then what the event at ``seq`` changed."""
    out = console()
    out.print(safe_text(f"{session_id} after seq {seq}"), style="bold")
    for key, value in tidy_floats(state.model_dump(mode="json")).items():
        out.print(f"  {key:<22} {short_json(value)}", overflow="ellipsis", no_wrap=True)
    if changes:
        out.print("changed by this event:", style="bold")
        for change in changes:
            before, after = tidy_floats(change.before), tidy_floats(change.after)
            out.print(_change_line(change.path, before, after, 40, indent=2))


def print_replay(result: ReplayResult) -> None:
    """Print a replay's verdict and, when it diverged, the first divergence."""
    out = console()
    saved = f" (saved as {result.replay_session_id})" if result.saved else ""
    head = f"replay of {result.session_id} with {result.agent}: "
    if result.identical:
        note = (
            "" if result.recording_complete else "; the recording has no ending, its prefix matched"
        )
        out.print(
            safe_text(
                f"{head}identical, {result.recorded_events} events: "
                f"{result.served.line}{note}{saved}"
            ),
            style="green",
        )
    else:
        _print_divergences(out, result, head, saved)
    if result.stopped_at is not None:
        out.print(
            f"  stopped at seq {result.stopped_at}: no recorded reply fits from there "
            "(--live-model goes on live)",
            style="yellow",
        )
    if result.live_from is not None:
        out.print(f"  a live model answered from seq {result.live_from} on", style="yellow")
    if result.unsaved:
        out.print(safe_text(f"  {result.unsaved}"), style="yellow")
    for call in result.unrecorded_calls:
        out.print(
            safe_text(f"  not in the recording: {call.tool}({short_json(call.args)})"),
            style="yellow",
        )
    for live in result.live_differences:
        out.print(
            safe_text(
                f"  live {live.tool} differs from seq {live.recorded_seq}: "
                f"{short_json(live.recorded, 50)} -> {short_json(live.live, 50)}"
            ),
            style="yellow",
        )
    if not result.identical:
        out.print(safe_text(f"  up to there, {result.served.line}"))


def _print_divergences(out: Any, result: ReplayResult, head: str, saved: str) -> None:
    """The lines of a replay that diverged: where, the configuration, the behaviour."""
    first, behaviour = result.first_divergence, result.behaviour_divergence
    seq = 0 if first is None else first.seq
    configured = ": the configuration changed" if result.config_changes else ""
    out.print(safe_text(f"{head}diverged at seq {seq}{configured}{saved}"), style="red")
    _print_config_changes(out, result.config_changes, SERVED_ANYWAY if behaviour is None else "")
    if behaviour is None:
        if result.config_changes:
            out.print("  the behaviour, with the recorded replies, is identical")
        return
    if result.config_changes:
        out.print(f"  with the recorded replies, the behaviour diverged at seq {behaviour.seq}:")
    out.print(safe_text(f"  {behaviour.reason}"))
    out.print(f"  expected: {_record_line(behaviour.expected)}", overflow="ellipsis", no_wrap=True)
    out.print(f"  actual:   {_record_line(behaviour.actual)}", overflow="ellipsis", no_wrap=True)
    for change in behaviour.changes:
        out.print(_diff_line(change, 60, indent=4))


SERVED_ANYWAY = " (the recorded replies were served anyway)"
"""Said of a configuration change only when no behaviour diverged: the replay then served
every recorded reply. A diff serves nothing, and a replay that diverged may have stopped
at the first request (a captured client checks each one)."""


def _print_config_changes(out: Any, changes: Sequence[Change], note: str = "") -> None:
    if changes:
        out.print(f"  configuration changed{note}:")
        for change in changes:
            out.print(_diff_line(change, 60, indent=4))


def diff_json(
    result: DiffResult,
    a: Sequence[dict[str, Any]],
    b: Sequence[dict[str, Any]],
    name_a: str,
    name_b: str,
) -> dict[str, Any]:
    """The ``diff --json`` document: verdict, first divergence and every non-equal row."""
    from replay import Divergence, configuration_divergence

    rows = [row for row in result.rows if row.kind != "equal"]
    behaviour = _row_json(rows[0], a, b) if rows else None
    first = behaviour
    if result.config_changes:
        at_zero = rows[0] if rows and rows[0].a == 0 and rows[0].b == 0 else None
        divergence = configuration_divergence(
            a[0],
            b[0],
            result.config_changes,
            None if at_zero is None else Divergence(0, "", a[0], b[0], at_zero.changes),
        )
        first = {"kind": "changed", **divergence.as_json()}
    return {
        "verdict": "identical" if result.identical else "diverged",
        "config_changes": [change.as_json() for change in result.config_changes],
        "a": name_a,
        "b": name_b,
        "a_events": result.a_count,
        "b_events": result.b_count,
        "first_divergence": first,
        "behaviour_divergence": behaviour,
        "rows": [
            {
                "kind": row.kind,
                "a": row.a,
                "b": row.b,
                "changes": [c.as_json() for c in row.changes],
            }
            for row in rows
        ],
    }


def _row_json(
    row: DiffRow, a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """A non-equal row of a diff as ``diff --json`` names a divergence."""
    return {
        "seq": row.a if row.a is not None else row.b,
        "kind": row.kind,
        "expected": None if row.a is None else a[row.a],
        "actual": None if row.b is None else b[row.b],
        "changes": [change.as_json() for change in row.changes],
    }


def print_diff(
    result: DiffResult,
    a: Sequence[dict[str, Any]],
    b: Sequence[dict[str, Any]],
    name_a: str,
    name_b: str,
) -> None:
    """Print an aligned diff: runs of equal events collapsed, each difference on its lines."""
    out = console()
    out.print(safe_text(f"--- {name_a} ({result.a_count} events)"), style="red")
    out.print(safe_text(f"+++ {name_b} ({result.b_count} events)"), style="green")
    beyond = (
        f"; {result.beyond_end} event(s) of b after the end of a, which has no ending, not compared"
        if result.beyond_end
        else ""
    )
    if result.identical:
        out.print(f"identical (volatile fields ignored){beyond}", style="green")
        return
    _print_config_changes(out, result.config_changes)
    equal = 0
    for row in result.rows:
        if row.kind == "equal":
            equal += 1
            continue
        if equal:
            out.print(f"  … {equal} equal event(s)", style="dim")
            equal = 0
        if row.kind in ("changed", "removed") and row.a is not None:
            out.print(
                f"- {row.a:>5} {_record_line(a[row.a], row.changes)}",
                style="red",
                overflow="ellipsis",
                no_wrap=True,
            )
        if row.kind in ("changed", "inserted") and row.b is not None:
            out.print(
                f"+ {row.b:>5} {_record_line(b[row.b], row.changes)}",
                style="green",
                overflow="ellipsis",
                no_wrap=True,
            )
        for change in row.changes:
            out.print(_diff_line(change, 50, indent=8))
    if equal:
        out.print(f"  … {equal} equal event(s)", style="dim")
    out.print(f"{result.differences} difference(s){beyond}")
