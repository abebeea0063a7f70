"""What every command of the CLI shares: exit codes, the error boundary and common options.

Exit codes scripts can rely on: 0 ok (or identical), 1 a finding (verify found problems,
a replay or diff diverged), 2 bad usage or bad input (one line on stderr, no traceback),
3 an internal error (a bug: one line on stderr; ``AGENT_JOURNAL_DEBUG=1`` shows the trace).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

from journal import Journal, JournalError

__all__ = [
    "DEFAULT_DB",
    "EXIT_BAD_INPUT",
    "EXIT_FINDING",
    "EXIT_INTERNAL",
    "ErrorBoundaryGroup",
    "db_option",
    "db_option_with",
    "fail",
    "json_option",
    "open_existing",
    "print_json",
]

EXIT_FINDING = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
DEFAULT_DB = "./agent-journal.db"

F = TypeVar("F", bound=Callable[..., Any])


class ErrorBoundaryGroup(click.Group):
    """A click group that turns our errors into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; map our errors to one stderr line and an exit code."""
        try:
            return super().invoke(ctx)
        except JournalError as e:
            fail(str(e), EXIT_BAD_INPUT)
        except BrokenPipeError:
            sys.stderr.close()  # the reader went away (| head): not an error
            sys.exit(0)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else ctx.command_path
            fail(f"{e.format_message()} (see {where} --help)", EXIT_BAD_INPUT)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as e:
            if os.environ.get("AGENT_JOURNAL_DEBUG"):
                raise
            fail(
                f"internal error: {type(e).__name__}: {e} (AGENT_JOURNAL_DEBUG=1 shows the trace)",
                EXIT_INTERNAL,
            )


def fail(message: str, code: int) -> None:
    """Print one error line (control characters escaped) and exit with ``code``."""
    from .render import safe_text

    click.echo(f"agent-journal: {safe_text(message)}", err=True)
    sys.exit(code)


def db_option_with(help_text: str) -> Callable[[F], F]:
    """``--db PATH_OR_URL`` (env ``AGENT_JOURNAL_DB``) with its own help text."""
    return click.option(
        "--db",
        "db",
        envvar="AGENT_JOURNAL_DB",
        default=DEFAULT_DB,
        show_default=True,
        metavar="PATH_OR_URL",
        help=help_text,
    )


def db_option(function: F) -> F:
    """Add ``--db PATH_OR_URL`` (env ``AGENT_JOURNAL_DB``) to a command."""
    return db_option_with("Journal: a SQLite file or a postgresql:// URL (env AGENT_JOURNAL_DB).")(
        function
    )


def json_option(function: F) -> F:
    """Add ``--json`` to a listing command."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        function
    )


def open_existing(db: str) -> Journal:
    """Open a journal for reading; a missing journal is an error, never created."""
    return Journal.open(db, create=False)


def print_json(value: Any) -> None:
    """Write a JSON document to stdout, indented, keys sorted."""
    from .render import json_default

    sys.stdout.buffer.write(
        orjson.dumps(value, default=json_default, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        + b"\n"
    )
    sys.stdout.flush()
