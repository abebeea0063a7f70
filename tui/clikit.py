"""What every command of the CLI shares: exit codes, the error boundary and common options.

The exit codes scripts can rely on are `EXIT_CODES` (the top-level ``--help`` prints them).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from journal import InvalidInputError, Journal, JournalError

__all__ = [
    "DEFAULT_DB",
    "EXIT_BAD_INPUT",
    "EXIT_CODES",
    "EXIT_FINDING",
    "EXIT_INTERNAL",
    "ErrorBoundaryGroup",
    "OutputFile",
    "counted",
    "db_option",
    "db_option_with",
    "fail",
    "journal_named",
    "json_option",
    "meta_option",
    "moment",
    "open_existing",
    "parse_moment",
    "print_json",
    "time_option",
]

EXIT_FINDING = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_CODES = (
    (0, "ok, or identical"),
    (EXIT_FINDING, "a finding: verify found problems, a replay or a diff diverged"),
    (EXIT_BAD_INPUT, "bad usage or bad input: one line on stderr, no traceback"),
    (EXIT_INTERNAL, "an internal error (a bug); AGENT_JOURNAL_DEBUG=1 shows the trace"),
)
"""The exit codes scripts can rely on, with what each means."""


class OutputFile(click.Path):
    """A file to write (``-o``), as a `pathlib.Path`: not a folder, nor a name ending in a slash.

    ``-o fixtures/`` where no such folder is would otherwise write a file called ``fixtures``
    (`pathlib.Path` drops the slash).
    """

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, refused when it ends with a separator."""
        if isinstance(value, str) and value.endswith(("/", os.sep)):
            self.fail(f"{value!r} names a folder (it ends with a slash): give a file", param, ctx)
        return super().convert(value, param, ctx)


DEFAULT_DB = "./agent-journal.db"

F = TypeVar("F", bound=Callable[..., Any])


class ErrorBoundaryGroup(click.Group):
    """A click group that turns our errors into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; map our errors to one stderr line and an exit code."""
        stdout = sys.stdout
        sys.stdout = _ReaderMayLeave(stdout)
        try:
            return super().invoke(ctx)
        except JournalError as e:
            fail(str(e), EXIT_BAD_INPUT)
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
        finally:
            sys.stdout = stdout


class _ReaderMayLeave:
    """Standard output whose reader may go away (``| head``) without ending the command.

    Once a write or flush finds the pipe closed, the rest of the output goes to the null
    device and the command runs to its end, so its exit code (a replay's verdict: 0
    identical, 1 diverged) still reaches a script that reads it with ``set -o pipefail``.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    @property
    def buffer(self) -> _ReaderMayLeave:
        """The binary stream beneath (``export`` writes bytes), dropping writes alike."""
        return _ReaderMayLeave(self._stream.buffer)

    def write(self, data: str | bytes) -> int:
        """Write ``data``, or drop it once the reader has gone."""
        try:
            return int(self._stream.write(data))
        except BrokenPipeError:
            self._reader_gone()
            return len(data)

    def flush(self) -> None:
        """Flush, or drop what is buffered once the reader has gone."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)


