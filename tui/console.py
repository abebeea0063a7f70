"""The ``agent-journal`` console script: `tui.cli`, loaded where Ctrl-C is one line too.

Loading the CLI (pydantic, click, the journal) takes a few tenths of a second; an interrupt
then would escape every handler as a traceback. This module imports nothing heavy, so it
can catch it.

The journal's own models are built while the CLI loads, with other packages' pydantic
plugins off (``PYDANTIC_DISABLE_PLUGINS``, for that import only): a plugin such as
Logfire's would otherwise be imported and run over every event model at each start,
doubling it. Models built later (your code, in a replay) get the plugins as usual.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]

_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


def main() -> None:
    """Load and run the CLI; an interrupt while it loads is ``interrupted`` and exit 130."""
    given = os.environ.get(_PLUGINS)
    if given is None:
        os.environ[_PLUGINS] = "__all__"
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("agent-journal: interrupted\n")
        sys.exit(130)
    finally:
        if given is None:
            os.environ.pop(_PLUGINS, None)
    run()
