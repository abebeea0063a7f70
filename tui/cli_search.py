"""The ``search`` command: full-text search across sessions, ranked, with filters.

It catches the journal's search index up first (`journal.search`: derived data, built on
the first search and caught up from where it stopped on each one after), then prints one
line per hit: session, seq, type, time and a snippet around the match; ``--json`` gives
the hits as `journal.SearchHit` objects.
"""

from __future__ import annotations

from typing import get_args

import click

from journal import EVENT_TYPES, SearchFilters, SearchHit, SessionStatus

from .clikit import db_option, json_option, meta_option, open_existing, print_json, time_option
from .reads import search_hits
from .render import console
from .text import event_style, safe_text

__all__ = ["print_hits", "search"]


def print_hits(hits: list[SearchHit]) -> None:
    """Print hits, best first: session, seq, type, time, snippet (one line each)."""
    from rich.text import Text

    out = console()
    if not hits:
        click.echo("no matches", err=True)
        return
    session = max(len(hit.session_id) for hit in hits)
    seq = max(len(str(hit.seq)) for hit in hits)
    for hit in hits:
        line = Text(f"{safe_text(hit.session_id):<{session}} ", style="bold")
        line.append(f"{hit.seq:>{seq}} {hit.ts[:19].replace('T', ' ')} ", style="dim")
        line.append(f"{hit.type:<19} ", style=event_style(hit.type) or None)
        line.append(safe_text(hit.snippet))
        out.print(line, overflow="ellipsis", no_wrap=True)


@click.command(short_help="Find events across sessions by the words in them.")
@click.argument("query")
@db_option
@click.option("--tool", metavar="NAME", help="Only events of this tool (calls, results, failures).")
@click.option(
    "--type",
    "event_type",
    type=click.Choice(sorted(EVENT_TYPES)),
    metavar="TYPE",
    help=f"Only events of this type: {', '.join(sorted(EVENT_TYPES))}.",
)
@click.option(
    "--status",
    type=click.Choice(get_args(SessionStatus)),
    help="Only sessions with this status.",
)
@click.option("--rule", metavar="RULE", help="Only sessions halted by this rule (e.g. repeat).")
@meta_option
@time_option("--since", "Only events at that time or later")
@time_option("--until", "Only events before that time")
@click.option("--session", "session_id", metavar="ID", help="Only this session.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most N hits."
)
@json_option
def search(
    query: str,
    db: str,
    tool: str | None,
    event_type: str | None,
    status: str | None,
    rule: str | None,
    meta: dict[str, str],
    since: str | None,
    until: str | None,
    session_id: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Find events whose text has every word of QUERY, best match first.

    QUERY is words and "quoted phrases", matched case-insensitively as whole words (no
    stemming): tool arguments and results, user inputs, answers, error messages, halt
    reasons, session metadata, and each event's summary. The first search of a journal
    indexes it (a derived table, never exported or verified); later ones index only what
    was appended since.
    """
    filters = SearchFilters(
        tool=tool,
        type=event_type,
        status=status,
        rule=rule,
        meta=meta,
        since=since,
        until=until,
        session_id=session_id,
    )
    with open_existing(db) as journal:
        hits = search_hits(journal, query, filters, limit)
    if as_json:
        print_json([hit.model_dump(mode="json") for hit in hits])
    else:
        print_hits(hits)
