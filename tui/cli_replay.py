"""CLI commands that run or compare sessions: demo, state, replay, fork and diff."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from journal import Journal, without_password

if TYPE_CHECKING:
    from replay import NormalizationRules, ReplayOptions

from .clikit import (
    EXIT_FINDING,
    OutputFile,
    db_option,
    db_option_with,
    json_option,
    open_existing,
    open_for_writing,
    print_json,
)
from .reads import fixture_note, state_at, state_json

__all__ = ["demo", "diff", "fixture", "fork", "replay", "state"]


@click.command(short_help="Run the example agents into a journal and show them.")
@db_option_with("Journal to write the demo sessions into (created if missing).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the scripted models.")
@click.option(
    "--sessions",
    "count",
    type=click.IntRange(min=1),
    help="How many sessions (default: one per scenario; more repeat them with new seeds).",
)
@click.option("--no-tui", is_flag=True, help="Do not open the terminal UI afterwards.")
def demo(db: str, seed: int, count: int | None, no_tui: bool) -> None:
    """Run the example agents into a journal and show what happened.

    Every scenario exercises one path of the loop: a refund whose guard has a bug and its
    fixed twin, a breaker with and without a fallback, exact-repeat, step-limit and storm
    halts, parallel reads, repairs of a sloppy model, an agent whose own code raises, and
    a multi-turn chat. The same seed gives the same sessions; sessions already in the
    journal are left alone.
    """
    from agentloop.examples import SCENARIOS, run_demo

    from .columns import listed
    from .render import console, print_sessions

    total = count or len(SCENARIOS)
    with open_for_writing(db) as journal:
        if sys.stderr.isatty():
            from rich.progress import Progress

            with Progress(console=console(stderr=True), transient=True) as bar:
                task = bar.add_task("running demo sessions", total=total)
                ran = run_demo(
                    journal, seed=seed, sessions=total, progress=lambda _: bar.advance(task)
                )
        else:
            ran = run_demo(journal, seed=seed, sessions=total)
        summaries = [journal.require(item.session_id) for item in ran]
        last = journal.last_summaries([s.session_id for s in summaries])
    print_sessions(listed(summaries, last))
    out = console()
    out.print()
    for item in ran:
        note = "" if item.created else " (already in the journal)"
        out.print(f"{item.session_id}: {item.scenario.shows}{note}")
    out.print()
    first = ran[0].session_id
    target = without_password(db)
    if db == ":memory:":  # nothing to show next, nor to open in the terminal UI
        out.print("Journal: :memory:, gone with this command (--db FILE keeps the sessions)")
        return
    out.print(f"Journal: {target}")
    out.print(f"Next: agent-journal show {first} --db {target}")
    fixed = "agentloop.examples.refund:build_fixed"
    out.print(f"      agent-journal replay {first} --db {target} --agent {fixed}")
    if not no_tui and sys.stdin.isatty() and sys.stdout.isatty():
        from .app import JournalApp

        with open_existing(db) as journal:
            JournalApp(db=journal).run()


@click.command(short_help="Show a session's state after a seq, and what changed.")
@click.argument("session")
@db_option
@click.option(
    "--at", "at_seq", type=int, help="The seq to show the state after (default: the last)."
)
@json_option
def state(session: str, db: str, at_seq: int | None, as_json: bool) -> None:
    """Show a session's folded state after a seq, and what that event changed.

    States come from snapshots kept every 256 events, so any seq of a long session
    answers in milliseconds.
    """
    with open_existing(db) as journal:
        found = state_at(journal, session, at_seq, "--at")
    if as_json:
        print_json(state_json(session, found))
        return
    from .render import print_state

    print_state(session, found.seq, found.state, found.changes)


def _ignore_option(function: Any) -> Any:
    return click.option(
        "--ignore",
        "ignore",
        multiple=True,
        metavar="TYPE.PATH",
        help="Also leave this field out of the comparison (repeatable), e.g. "
        "action_committed.result.fetched_at, or *.cost for every event type.",
    )(function)


def _live_model_option(default_help: str) -> Callable[[Any], Any]:
    return click.option(
        "--live-model",
        metavar="agent|MODULE:FACTORY",
        help="What answers where no recorded reply fits the code's context (it diverged, "
        "or ran past the recording): 'agent' for the agent's own model, or a factory "
        f"returning a model; the tools then run live too. {default_help}",
    )


def _rules(ignore: Sequence[str]) -> NormalizationRules:
    from replay import DEFAULT_RULES

    return DEFAULT_RULES.ignoring(ignore)


def _allow_side_effects_option(function: Any) -> Any:
    return click.option(
        "--allow-side-effects",
        "allow_side_effects",
        multiple=True,
        metavar="NAME",
        help="Let this tool, declared with side effects, run for real where tools run live "
        "(repeatable).",
    )(function)


def _live_option(function: Any) -> Any:
    function = click.option(
        "--live-tool",
        "live_tool",
        multiple=True,
        metavar="NAME",
        help="Run this tool for real (repeatable; '*' for every tool, as --live-tools); "
        "others come from the recording.",
    )(function)
    function = _allow_side_effects_option(function)
    return click.option(
        "--live-tools",
        is_flag=True,
        help="Run every tool for real instead of the recording (but those declared with "
        "side effects).",
    )(function)


def _options(
    *,
    agent: str | None,
    live_tools: bool,
    live_tool: Sequence[str],
    allow_side_effects: Sequence[str],
    live_model: str | bool | None,
    ignore: Sequence[str],
) -> ReplayOptions:
    """The command line's replay options, built once (`replay.ReplayOptions`)."""
    from replay import ReplayOptions

    if live_tools and live_tool:
        raise click.UsageError("--live-tools and --live-tool exclude each other")
    return ReplayOptions(
        agent=agent,
        live_tools=True if live_tools else live_tool,
        allow_side_effects=allow_side_effects,
        live_model=live_model,
        rules=_rules(ignore),
    )


