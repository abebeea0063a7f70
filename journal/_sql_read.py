"""Reads over SQL: a session's events and rows in pages, the global tail, the listings.

A session streams in pages of `JournalBase.PAGE_SIZE` rows (memory flat in its length);
`SQLReads.stored_events` refuses a session whose seqs do not run densely to its
projection's last seq with an error naming the missing seq, never a shorter session.
Listings come from the ``sessions`` projection and the rows' ``type`` and ``summary``
columns; the details of a listing (the metadata, the halt reason) from at most two
payloads per session, one query per `_IN_CHUNK` sessions. Rows written by someone else
may hold anything: a listing shows what it can.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from pydantic import ValidationError

from ._search_index import session_clauses
from ._sqlstore import SQLStore
from .errors import SessionNotFoundError, StoreError
from .fold import SessionState
from .projection import PROJECTION_COLUMNS, SessionDetails, SessionSummary
from .records import RecordedEvent, StoredEvent, as_text, decode_body
from .store import JournalReader

__all__ = ["SQLReads"]

_BODY_COLUMNS = "body, seq, hash, pos"
"""What `decode_body` takes (``seq`` second, as `SQLStore._row_pages` needs)."""
_IN_CHUNK = 500
"""Ids per ``IN (...)`` list: far below SQLite's and PostgreSQL's parameter limits."""


class SQLReads(SQLStore, JournalReader):
    """`JournalReader` over SQL."""

    def events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Stream validated events in pages; see `Journal.events` (decoded from the bodies)."""
        for page in self._row_pages(self._query, session_id, start, stop, _BODY_COLUMNS):
            for body, seq, hash_, pos in page:
                yield decode_body(session_id, seq, body, hash_, pos)

    def stored_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[StoredEvent]:
        """Stream stored rows in pages of `PAGE_SIZE`; see `Journal.stored_events`.

        The seqs must run densely from ``start`` to the projection's last seq (or ``stop``):
        a row missing, or one whose seq a foreign writer damaged so that no range query
        finds it, is a `StoreError` naming the seq, never a silently shorter session.
        """
        found = self._query("SELECT last_seq FROM sessions WHERE session_id = ?", (session_id,))
        last = found[0][0] if found and type(found[0][0]) is int else None
        end = last if stop is None or last is None else min(last, stop - 1)
        expected = start
        for row in self._pages(self._query, session_id, start, stop):
            if row.seq != expected:
                raise self._gap(session_id, expected)
            expected += 1
            yield row
        if end is not None and expected <= end:
            raise self._gap(session_id, expected)

    def _gap(self, session_id: str, seq: int) -> StoreError:
        return StoreError(
            f"{self.target}: session {session_id}: seq {seq} is missing or its row is damaged "
            "(run agent-journal verify); the journal was altered outside agent-journal"
        )

    def read_after(self, position: int, *, limit: int = 500) -> list[StoredEvent]:
        """Rows appended after a global position; see `Journal.read_after`."""
        with self._reading() as tx:
            return self._rows_after(tx, position, limit)

    def head_position(self) -> int:
        """The newest global position; see `Journal.head_position`."""
        return int(self._query("SELECT coalesce(max(pos), 0) FROM events")[0][0])

    def sessions(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        rule: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> list[SessionSummary]:
        """List summaries, newest first; see `Journal.sessions`."""
        clauses, params = session_clauses(
            "sessions.session_id", self.SEARCH.META_MATCH, status=None, rule=rule, meta=meta or {}
        )
        for clause, value in (
            (self.STATUS_CLAUSES.get(status or "", "status = ?"), status),
            ("agent = ?", agent),
            ("started >= ?", since),
            ("started < ?", until),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        text = f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM sessions"
        if clauses:
            text += " WHERE " + " AND ".join(clauses)
        text += " ORDER BY started DESC NULLS LAST, session_id"
        if limit is not None:
            text += f" LIMIT {int(limit)}"
        return [self._summary(row) for row in self._query(text, params)]

    def last_summaries(self, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The type and summary of each session's last event; see `Journal.last_summaries`."""
        ids = list(dict.fromkeys(session_ids))
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            rows = self._query(
                "SELECT e.session_id, e.type, e.summary FROM sessions s JOIN events e "
                "ON e.session_id = s.session_id AND e.seq = s.last_seq "
                f"WHERE s.session_id IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            for session_id, kind, summary in rows:  # untrusted: any column type may be there
                found[as_text(session_id)] = (as_text(kind), as_text(summary))
        return found

    def session_details(self, session_ids: Sequence[str]) -> dict[str, SessionDetails]:
        """Metadata and halt reasons; see `Journal.session_details`."""
        ids = list(dict.fromkeys(session_ids))
        found: dict[str, SessionDetails] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            rows = self._query(
                "SELECT e.session_id, e.seq, e.body FROM sessions s JOIN events e "
                "ON e.session_id = s.session_id AND (e.seq = 0 OR (e.seq = s.last_seq "
                "AND e.type = 'agent_halted')) "
                f"WHERE s.session_id IN ({', '.join('?' * len(chunk))}) ORDER BY e.seq",
                chunk,
            )
            for session_id, seq, body in rows:
                sid = as_text(session_id)
                payload = _json_object(body)
                known = found.get(sid, SessionDetails())
                metadata, reason = payload.get("metadata"), payload.get("reason")
                if seq == 0 and isinstance(metadata, dict):
                    known = known.model_copy(update={"metadata": metadata})
                if payload.get("type") == "agent_halted" and isinstance(reason, str):
                    known = known.model_copy(update={"halt_reason": reason})
                found[sid] = known
        return found

    def summary(self, session_id: str) -> SessionSummary | None:
        """One session's summary; see `Journal.summary`."""
        rows = self._query(
            f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        return self._summary(rows[0])

    def _summary(self, row: Sequence[Any]) -> SessionSummary:
        """A row of the sessions projection as a summary (a garbled row is an error)."""
        try:
            return SessionSummary.model_validate(dict(zip(PROJECTION_COLUMNS, row, strict=True)))
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise self._corrupt(row[0], field, first["msg"]) from e

    def state(self, session_id: str) -> SessionState:
        """The state after the last event; see `Journal.state`."""
        with self._reading() as tx:
            head = self._locate(tx, session_id)[0]
        if head is None:
            raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
        return head.state


def _json_object(text: object) -> dict[str, Any]:
    """``text`` parsed when it is a JSON object, else empty (a body altered by someone else:
    verify's finding; a listing shows what it can)."""
    try:
        found = orjson.loads(text) if isinstance(text, str | bytes) else None
    except orjson.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}
