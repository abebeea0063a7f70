"""Reading a SQLite journal where SQLite may not create files: a read-only mount or folder.

A journal is in WAL mode, and SQLite reads a WAL database through two files beside it,
``NAME-wal`` and ``NAME-shm``, which it creates on first use. Where it cannot (a read-only
mount, a folder without write permission, ``chattr +i``) even a reader fails with "unable
to open database file". Then:

* no ``NAME-wal``, or an empty one (the journal was closed cleanly: every commit is in the
  main file): open it ``mode=ro&immutable=1``. Nothing can write a WAL journal there (no
  writer can create the WAL either), so reading the file as it is is exact; every write
  fails with "the journal is read-only (WHY)".
* a ``NAME-wal`` that holds commits: they are readable only through ``NAME-shm``; SQLite
  reads an existing one read-only, so this case fails only when it is missing. Reading
  the main file alone would silently drop those commits, so it is refused, naming the fix.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .errors import StoreError

__all__ = ["cannot_create_beside", "read_only_target"]


def cannot_create_beside(error: sqlite3.DatabaseError, path: str) -> bool:
    """Whether ``error``, met opening the existing file ``path``, is SQLite unable to create
    the WAL's files beside it (as opposed to a damaged or missing file)."""
    return "unable to open database file" in str(error) and Path(path).is_file()


def read_only_target(path: str, error: sqlite3.DatabaseError) -> tuple[str, str]:
    """The URI that reads ``path`` as it is, and why it is read-only; or `StoreError`.

    Raised when ``NAME-wal`` holds commits that cannot be read without ``NAME-shm``.
    """
    name = Path(path).name
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(
            f"{path}: cannot open: {error} (its folder is read-only and {name}-wal holds "
            f"commits that SQLite reads only through {name}-shm, which it cannot create: open "
            f"the journal once where its folder is writable, or copy {name} with {name}-wal "
            "to a writable folder)"
        )
    uri = f"{Path(path).absolute().as_uri()}?mode=ro&immutable=1"
    return uri, f"SQLite cannot create {name}-wal and {name}-shm beside it; opened read-only"
