"""``agent-journal drain``: move the sessions fail-open capture spooled into the journal."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .clikit import (
    EXIT_FINDING,
    counted,
    db_option,
    json_option,
    open_for_writing,
    print_json,
)

__all__ = ["drain"]


@click.command(short_help="Move spooled captured sessions into the journal.")
@click.argument("spool", required=False, type=click.Path(dir_okay=False, path_type=Path))
@db_option
@json_option
def drain(spool: Path | None, db: str, as_json: bool) -> None:
    """Move the sessions in SPOOL into the journal, each whole or not at all.

    Captured code that could not write to its journal (busy, disk full, PostgreSQL down)
    wrote to a spool file instead (default: beside the journal, DB.spool). Running drain
    twice writes nothing twice. A session the journal refuses (a conflict) stays in the
    spool, named on stderr, and the exit code is 1. With nothing spooled (no spool file, or
    one drained before) the journal is not opened, nor created.
    """
    from capture import DrainReport, Spool, spool_path_for
    from capture import drain as drain_spool

    path = spool if spool is not None else spool_path_for(db)
    if path is None:
        raise click.UsageError("an in-memory journal has no spool: name the spool file")
    spooled = Spool.at(path)
    if spooled.empty():  # a spool drained before is gone: nothing to do, not an error
        report = DrainReport(0, 0, {})
    else:
        with open_for_writing(db) as journal:
            report = drain_spool(journal, spooled)
    if as_json:
        print_json(
            {"spool": str(path), "sessions": report.sessions, "events": report.events}
            | {"left": report.left}
        )
    else:
        click.echo(
            f"drained {counted(report.sessions, 'session')} "
            f"({counted(report.events, 'new event')}) from {path}; "
            f"{len(report.left)} left in the spool"
        )
        for session_id, why in report.left.items():
            click.echo(f"left {session_id}: {why}", err=True)
    if report.left:
        sys.exit(EXIT_FINDING)
