"""PostgreSQL global positions: how an append takes them, how a follower reads them safely.

Global positions, and why a follower never misses an event (docs/postgres.md has the whole
argument and the alternatives). Positions come from a sequence, so transactions commit out
of position order: a follower that read position 7 while 6 was still in flight would skip
6. So an append takes its transaction id (``pg_current_xact_id()``, stored in ``events.tx``)
and its positions in one short critical section (a session-level advisory lock taken and
released within one statement, before the transaction's first write): among appends,
positions grow with transaction ids, and the positions of an append still in flight lie in
a gap between the visible rows of lower and higher transaction ids. A read takes one
snapshot and returns rows in position order up to the first gap that could belong to a
transaction the snapshot sees in flight (one of ``pg_snapshot_xip`` strictly between the
transaction ids on either side of the gap). A gap whose transaction rolled back, or died
with its client, is passed once it is no longer in flight. Transactions of other programs
hold nothing up unless their ids fall inside such a gap.

Each append sends a NOTIFY after its commit, in a transaction of its own at
``synchronous_commit=off``: a NOTIFY inside the append would serialise every append's commit
(PostgreSQL holds a lock from queueing a notification to the end of the commit).
`journal._pg_tailing` listens (live tailing without polling), and polls briefly while a
notified position waits behind a gap.

Here: the SQL of both sides (`RESERVE`, `ONE_STATEMENT`, `SAFE_AFTER`, `SAFE_HEAD`) and the
thread that sends the NOTIFYs (`Notifier`); `journal._pg_appends` and `journal._pg_tailing`
run them.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from . import _postgres_schema as schema

ROW_COLUMNS = "session_id, seq, ts, type, v, body, hash, summary, pos"
"""The columns of a `journal.records.StoredEvent`, in its order."""

ORIGIN = f"coalesce((SELECT value FROM meta WHERE key = '{schema.POSITIONS_FROM}'), '0')::xid8"
"""The transaction that created the positions: every one that takes positions comes after."""

SAFE_AFTER = f"""
WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s, ?::bigint AS after),
origin AS MATERIALIZED (SELECT {ORIGIN} AS since),
below AS MATERIALIZED (
    SELECT tx FROM events WHERE pos <= (SELECT after FROM snap) ORDER BY pos DESC LIMIT 1),
page AS MATERIALIZED (
    SELECT {ROW_COLUMNS}, tx FROM events
    WHERE pos > (SELECT after FROM snap) ORDER BY pos LIMIT ?),
edges AS (
    SELECT *, coalesce(lag(pos) OVER w, (SELECT after FROM snap)) AS prev_pos,
           CASE WHEN lag(pos) OVER w IS NULL
                THEN coalesce((SELECT tx FROM below), (SELECT since FROM origin))
                ELSE lag(tx) OVER w END AS prev_tx
    FROM page WINDOW w AS (ORDER BY pos)),
held AS (
    SELECT min(pos) AS pos FROM edges, snap
    WHERE pos > prev_pos + 1 AND EXISTS (
        SELECT FROM pg_snapshot_xip(snap.s) AS x
        WHERE x < edges.tx AND x > edges.prev_tx)),
safe AS (
    SELECT * FROM edges WHERE pos < coalesce((SELECT pos FROM held), 9223372036854775807))
"""
"""Rows after position ``after`` up to the first gap an in-flight transaction may hold
(``safe``), in pages of ``limit`` rows (``page``).

The rows on either side of a gap (``prev_tx``, ``tx``; for the first row, the row at or
below ``after``, or when there is none the transaction that created the positions,
``meta.positions_from``) bound the transaction ids that can hold its positions; a gap is
held when the snapshot has a transaction in flight strictly between them. Cost: the page,
plus a scan of the in-flight list per gap in it."""

READ_AFTER = SAFE_AFTER + f"SELECT {ROW_COLUMNS} FROM safe ORDER BY pos"
PEEK = SAFE_AFTER + "SELECT EXISTS (SELECT FROM safe), EXISTS (SELECT FROM page)"

SAFE_HEAD = f"""
WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s)
SELECT coalesce(
    (SELECT min(coalesce(lo.pos, 0))
     FROM snap, pg_snapshot_xip(snap.s) AS x
     CROSS JOIN LATERAL (SELECT pos FROM events WHERE tx > x ORDER BY tx, pos LIMIT 1) AS hi
     LEFT JOIN LATERAL (
         SELECT pos FROM events WHERE tx < x ORDER BY tx DESC, pos DESC LIMIT 1) AS lo ON TRUE
     WHERE hi.pos > coalesce(lo.pos, 0) + 1 AND x > {ORIGIN}),
    (SELECT max(pos) FROM events),
    0)
"""
"""The newest position no in-flight transaction can still write below.

For each transaction in flight after the one that created the positions, the visible rows
with the next lower and higher ids (two probes of the ``(tx, pos)`` index) show whether it
sits in a gap; the head is the last row
below the lowest such gap, or the newest row. Cost: two index probes per transaction the
server has in flight."""

RESERVE = (
    "pg_current_xact_id_if_assigned() IS NULL AS fresh, pg_advisory_lock(?) AS held, "
    "pg_current_xact_id() AS tx, {take} AS last, pg_advisory_unlock(?) AS released, "
    "set_config(?, 'on', true) AS flag"
)
"""Take the transaction id and positions under a lock released in the same statement.

