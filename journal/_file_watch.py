"""A cheap per-commit answer to "may the journal file have been deleted or replaced?".

`SQLiteJournal` refuses to commit into a file that was deleted or replaced while open (SQLite
would go on writing to the unlinked inode). A ``stat()`` of the path before every commit
answers exactly but costs a few µs per append; on Linux an inotify watch on the file's
inode answers "nothing happened to it" with one ``poll(0)`` (under 1 µs). Unlinking the
file, renaming it, or renaming another file over it changes its link count or moves it, and
the kernel queues that event before the call that did it returns, so a commit that follows
sees it. Once anything was seen (a ``chmod`` too), or where inotify is not available, the
answer is always "check" and the caller stats the path as before.

An inotify instance is a per-user resource (128 by default, shared with every other
program of the user), so a process holds at most `MAX_WATCHES` at once; a journal opened
beyond them stats its path instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys
import threading
import weakref

__all__ = ["MAX_WATCHES", "FileWatch"]

_IN_ATTRIB = 0x004
"""The link count (an unlink, or another file renamed over this one) or metadata changed."""
_IN_MOVE_SELF = 0x800
_IN_DELETE_SELF = 0x400


def _libc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _libc()
MAX_WATCHES = 4
"""Inotify instances one process holds at once (one per open SQLite journal file)."""
_WATCHES = threading.BoundedSemaphore(MAX_WATCHES)
"""One slot per inotify instance this process holds."""


def _drop(fd: int) -> None:
    os.close(fd)
    _WATCHES.release()


class FileWatch:
    """Watches one file's inode; `quiet` is True while nothing happened to it."""

    def __init__(self, path: str) -> None:
        self._poll: select.poll | None = None
        if _LIBC is None or not _WATCHES.acquire(blocking=False):
            return
        fd = int(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:  # e.g. the user's limit of inotify instances is reached: stat instead
            _WATCHES.release()
            return
        mask = _IN_ATTRIB | _IN_MOVE_SELF | _IN_DELETE_SELF
        if _LIBC.inotify_add_watch(fd, os.fsencode(path), mask) < 0:
            _drop(fd)
            return
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._close = weakref.finalize(self, _drop, fd)

    def quiet(self) -> bool:
        """True when nothing happened to the file since the watch began (False: check it).

        Once False, always False: the watch is dropped and every later call says "check".
        """
        if self._poll is None:
            return False
        if not self._poll.poll(0):
            return True
        self.close()
        return False

    def close(self) -> None:
        """Drop the watch (idempotent); `quiet` says False from now on."""
        if self._poll is not None:
            self._poll = None
            self._close()