_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[Zz]|[+-]\d{2}:\d{2}))?"
)
_DURATION = re.compile(r"(?:\d+[smhdw])+")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def moment(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Read a point in time (an option's callback) with `parse_moment`; bad ones are bad usage."""
    if value is None:
        return None
    try:
        return parse_moment(value)
    except InvalidInputError as e:
        raise click.BadParameter(str(e)) from None


def parse_moment(value: str) -> str:
    """Read a point in time: RFC 3339, or a duration ago.

    ``2026-11-29T23:00:00Z``, ``2026-11-29T23:00:00+01:00`` and ``2026-11-29`` (its
    midnight UTC) name a moment; ``90m``, ``2d`` or ``1h30m`` (units s, m, h, d, w) name
    that long before now. The value is the canonical UTC timestamp the journal compares
    ``started`` with.

    Raises:
        InvalidInputError: anything else, in one line saying what is accepted.
    """
    from journal import format_ts

    text = value.strip()
    if _DURATION.fullmatch(text):
        pairs = re.findall(r"(\d+)(\w)", text)
        seconds = sum(int(amount[:20]) * _UNITS[unit] for amount, unit in pairs)
        try:
            return format_ts(datetime.now(UTC) - timedelta(seconds=seconds))
        except (OverflowError, ValueError):
            raise InvalidInputError(f"{text!r}: a duration that reaches before year 1") from None
    if _RFC3339.fullmatch(text):
        iso = text.upper().replace(" ", "T").replace("Z", "+00:00")
        try:
            return format_ts(datetime.fromisoformat(iso if "T" in iso else f"{iso}T00:00+00:00"))
        except ValueError as e:
            raise InvalidInputError(f"{text!r}: {e}") from None
    if _RFC3339.fullmatch(f"{text}Z"):
        raise InvalidInputError(f"{text!r} has no time zone: add Z (UTC) or an offset (+01:00)")
    raise InvalidInputError(
        f"{text!r} is not a time: give RFC 3339 (2026-11-29T23:00:00Z, 2026-11-29) "
        "or a duration ago (90m, 2d, 1h30m)"
    )


def time_option(name: str, help_text: str) -> Callable[[F], F]:
    """``--since``/``--until TIME``: RFC 3339 or a duration ago (see `moment`)."""
    return click.option(
        name,
        metavar="TIME",
        callback=moment,
        help=f"{help_text}: RFC 3339 (2026-11-29T23:00:00Z, 2026-11-29) or a duration ago "
        "(90m, 2d).",
    )


def _pairs(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` words as a dict (an option's callback); a key given twice is bad usage."""
    found: dict[str, str] = {}
    for word in value:
        key, sep, item = word.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{word!r}: give KEY=VALUE (e.g. customer=acme)")
        if key in found and found[key] != item:
            raise click.BadParameter(f"{key!r} is given twice, with different values")
        found[key] = item
    return found


def meta_option(function: F) -> F:
    """``--meta KEY=VALUE`` (repeatable): sessions started with that metadata (all given)."""
    return click.option(
        "--meta",
        "meta",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_pairs,
        help="Only sessions whose metadata has KEY with VALUE (a string, or a number or "
        "boolean written as JSON: 3, true). Repeatable: all must hold.",
    )(function)


def counted(number: int, noun: str) -> str:
    """``number`` and ``noun``, plural but for one: "1 session", "0 sessions"."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def fail(message: str, code: int) -> None:
    """Print one error line (control characters escaped) and exit with ``code``."""
    from .text import safe_text

    click.echo(f"agent-journal: {safe_text(message)}", err=True)
    sys.exit(code)


def journal_named(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--db`` as given; an empty one (``--db "$UNSET"``) is bad usage (an option's callback)."""
    if not value.strip():
        raise click.BadParameter("empty: give a SQLite file path or a postgresql:// URL")
    return value


def db_option_with(help_text: str) -> Callable[[F], F]:
    """``--db PATH_OR_URL`` (env ``AGENT_JOURNAL_DB``) with its own help text."""
    return click.option(
        "--db",
        "db",
        envvar="AGENT_JOURNAL_DB",
        default=DEFAULT_DB,
        show_default=True,
        metavar="PATH_OR_URL",
        callback=journal_named,
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


KEY_ENV = "AGENT_JOURNAL_HMAC_KEY"
KEY_FILE_ENV = "AGENT_JOURNAL_HMAC_KEY_FILE"


def hmac_key(key_file: str | None = None) -> bytes | None:
    """Return the journal's HMAC key, or None when none is set.

    From ``key_file``, else the file named by ``AGENT_JOURNAL_HMAC_KEY_FILE``, else
    ``AGENT_JOURNAL_HMAC_KEY`` (its UTF-8 bytes). A key file's trailing newline is not part
    of the key.
    """
    path = key_file or os.environ.get(KEY_FILE_ENV)
    if path:
        try:
            key = Path(path).read_bytes().rstrip(b"\r\n")
        except OSError as e:
            raise InvalidInputError(f"{path}: cannot read the HMAC key file: {e.strerror}") from e
        if not key:
            raise InvalidInputError(f"{path}: the HMAC key file is empty")
        return key
    text = os.environ.get(KEY_ENV)
    return text.encode("utf-8") if text else None


def open_existing(db: str, key_file: str | None = None) -> Journal:
    """Open a journal for reading; a missing journal is an error, never created.

    The HMAC key comes from `hmac_key` (``key_file`` or the environment).
    """
    return Journal.open(db, create=False, hmac_key=hmac_key(key_file))


def print_json(value: Any) -> None:
    """Write a JSON document to stdout, indented, keys sorted."""
    from .render import json_default

    sys.stdout.buffer.write(
        orjson.dumps(value, default=json_default, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        + b"\n"
    )
    sys.stdout.flush()


@contextmanager
def open_for_writing(db: str) -> Iterator[Journal]:
    """Open (or create) a journal for a command that writes into it.

    When the command fails (an exception, or a non-zero exit from inside the block) and the
    journal is a SQLite file this call created that holds no session, the file is removed
    with its ``-wal`` and ``-shm``: a failed command leaves no empty journal behind.
    """
    fresh = not db.startswith(("postgresql://", "postgres://")) and db != ":memory:"
    fresh = fresh and not Path(db).exists()
    journal = Journal.open(db, hmac_key=hmac_key())
    try:
        yield journal
    except BaseException as e:
        failed = not isinstance(e, SystemExit) or e.code not in (0, None)
        if fresh and failed and not journal.sessions(limit=1):
            journal.close()
            for suffix in ("", "-wal", "-shm"):
                Path(db + suffix).unlink(missing_ok=True)
        raise
    finally:
        journal.close()
