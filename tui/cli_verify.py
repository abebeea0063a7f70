"""The ``verify`` command: check a journal's chains, derived data and guards; repair derived data.

Exit 0 when the journal is intact, 1 on any finding, 2 on bad input. ``--repair`` first
rebuilds the projections and snapshots that disagree with intact events (nothing else is
ever changed), then checks as without it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from .clikit import EXIT_FINDING, db_option, json_option, open_existing, print_json

__all__ = ["verify"]


@click.command(short_help="Check hash chains, derived data and the triggers.")
@db_option
@click.option(
    "--session",
    "session_ids",
    multiple=True,
    metavar="ID",
    help="Check only this session (repeatable).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Skip the refold: the projection's columns and state and the snapshots are not "
    "checked against the events (chains, last seq and head hash, summaries and triggers are).",
)
@click.option(
    "--allow-trigger",
    "allowed",
    multiple=True,
    metavar="NAME",
    help="A trigger or rule of your own on the journal's tables: not a finding (repeatable).",
)
@click.option(
    "--repair",
    is_flag=True,
    help="First rebuild, from the events, every projection row and snapshot that disagrees "
    "with them (only where the session's chain is intact); then check.",
)
@json_option
def verify(
    db: str,
    session_ids: Sequence[str],
    quick: bool,
    allowed: Sequence[str],
    repair: bool,
    as_json: bool,
) -> None:
    """Check hash chains, derived data and the append-only triggers.

    Each session is read in one consistent snapshot, so a journal being written is checked
    without false findings. Derived data is checked against the events: every summary, the
    sessions projection (each session is refolded; --quick skips that) and the snapshots.
    Triggers and rules on the journal's tables that are not its own are findings.

    Exit 0 when the journal is intact, 1 when problems were found (each names the session
    and seq). It cannot see a chain rewritten end to end together with its projection by
    someone with write access; keep head hashes elsewhere or use an HMAC key for that.
    """
    targets = list(session_ids) or None
    with open_existing(db) as journal:
        repaired = journal.repair(targets) if repair else []
        report = journal.verify(targets, quick=quick, allow_triggers=allowed)
    if as_json:
        document = report.model_dump(mode="json")
        if repair:
            document["repaired"] = [problem.model_dump(mode="json") for problem in repaired]
        print_json(document)
    else:
        from .render import print_repaired, print_verify

        if repair:
            print_repaired(repaired)
        print_verify(report)
    if not report.ok:
        sys.exit(EXIT_FINDING)