The lock covers the id and the positions only, for microseconds; the advisory xact lock on
the session (for an append) comes first, so waiting for it holds no position. The target
list is evaluated in order. The transaction must not have an id yet (``fresh``)."""
TAKE_ONE = f"nextval('{schema.POSITIONS}')"
TAKE_MANY = f"setval('{schema.POSITIONS}', nextval('{schema.POSITIONS}') + ? - 1)"
LOCK_SESSION = "pg_advisory_xact_lock(hashtextextended(?, 0)) AS locked, "

ONE_STATEMENT = """
WITH r AS MATERIALIZED ({reserve}),
u AS ({update} AND (SELECT last FROM r) IS NOT NULL RETURNING last_seq, head_hash),
i AS (
    INSERT INTO events(pos, session_id, seq, ts, type, v, body, hash, summary)
    SELECT (SELECT last FROM r) - ? + e.o, ?, e.seq, e.ts, e.type, e.v, e.body, e.hash, e.summary
    FROM {rows} WHERE EXISTS (SELECT FROM u)
    RETURNING pos)
SELECT (SELECT last FROM r), (SELECT count(*) FROM i),
    CASE WHEN EXISTS (SELECT FROM u) AND (
        (SELECT count(*) FROM i) <> ?
        OR (SELECT (last_seq, head_hash) FROM u) IS DISTINCT FROM (?::bigint, ?::text COLLATE "C"))
    THEN ('{unplanned} ' || (SELECT count(*) FROM i) || ' of ' || ?::text || ' events written')::int
    END
"""
"""An append on this connection's cached head as one statement, its own transaction.

``r`` (the session lock and the positions) runs before the first write: the guarded UPDATE
``u`` of the projection cannot change its row before evaluating its condition on ``r``,
and the INSERT ``i`` writes only when ``u`` changed the row (otherwise the statement writes
nothing and the append is planned again against the stored head). When ``u`` changed the
row but ``i`` wrote fewer rows than planned, or the row does not hold the planned last seq
and head hash (a foreign trigger or rule), the final cast fails the statement, so nothing
of it is kept (its message starts with `UNPLANNED`). One round trip instead of six; a
failed one leaves a gap in the positions."""
UNPLANNED = "agent-journal: unplanned write:"
"""How the one-statement append's own error starts (`journal.postgres` maps it to
`journal.errors.UnplannedWriteError`)."""
ONE_ROW = (
    "(SELECT 1, ?::bigint, ?, ?, ?::integer, ?, ?, ?) "
    "AS e(o, seq, ts, type, v, body, hash, summary)"
)
ROWS = (  # binary arrays: the text format escapes every quote of every body
    "unnest(%b::bigint[], %b::text[], %b::text[], %b::integer[], %b::text[], %b::text[], "
    "%b::text[]) WITH ORDINALITY AS e(seq, ts, type, v, body, hash, summary, o)"
)


@functools.cache
def one_statement(reserve: str, update: str, one_row: bool) -> str:
    return ONE_STATEMENT.format(
        reserve=reserve, update=update, rows=ONE_ROW if one_row else ROWS, unplanned=UNPLANNED
    )


ONE_STATEMENT_EVENTS = 64
"""Appends of up to this many events on a cached head take `ONE_STATEMENT`; larger ones a
transaction whose rows are loaded with COPY."""
NOTIFY = "SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)"
NOTIFY_INTERVAL = 0.02
"""Seconds between two NOTIFYs of one journal object (``notify_interval``): the appends
committed meanwhile share the next one. Each NOTIFY is a small transaction the server
serialises with all others (docs/postgres.md: a fleet of writers wants a longer one)."""
GAP_POLL = (0.01, 0.25)
"""Polling while a notified position waits behind a gap: first and longest delay (s)."""


class Notifier:
    """Sends the NOTIFY of committed appends from a thread of its own, after their commit.

    `post` only records the newest committed position; the thread sends it, then waits
    ``interval`` seconds before the next, so the appends committed meanwhile share one NOTIFY
    and no append waits for one. A NOTIFY is a wake-up: one that fails is dropped (a
    follower re-reads when its wait times out).
    """

    def __init__(self, pool: ConnectionPool[Any], channel: str, interval: float) -> None:
        self._pool = pool
        self._channel = channel
        self._interval = interval
        self._changed = threading.Condition()
        self._pending: int | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    def post(self, position: int) -> None:
        """Queue the NOTIFY of ``position`` (a newer one replaces it)."""
        with self._changed:
            if self._closed:
                return
            self._pending = max(position, self._pending or 0)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agent-journal-notify", daemon=True
                )
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._pending is None and not self._closed:
                    self._changed.wait()
                position, self._pending = self._pending, None
                if position is None:
                    return
            self._send(position)
            with self._changed:
                self._changed.wait_for(lambda: self._closed, timeout=self._interval)

    def _send(self, position: int) -> None:
        try:
            with self._pool.connection() as conn:  # autocommit: the NOTIFY is a transaction
                conn.execute(NOTIFY, (self._channel, str(position)))
        except (psycopg.Error, PoolTimeout):
            pass

    def close(self) -> None:
        """Send what is queued, then stop the thread."""
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=10)
