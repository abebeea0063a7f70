"""The ``agent-journal`` command line (its exit codes: `tui.clikit.EXIT_CODES`)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import get_args

import click
import orjson

from journal import JournalError, SessionStatus

from .cli_capture import drain
from .cli_collect import collect
from .cli_mcp import mcp
from .cli_proxy import proxy
from .cli_replay import demo, diff, fixture, fork, replay, state
from .cli_search import search
from .cli_share import serve, share
from .cli_tui import tui
from .cli_verify import anchor, verify
from .clikit import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    ErrorBoundaryGroup,
    counted,
    db_option,
    fail,
    journal_named,
    json_option,
    meta_option,
    open_existing,
    open_for_writing,
    print_json,
    time_option,
)
from .columns import help_text
from .reads import require_seq, sessions_json

__all__ = ["main"]

STATUSES: tuple[str, ...] = get_args(SessionStatus)
"""The session statuses the fold derives (the choices of every ``--status``)."""

_EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code}  {what}" for code, what in EXIT_CODES)


_OVERVIEW = """Record, replay, diff and browse the sessions of tool-calling AI agents.

A flight recorder: every fact of an agent session (the model's output, each tool call
and its result, the clock) is a typed event in an append-only, hash-chained journal, a
SQLite file or PostgreSQL for a fleet.

\b
  record   Capture (your own loop), the Recorder or the agent loop write
           sessions; drain moves a spool in; demo runs examples
  look     sessions, show, state; search finds events by their words across
           sessions; tui steps through a timeline, live
  replay   replay re-runs a session on the recorded model and tools (no API
           key, no side effects); fork runs on from a seq
  compare  diff aligns two runs and shows the first divergence
  freeze   fixture turns a session into a pytest regression test
  keep     verify checks the chains; export, import and copy move sessions
           (JSONL, OpenAI transcripts, OTLP); erase removes one for good
"""
"""The top-level help. Not the docstring: click keeps a paragraph's lines only after a
backspace character (``\\b``), which a raw docstring would spell as two characters."""


@click.group(
    cls=ErrorBoundaryGroup,
    help=_OVERVIEW,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG + "\n\nEvery command that reads a journal takes --db (env AGENT_JOURNAL_DB).",
)
@click.version_option(package_name="agent-journal")
def cli() -> None:
    """Record, replay, diff and browse the sessions of tool-calling AI agents (`_OVERVIEW`)."""


@cli.command(
    short_help="List sessions, newest first, and how each went.",
    epilog="\b\nColumns (the narrower the terminal, the fewer; --json has every field):\n"
    + "\n".join(f"  {line}" for line in help_text().splitlines()),
)
@db_option
@click.option("--status", type=click.Choice(STATUSES), help="Only sessions with this status.")
@click.option("--agent", help="Only sessions of this agent reference (module:factory).")
@click.option("--rule", metavar="RULE", help="Only sessions halted by this rule (e.g. repeat).")
@meta_option
@time_option("--since", "Only sessions started then or later")
@time_option("--until", "Only sessions started before then")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many sessions.")
@json_option
def sessions(
    db: str,
    status: str | None,
    agent: str | None,
    rule: str | None,
    meta: dict[str, str],
    since: str | None,
    until: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List sessions, newest first: status, failures, success rate, cost, outcome and more.

    The table fits the terminal: status, fail, ok%, cost and started always show; the
    other columns give way in turn, agent, lineage and metadata first. --json adds each
    session's metadata and halt_reason to the projection's fields.
    """
    with open_existing(db) as journal:
        found = journal.sessions(
            status=status,
            agent=agent,
            since=since,
            until=until,
            limit=limit,
            rule=rule,
            meta=meta,
        )
        if as_json:
            print_json(sessions_json(journal, found))
            return
        ids = [s.session_id for s in found]
        details = journal.session_details(ids)
        last = journal.last_summaries(ids)
    from .columns import listed
    from .render import print_sessions

    print_sessions(listed(found, last, details))


@cli.command(short_help="Show one session's timeline, one line per event.")
@click.argument("session")
@db_option
@click.option("--from", "start", type=click.IntRange(min=0), default=0, help="First seq to show.")
@click.option("--to", "stop", type=click.IntRange(min=0), help="Last seq to show (inclusive).")
@json_option
def show(session: str, db: str, start: int, stop: int | None, as_json: bool) -> None:
    """Show one session's timeline: one line per event (seq, time, type, summary)."""
    if stop is not None and stop < start:
        raise click.BadParameter(f"{stop} is before --from {start}", param_hint="'--to'")
    with open_existing(db) as journal:
        summary = journal.require(session)
        require_seq(session, "--from", start, summary.last_seq)
        rows = journal.stored_events(session, start=start, stop=None if stop is None else stop + 1)
        if as_json:
            out = sys.stdout.buffer
            out.write(
                b'{"session":' + orjson.dumps(summary.model_dump(mode="json")) + b',"events":['
            )
            for index, row in enumerate(rows):
                out.write((b"," if index else b"") + row.line())
            out.write(b"]}\n")
            out.flush()
            return
        from .render import print_timeline

        print_timeline(summary, rows)


