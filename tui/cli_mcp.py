"""The ``mcp`` command: the journal as an MCP server over stdio (`tui.mcp_server`)."""

from __future__ import annotations

from pathlib import Path

import click

from journal import InvalidInputError

from .clikit import db_option, open_existing

__all__ = ["mcp"]


@click.command(short_help="Serve the journal to coding agents over MCP (stdio).")
@db_option
@click.option(
    "--fixtures",
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder make_fixture writes into (created when needed); without it, none.",
)
def mcp(db: str, fixtures: Path | None) -> None:
    """Serve the journal to a coding agent as an MCP server on standard input and output.

    Tools: list_sessions, timeline, state_at, search, diff, replay (recorded model and
    tools, tools with side effects never run, nothing saved) and make_fixture (only into
    --fixtures). Nothing but the journal and that folder is reachable. A client starts
    it: {"command": "agent-journal", "args": ["mcp", "--db", "PATH"]}.
    """
    try:
        from .mcp_server import build_server
    except ImportError as e:
        raise InvalidInputError(
            f"agent-journal mcp needs the mcp package ({e.name} is missing): "
            "pip install 'agent-journal[mcp]'"
        ) from e
    open_existing(db).close()  # a missing journal is one line and exit 2, before serving
    build_server(db, fixtures).run("stdio")
