"""The spool: a local append-only file where captured events wait when the journal is down.

Fail-open capture (`capture.output`) writes a session's events here once the
journal could not take one of them (busy past a short bound, a full disk, an unreachable
PostgreSQL); `drain` moves them into the journal later.

Format: one line per event, the event's flat record in canonical JSON (the envelope
``session_id``, ``seq``, ``ts``, ``type``, ``v`` beside the event's fields; no ``hash``: the
journal computes it when the session is drained), the same records a JSONL export holds.

Invariants:

* Each `Spool.append` is one ``write`` of whole lines to a file opened with ``O_APPEND``,
  under an exclusive ``flock``: lines of concurrent writers (threads or processes) never
  interleave. Nothing is fsynced: a spooled line survives the process crashing, not the
  machine losing power (as a journal opened with durability ``normal``).
* `drain` takes the file away whole (renamed under the same lock, so no writer appends to
  it after it was read; a writer that held it open reopens the path), imports each session
  in one transaction (`Journal.import_records`: all of a session or none of it, with the
  part the journal took before the fallback read back from the journal as its prefix), and
  appends the lines of any session it could not import to the spool again. Draining twice
  writes nothing twice: a session already in the journal is a no-op.

Costs: an append is an ``open``, a ``flock``, two ``stat``s, one ``write`` and a ``close``
(see ``bench/capture_bench.py``); a drain reads the spool once and makes one import per
session.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from journal import (
    GENESIS_HASH,
    AgentEvent,
    InvalidInputError,
    Journal,
    JournalError,
    encode,
)

__all__ = [
    "LOG_INTERVAL",
    "DrainReport",
    "Spool",
    "SpoolCounts",
    "drain",
    "spool_line",
    "spool_path_for",
]

LOG_INTERVAL = 10.0
"""Seconds between two log lines about sessions going to the same spool."""
_DRAINING = ".draining-"
_POSTGRES = ("postgresql://", "postgres://")


def spool_path_for(target: str | Path) -> Path | None:
    """The default spool of a journal (None for an in-memory one: nowhere to spool).

    Beside a SQLite file (``<file>.spool``); ``agent-journal.spool`` in the working
    directory for PostgreSQL.
    """
    text = str(target)
    if text == ":memory:":
        return None
    if text.startswith(_POSTGRES):
        return Path.cwd() / "agent-journal.spool"
    return Path(f"{text}.spool")


def spool_line(session_id: str, seq: int, ts: datetime | str, event: AgentEvent) -> bytes:
    """An event's spool line (its flat record, canonical, no hash), without the newline."""
    return encode(session_id, seq, ts, event, GENESIS_HASH, _no_hash).body.encode()


def _no_hash(previous: str, body: bytes) -> str:
    return ""


@dataclass
class SpoolCounts:
    """What this process spooled to one spool: sessions, events, bytes; and events lost."""

    sessions: int = 0
    events: int = 0
    bytes: int = 0
    lost: int = 0
    """Events neither the journal nor the spool could take (the spool's disk failed too)."""


