"""The ``tui`` command: open the terminal UI (Textual is imported only here, when it runs)."""

from __future__ import annotations

import sys

import click

from .clikit import EXIT_BAD_INPUT, db_option, fail, open_existing

__all__ = ["has_terminal", "tui"]


def has_terminal() -> bool:
    """True when both stdin and stdout are a terminal (the UI needs one)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _two_sessions(
    ctx: click.Context, param: click.Parameter, value: tuple[str, str] | None
) -> tuple[str, str] | None:
    """``--diff A B`` takes the next two words: neither may be one of the command's options."""
    if value is None:
        return None
    options = {name for p in ctx.command.params for name in (*p.opts, *p.secondary_opts)}
    for word in value:
        if word in options | set(ctx.help_option_names):
            raise click.BadParameter(
                f"takes two sessions (--diff A B), and {word} is an option, not a session"
            )
    return value


@click.command(short_help="Browse, step through and diff sessions in the terminal.")
@click.argument("session", required=False)
@db_option
@click.option(
    "--diff",
    nargs=2,
    metavar="A B",
    callback=_two_sessions,
    help="Open the diff of two sessions (say, an original and its replay).",
)
@click.option("--no-follow", is_flag=True, help="Do not watch the journal for new events.")
def tui(session: str | None, db: str, diff: tuple[str, str] | None, no_follow: bool) -> None:
    """Browse sessions, step through a timeline, and diff a replay, in the terminal.

    Opens the sessions list, or SESSION's timeline, or the diff of two sessions. Keys
    follow less and vim (j/k, g/G, / n N, : to go to a seq, e for the next failure, r to
    replay, ] and [ between differences, ? for all keys, q to go back). A journal that is
    being written shows new events live, on SQLite and on PostgreSQL.
    """
    from .app import JournalApp

    with open_existing(db) as journal:
        app = JournalApp(db=journal, session=session, diff=diff, follow=not no_follow)
        if not has_terminal():
            fail("the terminal UI needs a terminal (scripts: show, state, diff)", EXIT_BAD_INPUT)
        app.run()
