"""Who holds a SQLite journal's write lock, where the system says (Linux: /proc/locks).

SQLite takes POSIX advisory locks: in WAL mode a writer holds a write lock on byte 120 of
the ``-shm`` file (``WAL_WRITE_LOCK``); in rollback mode on the database file's RESERVED
byte (``0x40000001``) or PENDING byte (``0x40000000``). /proc/locks lists each lock with
the pid that holds it and the file's device and inode. Elsewhere, or when the lock is an
open-file-description lock (pid -1), the holder is not known and nothing is said.
"""

from __future__ import annotations

import os
from pathlib import Path

_WAL_WRITE = 120
_ROLLBACK_WRITE = (0x40000000, 0x40000001)


def lock_holders(path: str, proc_locks: str = "/proc/locks") -> list[int]:
    """The pids holding ``path``'s write lock, as far as the system tells (else none)."""
    wanted: dict[tuple[int, int, int], tuple[int, ...]] = {}
    for name, offsets in ((path + "-shm", (_WAL_WRITE,)), (path, _ROLLBACK_WRITE)):
        try:
            stat = os.stat(name)
        except OSError:
            continue
        key = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
        wanted[key] = offsets
    try:
        lines = Path(proc_locks).read_text().splitlines()
    except OSError:
        return []
    pids: list[int] = []
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        try:
            kind, mode, pid, file, start = (
                fields[1],
                fields[3],
                int(fields[4]),
                fields[5],
                fields[6],
            )
            major, minor, inode = file.split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            offset = int(start)
        except (IndexError, ValueError):
            continue
        if kind == "POSIX" and mode == "WRITE" and pid > 0 and offset in wanted.get(key, ()):
            pids.append(pid)
    return sorted(set(pids))


def describe_holders(path: str) -> str:
    """``; held by pid N (name)`` for each known holder, or nothing."""
    described = []
    for pid in lock_holders(path):
        if pid == os.getpid():
            described.append(f"pid {pid} (this process, another connection)")
            continue
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            name = ""
        described.append(f"pid {pid} ({name})" if name else f"pid {pid}")
    return f"; held by {', '.join(described)}" if described else ""
