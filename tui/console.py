"""The ``agent-journal`` console script: `tui.cli`, loaded where Ctrl-C is one line too.

Loading the CLI (pydantic, click, the journal) takes a few tenths of a second; an interrupt
then would escape every handler as a traceback. This module imports nothing heavy, so it
can catch it.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Load and run the CLI; an interrupt while it loads is ``interrupted`` and exit 130."""
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("agent-journal: interrupted\n")
        sys.exit(130)
    run()
