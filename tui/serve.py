"""``agent-journal serve``: the terminal UI in a browser, through textual-serve.

textual-serve runs one app process per browser connection (``python -m tui.served``) and
streams its screen over a websocket to xterm.js. Two things differ from textual-serve's
defaults: the page template is our own copy (``tui/templates/app_index.html``) whose font
comes from textual-serve's static folder instead of Google Fonts, so the page needs no
network; and the app is read-only unless ``--writable`` (`tui.served`).
"""

from __future__ import annotations

import shlex
import sys
from importlib import resources
from pathlib import Path

import click

__all__ = ["parse_listen", "serve_app", "served_command"]


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port; a bad one is a usage error."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{listen!r} is not HOST:PORT (say 127.0.0.1:8000)", param_hint="'--listen'"
        )
    return host, int(port)


def served_command(db: str, *, session: str | None, writable: bool) -> str:
    """The shell command textual-serve runs per connection: this Python, `tui.served`."""
    target = db if "://" in db or db == ":memory:" else str(Path(db).resolve())
    words = [sys.executable, "-m", "tui.served", "--db", target]
    if session is not None:
        words += ["--session", session]
    if writable:
        words.append("--writable")
    return shlex.join(words)


def serve_app(
    db: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    session: str | None = None,
    writable: bool = False,
    public_url: str | None = None,
) -> None:
    """Serve the app over ``db`` on ``host:port`` until interrupted."""
    from textual_serve.server import Server

    templates = resources.files("tui").joinpath("templates")
    server = Server(
        served_command(db, session=session, writable=writable),
        host=host,
        port=port,
        title="agent-journal" + ("" if writable else " (read-only)"),
        public_url=public_url or f"http://{host if ':' not in host else f'[{host}]'}:{port}",
        templates_path=str(templates),
    )
    server.serve()
