"""``agent-journal proxy``: record an agent's model traffic through a proxy, or replay it.

The server is `capture.proxy.ProxyServer`; the replay half `replay.proxy.ProxyReplay`.
This module reads the options, runs the server until SIGINT or SIGTERM, and prints the
verdicts of a replay as ``agent-journal replay`` does.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import click

from .clikit import EXIT_FINDING, db_option, json_option, open_existing, print_json

__all__ = ["proxy"]

DEFAULT_OPENAI = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC = "https://api.anthropic.com"


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise click.BadParameter(
            f"{value!r}: expected HOST:PORT (127.0.0.1:8765)", param_hint="--listen"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def _patterns(specs: Sequence[str]) -> dict[str, str]:
    found = {}
    for spec in specs:
        name, _, pattern = spec.partition("=")
        if not name or not pattern:
            raise click.BadParameter(
                f"{spec!r}: expected NAME=REGEX", param_hint="--redact-pattern"
            )
        found[name] = pattern
    return found


def _wait_for_a_signal() -> None:
    """Block until SIGINT or SIGTERM (Ctrl-C, a service manager's stop)."""
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.2):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@click.command(short_help="A recording proxy for agents in any language, or a replaying one.")
@click.argument("sessions", nargs=-1, metavar="[SESSION ...]")
@click.option(
    "--upstream",
    metavar="URL",
    default=DEFAULT_OPENAI,
    show_default=True,
    help="Where OpenAI-compatible calls go (a base URL as OPENAI_BASE_URL takes).",
)
@click.option(
    "--anthropic-upstream",
    metavar="URL",
    default=DEFAULT_ANTHROPIC,
    show_default=True,
    help="Where Anthropic calls (/v1/messages) go (as ANTHROPIC_BASE_URL takes).",
)
@click.option(
    "--listen", default="127.0.0.1:8765", show_default=True, help="HOST:PORT to listen on."
)
@db_option
@click.option("--replay", is_flag=True, help="Replay SESSIONs (none: every proxy session).")
@click.option(
    "--save/--no-save", default=True, show_default=True, help="Keep each replay (replay_of)."
)
@click.option("--redact", is_flag=True, help="Redact secrets in what is journaled.")
@click.option(
    "--redact-pattern", multiple=True, metavar="NAME=REGEX", help="Redact this too (repeatable)."
)
@click.option(
    "--sample",
    type=click.FloatRange(0, 1),
    help="Tail sampling: keep failed and halted sessions and this share of the rest.",
)
@click.option(
    "--spool",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where sessions go when the journal cannot take them (default: DB.spool).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds a stop waits for the calls under way.",
)
@click.option(
    "--idle",
    type=click.FloatRange(min=0, min_open=True),
    default=3600.0,
    show_default=True,
    metavar="SECONDS",
    help="Close a conversation no request continued for this long (its session ends).",
)
@json_option
def proxy(
    sessions: Sequence[str],
    upstream: str,
    anthropic_upstream: str,
    listen: str,
    db: str,
    replay: bool,
    save: bool,
    redact: bool,
    redact_pattern: Sequence[str],
    sample: float | None,
    spool: Path | None,
    grace: float,
    idle: float,
    as_json: bool,
) -> None:
    """Journal the model calls of agents in any language, or replay them with a verdict.

    Point the agent at the proxy (OPENAI_BASE_URL=http://HOST:PORT/v1,
    ANTHROPIC_BASE_URL=http://HOST:PORT). Each conversation is a session, named by the
    X-Agent-Journal-Session header or found by continuity. Credentials are forwarded,
    never journaled. Runs until SIGINT or SIGTERM, then stops cleanly.

    With --replay nothing is sent upstream: each request is answered from its recorded
    session, and one that differs gets a 422 naming the session, the seq and the
    fields. On exit the verdicts are printed as replay prints them (exit 0 all identical,
    1 a divergence or a named session the agent never reached, 2 bad input).
    """
    address = _listen(listen)
    if sessions and not replay:
        raise click.UsageError("SESSION names a session to replay: add --replay")
    if replay:
        return _replay(sessions, db, address, save=save, grace=grace, idle=idle, as_json=as_json)
    from capture import Destination, Sampling
    from capture.proxy import ProxyServer, Recording
    from journal.formats import Redactor

    redactor = Redactor(patterns=_patterns(redact_pattern)) if redact or redact_pattern else None
    destination = Destination(
        db,
        spool=spool,
        redactor=redactor,
        sampling=None if sample is None else Sampling(share=sample),
    )
    try:
        server = ProxyServer(
            Recording(destination),
            {"openai": upstream, "anthropic": anthropic_upstream},
            listen=address,
            grace=grace,
            idle=idle,
        )
    except (OSError, ValueError) as error:
        raise click.UsageError(f"cannot listen on {listen}: {error}") from None
    _serve(server, "recording")
    return None


def _serve(server: Any, what: str) -> None:
    click.echo(
        f"agent-journal proxy {what} on {server.url} (OPENAI_BASE_URL={server.url}/v1, "
        f"ANTHROPIC_BASE_URL={server.url}); Ctrl-C stops it",
        err=True,
    )
    server.start()
    try:
        _wait_for_a_signal()
    finally:
        server.stop()


def _replay(
    sessions: Sequence[str],
    db: str,
    address: tuple[str, int],
    *,
    save: bool,
    grace: float,
    idle: float,
    as_json: bool,
) -> None:
    from capture.proxy import ProxyServer
    from replay.proxy import ProxyReplay, verdict_line

    with open_existing(db) as journal:
        replay = ProxyReplay(journal, sessions, save=save)
        try:
            server = ProxyServer(replay, listen=address, grace=grace, idle=idle)
        except OSError as error:
            replay.finish()
            raise click.UsageError(f"cannot listen on {address[0]}:{address[1]}: {error}") from None
        try:
            _serve(server, f"replaying {len(sessions) or 'every'} session(s)")
        finally:
            verdicts = replay.finish()
    if as_json:
        print_json([verdict.as_json() for verdict in verdicts])
    else:
        from .render import print_replay

        for verdict in verdicts:
            if verdict.result is not None:
                print_replay(verdict.result)
            else:
                click.echo(verdict_line(verdict))
        if not verdicts:
            click.echo("no session was replayed: no request of the agent reached the proxy")
    if not verdicts or not all(v.identical for v in verdicts):
        sys.exit(EXIT_FINDING)