@click.command(short_help="Re-run a session or a JSONL file and compare, event by event.")
@click.argument("session", metavar="SESSION|FILE.jsonl")
@db_option
@click.option(
    "--agent", metavar="MODULE:FACTORY", help="Run this agent instead of the recorded one."
)
@_live_option
@_live_model_option("Default: none, the replay stops there.")
@click.option("--save", is_flag=True, help="Keep the replay in the journal (replay_of SESSION).")
@_ignore_option
@json_option
def replay(
    session: str,
    db: str,
    agent: str | None,
    live_tools: bool,
    live_tool: Sequence[str],
    allow_side_effects: Sequence[str],
    live_model: str | None,
    save: bool,
    ignore: Sequence[str],
    as_json: bool,
) -> None:
    """Re-run a recorded session (or a JSONL fixture file) and compare it, event by event.

    The recorded model outputs stand in for the model and, unless --live-tools or
    --live-tool is given, the recorded tool results stand in for the tools: no API key, no
    side effects. Exit 0 when the replay is identical, 1 when it diverged (the first
    divergence is printed: seq, expected and actual event, the fields that changed; a
    changed configuration diverges at seq 0, then the behaviour with the recorded replies
    is told), 2 when it cannot run (no agent, untrusted, a --live-tool name the agent has
    no tool for).
    """
    from replay import Replayer

    options = _options(
        agent=agent,
        live_tools=live_tools,
        live_tool=live_tool,
        allow_side_effects=allow_side_effects,
        live_model=live_model,
        ignore=ignore,
    )
    replayer = Replayer(options, save=save)
    if _is_file(session):
        if save:
            raise click.UsageError("--save needs a session of a journal, not a file")
        from journal import import_file

        with Journal.open(":memory:") as scratch:
            imported = import_file(scratch, session).session_id
            result = replayer.replay(scratch, imported, source=session)
    else:
        with open_existing(db) as journal:
            result = replayer.replay(journal, session)
    if as_json:
        print_json(result.as_json())
    else:
        from .render import print_replay

        print_replay(result)
    if not result.identical:
        sys.exit(EXIT_FINDING)


