"""An append held in flight on PostgreSQL: its positions taken, its commit not yet made.

A foreign transaction locks the session's row in the ``sessions`` projection; the append,
run in a thread, takes its positions and then waits for that row (the projection is written
after the positions are taken, on either path of an append). The test then looks at what
followers see, and lets the append commit (`Held.release`) or kills its server process
(`Held.kill`), as a writer that dies mid-transaction. Leaving its ``with`` block releases it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from journal import Journal, JournalError
from journal.events import EventModel

_BLOCKED = "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"


class Held:
    """``journal.append(session_id, events)`` in a thread, stopped after taking positions.

    ``positions`` are the ones it took (read from the sequence while nothing else appends);
    ``outcome`` holds the append's result (``seq``) or its error once the thread ends.
    """

    def __init__(
        self, url: str, journal: Journal, session_id: str, events: Sequence[EventModel]
    ) -> None:
        self.url = url
        self.outcome: dict[str, Any] = {}
        self._lock = psycopg.connect(url)
        self._lock.execute("SELECT FROM sessions WHERE session_id = %s FOR UPDATE", (session_id,))
        before = self._taken()
        self.thread = threading.Thread(target=self._run, args=(journal, session_id, events))
        self.thread.start()
        self.pid = self._blocked()
        self.positions = list(range(before + 1, self._taken() + 1))
        assert len(self.positions) == len(events), "the held append took no positions"

    def _run(self, journal: Journal, session_id: str, events: Sequence[EventModel]) -> None:
        try:
            self.outcome["seq"] = journal.append(session_id, list(events))
        except JournalError as e:
            self.outcome["error"] = e

    def _taken(self) -> int:
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM event_positions"
            ).fetchone()
        assert row is not None
        return int(row[0])

    def _blocked(self) -> int:
        """The server process of the append, once it waits for the locked row."""
        deadline = time.monotonic() + 30
        with psycopg.connect(self.url, autocommit=True) as conn:
            while True:
                found = conn.execute(_BLOCKED, (self._lock.info.backend_pid,)).fetchall()
                if found:
                    return int(found[0][0])
                assert time.monotonic() < deadline, "the append never waited for the row"
                assert self.thread.is_alive(), f"the append ended: {self.outcome}"
                time.sleep(0.01)

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()  # also when a test failed while holding: nothing stays locked

    def release(self) -> None:
        """Let the append go on (it commits), and wait for it."""
        if not self._lock.closed:
            self._lock.rollback()
            self._lock.close()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()

    def kill(self) -> None:
        """End the append's server process mid-transaction (it rolls back), and wait."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (self.pid,))
        self.release()