@dataclass
class Spool:
    """An append-only spool file (see the module docstring); `Spool.at` shares one per path."""

    path: Path
    counts: SpoolCounts = field(default_factory=SpoolCounts)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _logged: float | None = field(default=None, repr=False)

    def time_to_log(self) -> bool:
        """Whether a fallback to this spool is logged now (once per `LOG_INTERVAL` seconds)."""
        with self._lock:
            now = time.monotonic()
            if self._logged is not None and now - self._logged < LOG_INTERVAL:
                return False
            self._logged = now
            return True

    @classmethod
    def at(cls, path: str | Path) -> Spool:
        """The spool at ``path``, one object per path in a process (so counts add up).

        The folder is resolved, the file's own name is not: a spool that is a symbolic
        link stays one, and is refused (`own_file`), never followed.
        """
        given = Path(path)
        resolved = given.parent.resolve() / given.name
        with _REGISTRY_LOCK:
            spool = _REGISTRY.get(resolved)
            if spool is None:
                spool = _REGISTRY[resolved] = cls(resolved)
            return spool

    def append(self, lines: Sequence[bytes], *, new_session: bool = False) -> None:
        """Append whole lines (each without its newline) in one write; count them.

        Raises:
            OSError: the spool's directory or disk failed.
        """
        data = b"".join(line + b"\n" for line in lines)
        self._write(data)
        with self._lock:
            self.counts.sessions += int(new_session)
            self.counts.events += len(lines)
            self.counts.bytes += len(data)

    def lost(self, events: int) -> None:
        """Count events that could be written nowhere."""
        with self._lock:
            self.counts.lost += events

    def _write(self, data: bytes) -> None:
        while True:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not self._is_current(fd):
                    continue  # a drain took this file away: write to the new one
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                return
            finally:
                os.close(fd)

    def _is_current(self, fd: int) -> bool:
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def take(self) -> list[Path]:
        """Move the spool aside for a drain; return every file waiting to be drained.

        Files left by a drain that stopped half-way are returned too (draining is
        idempotent, so reading them again is harmless).
        """
        own_file(self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            pass
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if self._is_current(fd):
                    os.rename(self.path, f"{self.path}{_DRAINING}{uuid.uuid4().hex[:12]}")
            finally:
                os.close(fd)
        return [own_file(path) for path in self._left_by_drains()]

    def _left_by_drains(self) -> list[Path]:
        return sorted(self.path.parent.glob(f"{self.path.name}{_DRAINING}*"))

    def empty(self) -> bool:
        """Whether nothing waits to be drained.

        No spool file (or an empty one) and no file a drain left.
        """
        if own_file(self.path).exists() and self.path.stat().st_size:
            return False
        return not [own_file(path) for path in self._left_by_drains()]

    def pending(self) -> dict[str, int]:
        """Events waiting in the spool (and in files a drain left), by session."""
        counts: dict[str, int] = defaultdict(int)
        for path in [self.path, *self._left_by_drains()]:
            for _, record in _records(path):
                counts[str(record.get("session_id"))] += 1
        return dict(counts)


def own_file(path: Path) -> Path:
    """``path``, unless it is something a spool never is: a symbolic link, a folder, a device.

    A missing file is fine (nothing spooled). Checked with ``lstat`` (and the files opened
    with ``O_NOFOLLOW``), so a link planted in the spool's place makes drain refuse, not
    rename, read or delete what it points at.

    Raises:
        InvalidInputError: naming the path and what it is.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(mode):
        what = "a symbolic link"
    elif not stat.S_ISREG(mode):
        what = "not a regular file"
    else:
        return path
    raise InvalidInputError(
        f"{path}: {what}, not a spool file: a spool is never followed out of its folder"
    )


_REGISTRY: dict[Path, Spool] = {}
_REGISTRY_LOCK = threading.Lock()


def _records(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """The records of a spool file, each with its place (``file:line``).

    A last line without its newline (a writer killed mid-write) is skipped: it was never
    whole, so no session counted on it.
    """
    from journal.formats import parse_line  # import's line parser, only once a drain runs

    try:
        fd = os.open(own_file(path), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    lines = data.split(b"\n")
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        at = f"{path}:{number}"
        yield at, parse_line(line, at)  # import's strict parser: a duplicate key is refused


@dataclass(frozen=True)
class DrainReport:
    """What a drain did: sessions and events moved, sessions left in the spool and why."""

    sessions: int
    events: int
    left: dict[str, str]
    """Session id -> why it stays in the spool (the journal's one-line error)."""


def drain(journal: Journal, spool: Spool) -> DrainReport:
    """Move the spooled sessions into ``journal``, each all or nothing; see the module.

    Raises:
        InvalidInputError: a spool line is not a JSON object, or not one import would read
            (a duplicate key, NaN, an integer past 64 bits: `journal.formats.parse_line`);
            nothing is moved.
    """
    files = spool.take()
    by_session: dict[str, dict[int, tuple[str, dict[str, Any]]]] = defaultdict(dict)
    lines: dict[str, list[bytes]] = defaultdict(list)
    for path in files:
        for at, record in _records(path):
            session_id, seq = str(record.get("session_id")), record.get("seq")
            if not isinstance(seq, int) or seq in by_session[session_id]:
                continue
            by_session[session_id][seq] = (at, record)
            lines[session_id].append(orjson.dumps(record))
    moved = events = 0
    left: dict[str, str] = {}
    for session_id, spooled in by_session.items():
        try:
            events += _import(journal, session_id, spooled)
            moved += 1
        except JournalError as e:
            left[session_id] = str(e)
    if left:
        spool.append([line for session_id in left for line in lines[session_id]])
    for path in files:
        path.unlink(missing_ok=True)
    return DrainReport(moved, events, left)


def _import(
    journal: Journal, session_id: str, spooled: dict[int, tuple[str, dict[str, Any]]]
) -> int:
    """Import one spooled session after the part of it the journal holds already."""
    first = min(spooled)
    prefix = [
        (f"{journal.target}:{session_id}:{row.seq}", row.record())
        for row in journal.stored_events(session_id, stop=first)
    ]
    records = [*prefix, *(spooled[seq] for seq in sorted(spooled))]
    return journal.import_records(session_id, records)