@click.command(short_help="Copy a session up to a seq and run on with the current code.")
@click.argument("session")
@db_option
@click.option("--at", "at_seq", type=int, required=True, help="The last seq to keep.")
@click.option("--agent", metavar="MODULE:FACTORY", help="Run on with this agent instead.")
@_live_option
@_live_model_option("Default: the agent's own model.")
@_ignore_option
@json_option
def fork(
    session: str,
    db: str,
    at_seq: int,
    agent: str | None,
    live_tools: bool,
    live_tool: Sequence[str],
    allow_side_effects: Sequence[str],
    live_model: str | None,
    ignore: Sequence[str],
    as_json: bool,
) -> None:
    """Copy a session up to --at SEQ into a new session and run on with the current code.

    Recorded model outputs and tool results are used while the run still matches the
    recording; after the first difference the agent's own model and tools take over
    (tools declared with side effects only when allowed). A tool named with --live-tool
    runs for real from the fork point on, so a fix inside a tool can be forked on. A
    session captured from your own code (an entry, a loop, a framework's agent) is re-run
    from its start: up to SEQ it must still write what the recording holds.
    """
    from replay import fork as run_fork

    options = _options(
        agent=agent,
        live_tools=live_tools,
        live_tool=live_tool,
        allow_side_effects=allow_side_effects,
        live_model=live_model or True,
        ignore=ignore,
    )
    with open_existing(db) as journal:
        result = run_fork(journal, session, at_seq, options)
    if as_json:
        print_json(
            {
                "session_id": result.session_id,
                "forked_from": result.forked_from,
                "fork_seq": result.fork_seq,
                "status": result.status,
                "last_seq": result.last_seq,
                "recorded_until": result.recorded_until,
            }
        )
        return
    click.echo(
        f"forked {session}@{at_seq} into {result.session_id}: {result.status}, "
        f"{result.last_seq + 1} events (recording followed until seq {result.recorded_until})"
    )


def _is_file(run: str) -> bool:
    """Whether a run given to replay or diff is a file: it ends in .jsonl or is a file."""
    return run.endswith(".jsonl") or Path(run).is_file()


def _records(journal: Journal | None, source: str) -> tuple[str, list[dict[str, Any]]]:
    """Load a run as flat records, as replay reads them: a JSONL file, or a session."""
    from replay import session_records

    if _is_file(source):
        from journal import import_file

        with Journal.open(":memory:") as scratch:
            return source, session_records(scratch, import_file(scratch, source).session_id)
    assert journal is not None  # diff opens the journal unless both runs are files
    journal.require(source)
    return source, session_records(journal, source)


@click.command(short_help="Compare two runs (sessions or JSONL files), aligned.")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@db_option
@_ignore_option
@json_option
def diff(a: str, b: str, db: str, ignore: Sequence[str], as_json: bool) -> None:
    """Compare two runs, each a session id or a JSONL file, aligned by content.

    Volatile fields (times, durations, latency, ids of the session) are ignored; the
    order tool calls ran in is compared as a replay compares it. Exit 0 when identical,
    1 when they differ, 2 for bad input.
    """
    from replay import diff_records

    needs_journal = not (_is_file(a) and _is_file(b))
    journal = open_existing(db) if needs_journal else None
    try:
        name_a, records_a = _records(journal, a)
        name_b, records_b = _records(journal, b)
    finally:
        if journal is not None:
            journal.close()
    result = diff_records(records_a, records_b, _rules(ignore))
    if as_json:
        from .render import diff_json

        print_json(diff_json(result, records_a, records_b, name_a, name_b))
    else:
        from .render import print_diff

        print_diff(result, records_a, records_b, name_a, name_b)
    if not result.identical:
        sys.exit(EXIT_FINDING)


@click.command(short_help="Freeze a session into a pytest regression fixture.")
@click.argument("session")
@db_option
@click.option(
    "-o",
    "--output",
    type=OutputFile(),
    help="Fixture file to write (default: fixtures/SESSION.jsonl).",
)
@click.option(
    "--redact/--no-redact",
    default=True,
    show_default=True,
    help="Replace secrets and personal data with format-keeping placeholders.",
)
def fixture(session: str, db: str, output: Path | None, redact: bool) -> None:
    """Freeze a session into a regression fixture that pytest replays on every run.

    The pytest plugin (installed with agent-journal) collects every fixture under
    fixtures/ and fails with the first divergence when the current code no longer
    behaves the same; `pytest --journal-update` accepts an intended change. A session
    that halted or failed is recorded as an expected failure: the fixture asserts the
    agent still stops there, by the same rule.
    """
    from replay import write_fixture

    target = output or Path("fixtures") / f"{session}.jsonl"
    with open_existing(db) as journal:
        summary = journal.require(session)
        write_fixture(journal, session, target, redact=redact)
    click.echo(fixture_note(summary, target, redact))
