"""What ``import --format openai|otlp|atif`` and ``export --format otlp|atif`` do behind the CLI.

Kept apart from `tui.cli` so the command definitions stay short; the formats themselves
live in `journal.formats` (``openai_import``, ``otlp_import``, ``otlp``, ``atif_import``,
``atif_export``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from journal.formats import ImportReport

from .clikit import EXIT_BAD_INPUT, counted, open_existing, open_for_writing, print_json

__all__ = ["export_atif", "export_otlp", "import_openai_files"]


def _echo(text: str, *, err: bool = False) -> None:
    """A report line on stdout, as ``copy`` and ``fixture`` report (``err``: on stderr)."""
    from .text import safe_text

    click.echo(safe_text(text), err=err)


def _print_findings(title: str, findings: dict[str, object]) -> None:
    kinds = findings["kinds"]
    assert isinstance(kinds, dict)
    _echo(f"{title}: {findings['total']}")
    for kind, found in kinds.items():
        _echo(f"  {kind}: {found['count']}")
        for example in found["examples"]:
            _echo(f"    {example}")


def import_openai_files(
    files: Sequence[Path], db: str, error_prefix: str | None, as_json: bool, fmt: str = "openai"
) -> None:
    """Import OpenAI-style transcripts (OTLP traces, ATIF trajectories); report what was not mapped.

    Every file is read and mapped before the journal is opened, so malformed input (exit
    2, one line naming file:line) writes nothing, not even a new journal file.
    """
    from journal.formats import convert_atif, convert_files, convert_otlp, import_converted

    converted = (
        convert_otlp(files)
        if fmt == "otlp"
        else convert_atif(files)
        if fmt == "atif"
        else convert_files(files, error_prefix=error_prefix)
    )
    with open_for_writing(db) as journal:
        report = import_converted(journal, converted)
        _print_report(report, as_json, fmt)
        if report.errors:
            sys.exit(EXIT_BAD_INPUT)  # inside: a new journal left empty is removed


def _print_report(report: ImportReport, as_json: bool, fmt: str) -> None:
    document = report.as_json()
    document["format"] = fmt
    if as_json:
        print_json(document)
    for item in report.files:
        # (the sessions this journal erased are named below, not counted as present)
        new = item["new_sessions"]
        sessions = counted(item["sessions"] - len(item["erased"]), "session")
        what = (
            f"{sessions} ({new} new, {counted(item['new_events'], 'event')})"
            if new
            else sessions
            if item["error"]
            else f"{sessions}, already present"
        )
        _echo(  # on stderr when stdout carries the JSON
            f"{'not imported' if item['error'] else 'imported'} {item['path']}: {what}, "
            f"{item['messages']} messages, {item['tool_calls']} tool calls, "
            f"{item['failed_calls']} failed",
            err=as_json,
        )
        for session_id in item["erased"]:
            _echo(f"skipped {session_id}: erased from this journal ({item['path']})", err=as_json)
    if not as_json:
        if report.unmapped.total:
            _print_findings("could not map", document["unmapped"])
        else:
            _echo("every message was mapped")
        if report.notes.total:
            _print_findings("mapped by a fallback (notes)", document["notes"])
    for error in report.errors:
        _echo(f"agent-journal: {error}", err=True)


def export_otlp(sessions: Sequence[str], db: str, output: str, content: bool) -> None:
    """Write sessions as OTLP/JSON (one trace each) to ``output`` (``-``: stdout)."""
    from journal.formats import otlp_document, otlp_json, write_atomically

    with open_existing(db) as journal:
        document = otlp_document(journal, sessions, content=content)
    body = otlp_json(document)
    if output == "-":
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.flush()
        return
    write_atomically([body], output)
    spans = sum(len(scope["spans"]) for scope in document["resourceSpans"][0]["scopeSpans"])
    _echo(f"exported {len(sessions)} session(s): {spans} spans to {output} (OTLP/JSON)")


def export_atif(sessions: Sequence[str], db: str, output: str) -> None:
    """Write sessions as ATIF trajectories to ``output`` (``-``: stdout)."""
    from journal.formats import atif_json, atif_trajectory, write_atomically

    with open_existing(db) as journal:
        documents = [atif_trajectory(journal, session) for session in sessions]
    body = atif_json(documents)
    if output == "-":
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.flush()
        return
    write_atomically([body], output)
    steps = sum(len(document["steps"]) for document in documents)
    _echo(f"exported {len(sessions)} session(s): {steps} steps to {output} (ATIF v1.8)")