@cli.command(short_help="Print the JSON Schema of one journal record.")
def schema() -> None:
    """Print the JSON Schema of one journal record (any event type with its envelope).

    Agents in other languages can validate what they write against it.
    """
    from journal import event_json_schema

    print_json(event_json_schema())


@cli.command(short_help="Export a session as JSONL, or sessions as OTLP traces.")
@click.argument("sessions", nargs=-1, required=True, metavar="SESSION...")
@db_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    show_default=True,
    help="File to write; - for stdout. Written atomically.",
)
@click.option(
    "--redact",
    is_flag=True,
    help="Replace secrets and personal data with format-keeping placeholders.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "otlp", "otel", "atif"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one session, this project's format; otlp (or otel): OpenTelemetry GenAI "
    "traces as OTLP/JSON, one trace per session; atif: ATIF v1.8 trajectories (one: a "
    "JSON document, several: JSON Lines).",
)
@click.option(
    "--content",
    is_flag=True,
    help="otlp: include message content (prompts, answers, tool arguments and results).",
)
def export(
    sessions: Sequence[str], db: str, output: str, redact: bool, fmt: str, content: bool
) -> None:
    """Export a session as a JSONL file (header line, then one canonical event per line).

    With --format otlp, export one or more sessions as OpenTelemetry traces (OTLP/JSON,
    GenAI semantic conventions: invoke_agent, chat and execute_tool spans).
    """
    if fmt != "jsonl":
        if redact:
            raise click.UsageError("--redact applies to --format jsonl")
        from .cli_formats import export_atif, export_otlp

        if fmt == "atif":
            if content:
                raise click.UsageError("--content applies to --format otlp")
            export_atif(sessions, db, output)
            return
        export_otlp(sessions, db, output, content)
        return
    if len(sessions) != 1 or content:
        raise click.UsageError("--format jsonl exports exactly one session, without --content")
    session = sessions[0]
    from journal.formats import Redactor, export_lines, write_atomically

    with open_existing(db) as journal:
        journal.require(session)
        lines = export_lines(journal, session, redactor=Redactor() if redact else None)
        if output == "-":
            for line in lines:
                sys.stdout.buffer.write(line + b"\n")
            sys.stdout.flush()
            return
        count = write_atomically(lines, output) - 1
    click.echo(f"exported {session}: {count} events to {output}")


@cli.command("import", short_help="Import sessions from JSONL or OpenAI transcripts.")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "openai", "otlp", "atif"]),
    default="jsonl",
    show_default=True,
    help="Input format: jsonl (this project's), openai (chat transcripts: a message "
    "array, an object with messages and metadata, an array of those, or JSONL of them), "
    "otlp (OpenTelemetry traces, JSON or protobuf: GenAI and OpenInference spans), or "
    "atif (ATIF v1.7 and v1.8 trajectories: a JSON document or JSON Lines of them).",
)
@click.option(
    "--error-prefix",
    metavar="TEXT",
    help="openai: a tool result whose content starts with TEXT (e.g. 'Error:') is a failure.",
)
@json_option
def import_(
    files: Sequence[Path], db: str, fmt: str, error_prefix: str | None, as_json: bool
) -> None:
    """Import sessions from files, each all or nothing.

    Importing a session that is already there with the same content does nothing;
    different content is a conflict (exit 2) and the journal is left as it was; a
    session erased from this journal is skipped, and named. With --format openai every
    file is read first (malformed input: exit 2, nothing written) and a report says what
    could not be mapped (--json: as JSON on stdout).
    """
    if fmt in ("openai", "otlp", "atif"):
        from .cli_formats import import_openai_files

        if fmt != "openai" and error_prefix is not None:
            raise click.UsageError("--error-prefix applies to --format openai")
        import_openai_files(files, db, error_prefix, as_json, fmt)
        return
    if error_prefix is not None or as_json:
        raise click.UsageError("--error-prefix and --json apply to --format openai, otlp or atif")
    from journal import import_file

    failed = 0
    with open_for_writing(db) as journal, _rare_collections():
        for path in files:
            try:
                result = import_file(journal, path, whole=True)
            except JournalError as e:
                from .text import safe_text

                click.echo(f"agent-journal: {safe_text(str(e))}", err=True)
                failed += 1
                continue
            if result.erased:
                click.echo(f"skipped {result.session_id}: erased from this journal ({path})")
                continue
            what = f"{result.new_events} events" if result.new_events else "already present"
            click.echo(f"imported {result.session_id}: {what} ({path})")
        if failed:
            sys.exit(EXIT_BAD_INPUT)


