"""The app process textual-serve starts per browser connection (``python -m tui.served``).

Not a command of the CLI: `tui.serve` builds this command line. Read-only unless
``--writable`` (`JournalApp` ``read_only``).
"""

from __future__ import annotations

import argparse

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run `JournalApp` over ``--db`` (textual-serve sets the web driver in the environment)."""
    parser = argparse.ArgumentParser(prog="python -m tui.served")
    parser.add_argument("--db", required=True)
    parser.add_argument("--session")
    parser.add_argument("--writable", action="store_true")
    args = parser.parse_args(argv)
    from .app import JournalApp

    JournalApp(db=args.db, session=args.session, read_only=not args.writable).run()


if __name__ == "__main__":
    main()
