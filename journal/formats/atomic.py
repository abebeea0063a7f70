"""Files written whole or not at all: every command that writes a file goes through here.

`write_atomically` writes into a temporary file beside the target (same folder, so the
rename cannot cross filesystems), flushes it to disk, and renames it into place. Any
``OSError`` on the way (a full disk, ``EFBIG`` past a size limit, a folder that refuses new
files, an I/O error) becomes one `InvalidInputError` naming the target and the reason, and
the temporary file is removed: the target is either the old file, untouched, or the whole
new one; never a partial file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..errors import InvalidInputError

__all__ = ["write_atomically"]

_CHUNK = 1 << 20
"""Bytes gathered before each ``write(2)``: lines are small, a system call per line is not."""


def write_atomically(lines: Iterable[bytes], path: str | Path) -> int:
    """Write lines (each without its newline) to ``path`` atomically; return how many.

    The file gets the mode a plain ``open(path, "w")`` would give (0o666 less the umask).
    An error raised by ``lines`` itself (a damaged event met while exporting) passes
    through unchanged; an ``OSError`` of the writing is `InvalidInputError`
    (``PATH: cannot write: REASON``). Either way nothing is left behind.
    """
    if str(path).endswith(("/", os.sep)):  # Path() would drop the slash and write a file
        raise InvalidInputError(f"{path}: names a folder (it ends with a slash): give a file")
    target = Path(path)
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as e:  # a missing or unwritable directory: bad usage, not a crash
        raise _cannot_write(target, e) from e
    count = 0
    try:
        try:
            buffer = bytearray()
            for line in lines:
                buffer += line
                buffer += b"\n"
                count += 1
                if len(buffer) >= _CHUNK:
                    _write_all(handle, buffer, target)
            _write_all(handle, buffer, target)
            _finish(handle, temp_name, target)
        finally:
            with contextlib.suppress(OSError):  # after fsync the bytes are on disk already
                os.close(handle)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return count


def _write_all(handle: int, buffer: bytearray, target: Path) -> None:
    """Write all of ``buffer`` to ``handle`` (a short write is resumed) and empty it."""
    view = memoryview(buffer)
    try:
        while view:
            view = view[os.write(handle, view) :]
    except OSError as e:
        raise _cannot_write(target, e) from e
    finally:
        view.release()
    del buffer[:]


def _finish(handle: int, temp_name: str, target: Path) -> None:
    """Give the file its mode, put it on disk (a late ``ENOSPC`` shows here) and rename it."""
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(handle, 0o666 & ~umask)
        os.fsync(handle)
        os.replace(temp_name, target)
    except OSError as e:
        raise _cannot_write(target, e) from e


def _cannot_write(target: Path, error: OSError) -> InvalidInputError:
    return InvalidInputError(f"{target}: cannot write: {error.strerror or error}")