@contextmanager
def _rare_collections() -> Iterator[None]:
    """Run the cyclic garbage collector rarely for a while, as it was after.

    An import makes several objects per event and keeps a batch of them alive, so at the
    default thresholds the collector ran every few events, and through every object of
    the startup (the event models' schemas) at each older-generation pass: ~15% of an
    import's CPU for nothing, as an import's objects form no cycles. The startup's objects
    are frozen out of the collector's passes and the youngest generation collected every
    100,000 allocations instead of 700.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(100_000, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@cli.command(short_help="Create a journal, or upgrade its schema.")
@db_option
def init(db: str) -> None:
    """Create a journal, or upgrade an older one's schema, and say which.

    Works on both stores: a SQLite file or a postgresql:// URL (the tables go into the first
    schema of the URL's search_path). Safe to run again: an up-to-date journal is left alone.
    """
    with open_for_writing(db) as journal:
        click.echo(journal.schema_setup.describe(journal.target))


@cli.command(short_help="Copy sessions between journals (SQLite, PostgreSQL).")
@click.argument("session_ids", nargs=-1, metavar="[SESSION]...")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="PATH_OR_URL",
    callback=journal_named,
    help="Journal to copy from.",
)
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="PATH_OR_URL",
    callback=journal_named,
    help="Journal to copy into.",
)
@time_option("--since", "Only sessions started then or later")
@click.option("--status", type=click.Choice(STATUSES), help="Only sessions with this status.")
def copy(
    session_ids: Sequence[str],
    source: str,
    destination: str,
    since: str | None,
    status: str | None,
) -> None:
    """Copy sessions between two journals (SQLite file <-> postgresql:// URL, either way).

    Every record's hash is checked against its chain on the way in; each session is one
    transaction. Running it again copies only what is new. A session that exists in the
    destination with different content is reported (exit 2) and left as it was; one
    erased from the destination is not brought back.
    """
    from journal.formats import copy_sessions, select_sessions

    with open_existing(source) as src, open_for_writing(destination) as dst:
        chosen = select_sessions(src, session_ids, since=since, status=status)
        total = sum(summary.events for summary in chosen)
        if sys.stderr.isatty() and total:
            with click.progressbar(length=total, label="copying", file=sys.stderr) as bar:
                result = copy_sessions(src, dst, chosen, on_event=bar.update)
        else:
            result = copy_sessions(src, dst, chosen)
        where = f"from {src.target} to {dst.target}"
        from .text import safe_text

        for error in result.errors:
            click.echo(f"agent-journal: {safe_text(error)}", err=True)
        click.echo(
            f"copied {counted(result.sessions, 'session')} {where}: "
            f"{counted(result.new_events, 'new event')}, "
            f"{counted(result.unchanged, 'session')} already up to date"
            + (f", {len(result.erased)} skipped (erased there)" if result.erased else "")
            + (f", {len(result.errors)} failed" if result.errors else "")
        )
        if result.errors:
            sys.exit(EXIT_BAD_INPUT)  # inside: a new, still empty destination is removed


@cli.command(short_help="Remove a whole session for good, keeping an audit record.")
@click.argument("session")
@db_option
@click.option("--reason", required=True, help="Why it is erased; kept in the audit record.")
@click.option("--by", "erased_by", metavar="WHO", help="Who asked for it (default: the OS user).")
@click.option("--yes", is_flag=True, help="Erase without asking for confirmation.")
def erase(session: str, db: str, reason: str, erased_by: str | None, yes: bool) -> None:
    """Remove a whole session for good, leaving an audit record (who, when, why, head hash).

    The one sanctioned way around append-only (retention, a user's right to erasure); the
    audit record itself can never be altered or removed. Asks first unless --yes is given.
    """
    with open_existing(db) as journal:
        if not yes:
            if not sys.stdin.isatty():
                fail("erasing is permanent: pass --yes to confirm", EXIT_BAD_INPUT)
            try:
                sure = click.confirm(f"erase session {session} from {journal.target} for good?")
            except click.Abort:  # Ctrl-C at the question: as everywhere else, not exit 1
                raise KeyboardInterrupt from None
            if not sure:
                fail(f"session {session} not erased", EXIT_BAD_INPUT)
        erasure = journal.erase(session, reason=reason, erased_by=erased_by)
        target = journal.target
    click.echo(
        f"erased {session}: {erasure.events} events (head hash {erasure.head_hash[:12]}), "
        f"audit record kept in {target}"
    )


for _command in (demo, state, replay, fork, diff, fixture, drain, search, proxy, share, serve):
    cli.add_command(_command)
cli.add_command(collect)
cli.add_command(mcp)
cli.add_command(tui)
cli.add_command(verify)
cli.add_command(anchor)


def main() -> None:
    """Run the CLI (the ``agent-journal`` console script)."""
    cli(prog_name="agent-journal")
