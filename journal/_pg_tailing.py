"""PostgreSQL tailing: rows after a global position, read up to the safe horizon, and the
wait for new ones by LISTEN/NOTIFY.

A follower never reads past a position an append still in flight may take
(`journal._pg_positions`: `SAFE_AFTER`, `SAFE_HEAD`). Each append's NOTIFY follows its
commit (`journal._pg_positions.Notifier`); `PgTailing.wait_for_events` listens on a
connection of its own (`Listener`), and polls briefly while a notified position waits
behind a gap.
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from ._pg_positions import GAP_POLL, PEEK, READ_AFTER, SAFE_HEAD
from ._sql_read import SQLReads
from ._sqltx import SqlTx
from .errors import JournalError
from .records import StoredEvent, stored_row

__all__ = ["Listener", "PgTailing"]


class Listener:
    """The connection one journal object LISTENs on: made on first need, one wait at a time.

    ``connect`` makes a connection that listens on the journal's channel. A wait that fails
    closes it; the next wait makes another.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    @contextmanager
    def listening(self) -> Iterator[psycopg.Connection[Any]]:
        """The listening connection, held for one wait; closed when the wait fails."""
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                yield self._conn
            except psycopg.Error:
                self._drop()
                raise

    def close(self) -> None:
        """Close the listening connection (idempotent)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class PgTailing(SQLReads):
    """`JournalReader`'s tail as PostgreSQL reads it (see the module)."""

    _listener: Listener

    @abstractmethod
    def _translate(self, error: psycopg.Error, action: str) -> JournalError:
        """One line for a server error: where, what, why."""

    def read_after(self, position: int, *, limit: int = 500) -> list[StoredEvent]:
        """Rows after ``position`` that no in-flight append can precede (`SAFE_AFTER`)."""
        rows = self._query(READ_AFTER, (position, limit))
        return [stored_row(row) for row in rows]

    def _rows_after(self, tx: SqlTx, position: int, limit: int) -> list[StoredEvent]:
        """Rows after ``position`` in ``tx``, up to the safe horizon (`SAFE_AFTER`)."""
        return [stored_row(row) for row in tx.rows(READ_AFTER, (position, limit))]

    def head_position(self) -> int:
        """The newest position a follower can start from; see `Journal.head_position`.

        No event still being committed can take a position at or below it (`SAFE_HEAD`).
        """
        return int(self._query(SAFE_HEAD)[0][0])

    def _peek(self, position: int) -> tuple[bool, bool]:
        """Whether an event after ``position`` can be read, and whether one has committed."""
        ready, committed = self._query(PEEK, (position, 1))[0]
        return bool(ready), bool(committed)

    def wait_for_events(self, position: int, timeout: float) -> bool:
        """Wait for an event after ``position`` with LISTEN/NOTIFY; see `Journal`.

        An event may have committed and still wait behind one in flight, whose rollback
        (or a killed client) notifies nobody: while one does, or a NOTIFY names a later
        position that cannot be read yet, the wait polls, from 10 ms up to 250 ms apart.
        """
        deadline = time.monotonic() + timeout
        try:
            with self._listener.listening() as listener:
                ready, committed = self._peek(position)
                delay = GAP_POLL[0] if committed else None  # None: sleep until notified
                while not ready and (remaining := deadline - time.monotonic()) > 0:
                    wait = remaining if delay is None else min(remaining, delay)
                    for note in listener.notifies(timeout=wait, stop_after=1):
                        if note.payload.isdigit() and int(note.payload) > position:
                            delay = delay or GAP_POLL[0]
                    if delay is not None:
                        ready, committed = self._peek(position)
                        delay = min(delay * 2, GAP_POLL[1])
                return ready or self._peek(position)[0]
        except psycopg.Error as e:  # the listening connection is closed by then
            raise self._translate(e, "listen") from e
