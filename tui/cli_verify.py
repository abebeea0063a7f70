"""``verify`` (chains, derived data, guards, an anchor) and ``anchor`` (session heads out).

Exit 0 when the journal is intact, 1 on any finding, 2 on bad input. ``--repair`` first
rebuilds the projections and snapshots that disagree with intact events (nothing else is
ever changed), then checks as without it. ``anchor`` writes the heads `verify --anchor`
checks against (`journal.anchor`). A chain kind that is not the key's (an HMAC journal
rewritten as plain sha256, or the wrong key) is a finding of verify, not an error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from journal import ChainKindError, InvalidInputError, Problem, VerifyReport

if TYPE_CHECKING:
    from journal import Anchor

from .clikit import (
    EXIT_FINDING,
    KEY_ENV,
    KEY_FILE_ENV,
    db_option,
    json_option,
    open_existing,
    print_json,
)

__all__ = ["anchor", "verify"]

key_file_option = click.option(
    "--hmac-key-file",
    "key_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help=f"The journal's HMAC key, read from FILE (env {KEY_FILE_ENV}; or the key itself in "
    f"env {KEY_ENV}).",
)


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
@click.option(
    "--anchor",
    "anchor_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also report every session whose history since this anchor (agent-journal anchor) "
    "was rewritten, cut or deleted, and a chain kind that differs from it.",
)
@key_file_option
@json_option
def verify(
    db: str,
    session_ids: Sequence[str],
    quick: bool,
    allowed: Sequence[str],
    repair: bool,
    anchor_file: str | None,
    key_file: str | None,
    as_json: bool,
) -> None:
    """Check hash chains, derived data and the append-only triggers.

    Each session is read in one consistent snapshot, so a journal being written is checked
    without false findings. Derived data is checked against the events: every summary, the
    sessions projection (each session is refolded; --quick skips that) and the snapshots.
    Triggers and rules on the journal's tables that are not its own are findings.

    Exit 0 when the journal is intact, 1 when problems were found (each names the session
    and seq). Without an anchor it cannot see a chain rewritten end to end together with
    its projection by someone with write access: keep an anchor elsewhere (agent-journal
    anchor) and check with --anchor, or use an HMAC key.
    """
    targets = list(session_ids) or None
    anchored = _read_anchor(anchor_file) if anchor_file else None
    try:
        journal = open_existing(db, key_file)
    except ChainKindError as e:
        problem = Problem(session_id=None, seq=None, kind="chain_kind", message=str(e))
        _print_report(VerifyReport(ok=False, problems=[problem]), None, as_json)
        sys.exit(EXIT_FINDING)
    with journal:
        repaired = journal.repair(targets) if repair else None
        report = journal.verify(targets, quick=quick, allow_triggers=allowed)
        if anchored is not None:
            from journal import check_anchor

            try:
                found = check_anchor(journal, anchored)
            except InvalidInputError as e:  # taken of another journal
                raise InvalidInputError(f"{anchor_file}: {e}") from e
            problems = [*report.problems, *found]
            report = report.model_copy(update={"ok": not problems, "problems": problems})
    _print_report(report, repaired, as_json)
    if not report.ok:
        sys.exit(EXIT_FINDING)


def _read_anchor(path: str) -> Anchor:
    from pydantic import ValidationError

    from journal import Anchor, loads_strict
    from journal.formats import read_input

    try:
        return Anchor.model_validate(loads_strict(read_input(path, "an anchor file")))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "$"
        raise InvalidInputError(
            f"{path}: not an agent-journal anchor: {where}: {first['msg']}"
        ) from e
    except ValueError as e:
        raise InvalidInputError(f"{path}: not an agent-journal anchor: {e}") from e


def _print_report(report: VerifyReport, repaired: list[Problem] | None, as_json: bool) -> None:
    if as_json:
        document = report.model_dump(mode="json")
        if repaired is not None:
            document["repaired"] = [problem.model_dump(mode="json") for problem in repaired]
        print_json(document)
        return
    from .render import print_repaired, print_verify

    if repaired is not None:
        print_repaired(repaired)
    print_verify(report)


@click.command(short_help="Write the head of every session, to check against later.")
@db_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    show_default=True,
    help="File to write (atomically); - for stdout.",
)
@key_file_option
def anchor(db: str, output: str, key_file: str | None) -> None:
    """Write an anchor: every session's last seq and head hash, and the chain kind.

    Keep it where whoever can write the journal cannot (another machine, a ticket, a signed
    commit). `agent-journal verify --anchor FILE` then reports any session whose history
    up to the anchored seq was rewritten, cut or deleted since; events appended after the
    anchor are not covered by it, so take anchors regularly.
    """
    from journal import canonical_bytes, take_anchor
    from journal.formats import write_atomically

    with open_existing(db, key_file) as journal:
        taken = take_anchor(journal)
    body = canonical_bytes(taken.model_dump(mode="json"))
    if output == "-":
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.flush()
        return
    write_atomically([body], output)
    click.echo(f"anchored {len(taken.sessions)} session(s) of {taken.target} in {output}", err=True)
