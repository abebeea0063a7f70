"""CLI commands that show sessions to someone outside the terminal: share and serve."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from journal import Journal

from .clikit import OutputFile, db_option, open_existing

__all__ = ["serve", "share"]


@click.command(short_help="Write a session as one self-contained HTML page.")
@click.argument("session", metavar="SESSION|FILE.jsonl")
@db_option
@click.option(
    "-o",
    "--output",
    required=True,
    type=OutputFile(),
    help="The HTML file to write (atomically).",
)
@click.option(
    "--diff",
    "other",
    metavar="OTHER",
    help="Also show the diff with this run (a session id or a JSONL file), aligned.",
)
@click.option(
    "--replay",
    "run_replay",
    is_flag=True,
    help="Replay the session with the current code (recorded model and tools, nothing "
    "live) and show the verdict and the aligned diff.",
)
@click.option(
    "--agent",
    metavar="MODULE:FACTORY",
    help="--replay: run this agent instead of the recorded one.",
)
@click.option(
    "--ignore",
    multiple=True,
    metavar="TYPE.PATH",
    help="Also leave this field out of the diff (repeatable), as for diff and replay.",
)
@click.option(
    "--redact/--no-redact",
    default=True,
    show_default=True,
    help="Replace secrets and personal data with placeholders, as fixtures do.",
)
def share(
    session: str,
    db: str,
    output: Path,
    other: str | None,
    run_replay: bool,
    agent: str | None,
    ignore: Sequence[str],
    redact: bool,
) -> None:
    """Write SESSION (an id or a JSONL file) as one HTML file anyone can open in a browser.

    The page needs no network and loads nothing (no CDN, fonts or scripts from anywhere):
    the timeline, the state before and after each event, failures and the halt reason,
    usage and cost; with --diff or --replay the aligned diff and its first divergence.
    Keys: j/k, g/G, e/E failures, ]/[ differences, / search, ? help; rows take clicks.
    Redacted by default, as fixtures are (--no-redact keeps the session as recorded).
    """
    from replay import DEFAULT_RULES, ReplayOptions

    from .share import gather, write_page
    from .share.runs import is_file

    if agent is not None and not run_replay:
        raise click.UsageError("--agent applies to --replay")
    if other is not None and run_replay:
        raise click.UsageError("--diff and --replay exclude each other")
    rules = DEFAULT_RULES.ignoring(ignore)
    options = ReplayOptions(agent=agent, rules=rules) if run_replay else None
    needs_journal = not (is_file(session) and (other is None or is_file(other)))
    journal: Journal | None = open_existing(db) if needs_journal else None
    try:
        runs = gather(journal, session, other=other, replay=options, redact=redact, rules=rules)
    finally:
        if journal is not None:
            journal.close()
    try:
        size = write_page(runs, output)
        what = f"{runs.view.require(runs.session_id).events} events"
        if runs.other_id is not None:
            what += f", diffed with {runs.other_id}"
        if runs.replay is not None:
            what += f", replay {runs.replay.verdict}"
    finally:
        runs.close()
    redacted = "redacted" if redact else "NOT redacted"
    click.echo(f"wrote {output}: {session}, {what}, {redacted}, {size:,} bytes")


@click.command(short_help="Serve the terminal UI to a browser (textual-serve).")
@db_option
@click.option(
    "--listen",
    default="127.0.0.1:8000",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen: loopback by default; another address lets others connect.",
)
@click.option("--session", metavar="SESSION", help="Open this session's timeline first.")
@click.option(
    "--writable",
    is_flag=True,
    help="Let the app write to the journal (r saves its replays); read-only by default.",
)
@click.option(
    "--public-url",
    metavar="URL",
    help="The address browsers reach the server at, when not http://HOST:PORT (a proxy).",
)
def serve(
    db: str, listen: str, session: str | None, writable: bool, public_url: str | None
) -> None:
    """Serve the terminal UI in a browser: each browser tab runs its own app.

    Read-only unless --writable: r replays and shows the verdict but saves nothing. The
    page needs no network: its font is served from the package, nothing from elsewhere.
    """
    from .serve import parse_listen, serve_app

    host, port = parse_listen(listen)
    with open_existing(db) as journal:  # a missing journal or session: one line, exit 2
        if session is not None:
            journal.require(session)
        target = journal.target
    serve_app(
        target, host=host, port=port, session=session, writable=writable, public_url=public_url
    )
