"""The errors agent-journal raises; every one derives from `JournalError`.

Hierarchy (one line per class: when it is raised)::

    JournalError                  base class; catch this to handle any of ours
    ├── InvalidEventError         an event or value breaks the canonical form (NaN, int64, schema)
    │   ├── UnknownEventTypeError a stored or imported record has a type nobody registered
    │   ├── UnknownVersionError   a record's version is newer than the code, or has no upcaster
    │   └── EventTooLargeError    an event's canonical bytes exceed the journal's size limit
    ├── InvalidInputError         a file or record from outside is malformed (names file:line)
    ├── ConflictError             an append lost a race: the expected seq was taken or moved on
    │   └── SessionConflictError  an import brings different content for an existing session
    ├── SessionNotFoundError      a session id that is not in the journal
    ├── RecordingOrderError       a recorder call out of order (a result for a call never proposed)
    ├── StoreError                the database failed or is not usable
    │   ├── NotAJournalError      the target exists but is not an agent-journal journal
    │   ├── JournalMissingError   the target does not exist and creating it was not asked for
    │   ├── JournalBusyError      the database stayed locked past the busy timeout
    │   ├── SchemaVersionError    the journal was written by a newer schema than this code knows
    │   ├── ChainKindError        the journal's chain kind (sha256, HMAC) is not the key given
    │   ├── PositionError         no valid global position to give (positions were tampered with)
    │   └── UnplannedWriteError   an append's statements wrote other rows than planned (a foreign
    │                             trigger or rule dropped or changed them); nothing was kept

Every message is one line that names the thing and where it is (file:line, session, seq).
Errors from sqlite3 or psycopg are re-raised as ours with ``raise ... from e``.
"""

from __future__ import annotations

__all__ = [
    "ChainKindError",
    "ConflictError",
    "EventTooLargeError",
    "InvalidEventError",
    "InvalidInputError",
    "JournalBusyError",
    "JournalError",
    "JournalMissingError",
    "NotAJournalError",
    "PositionError",
    "RecordingOrderError",
    "SchemaVersionError",
    "SessionConflictError",
    "SessionNotFoundError",
    "StoreError",
    "UnknownEventTypeError",
    "UnknownVersionError",
    "UnplannedWriteError",
]


class JournalError(Exception):
    """Base class of every error agent-journal raises."""


class InvalidEventError(JournalError):
    """An event or a value in it breaks the canonical form or the event schema."""


class UnknownEventTypeError(InvalidEventError):
    """A record's ``type`` is not a registered event type."""


class UnknownVersionError(InvalidEventError):
    """A record's ``v`` is newer than the code knows, or older with no upcaster registered."""


class EventTooLargeError(InvalidEventError):
    """An event's canonical bytes exceed the journal's ``max_event_bytes``; nothing was written.

    Raised by an append and by an import (the whole call is refused). The message names the
    place (``file:line`` on import), the session, the seq, the event's size and the limit;
    the same facts are attributes.
    """

    def __init__(self, message: str, *, session_id: str, seq: int, size: int, limit: int):
        super().__init__(message)
        self.session_id = session_id
        self.seq = seq
        self.size = size
        self.limit = limit


class InvalidInputError(JournalError):
    """Outside input (a JSONL file, a transcript) is malformed; the message names file:line."""


class ConflictError(JournalError):
    """An optimistic-concurrency conflict: another writer appended first; nothing was written."""


class SessionConflictError(ConflictError):
    """An imported session exists already with different content; nothing was written."""


class SessionNotFoundError(JournalError):
    """The session id is not in the journal."""


class RecordingOrderError(JournalError):
    """A `capture.Recorder` call breaks the session's order; nothing was written.

    For example a tool result for a call id no model output proposed (or one answered
    already), a model output before the session started, or anything after a halt.
    """


class StoreError(JournalError):
    """The database failed, or is not usable as a journal."""


class NotAJournalError(StoreError):
    """The target exists but is not an agent-journal journal (not SQLite, or foreign tables)."""


class JournalMissingError(StoreError):
    """The target does not exist and the caller asked not to create it."""


class JournalBusyError(StoreError):
    """The database stayed locked by another writer for longer than the busy timeout."""


class SchemaVersionError(StoreError):
    """The journal's schema version is newer than this code understands."""


class UnplannedWriteError(StoreError):
    """An append wrote other rows than it planned; it was rolled back, nothing acknowledged."""


class PositionError(StoreError):
    """An append cannot take a valid global position; nothing was written.

    The positions, or what hands them out, were changed outside agent-journal: a retry fails
    the same (unlike a `ConflictError`).
    """


class ChainKindError(StoreError):
    """The journal's chain is not the kind the key given asks for (HMAC or plain sha256)."""
