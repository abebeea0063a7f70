"""The journal interface every store implements, and `Journal.open` that picks the store.

A journal holds sessions of events, append-only. ``Journal.open(":memory:")`` or a path
opens SQLite; a ``postgresql://`` URL opens PostgreSQL. Either is a context manager.

The contract is a few small roles over one base (`JournalBase`: where the journal is, what
it was opened with, closing it), each abstract, each usable as a type on its own:

* `JournalReader`: a session's events and stored rows, the global tail, the listings;
* `JournalWriter`: appends (also from asyncio) and imports of whole sessions;
* `JournalAdmin`: the schema, verify and repair, the heads an anchor records, erasure;
* `JournalDerivedData`: what is derived from the events and kept beside them, never
  exported or trusted (snapshots of folded states, the search index).

`Journal` is all four, and `Journal.open` the way to one. A function that only reads can
take a `JournalReader`; every store implements all of `Journal` (the SQL stores one role
per module: `journal._sql_journal` has the map).
"""

from __future__ import annotations

import functools
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict

from ._group_commit import append_pool
from ._planner import Stamps
from .canonical import canonical_bytes, chain_hash
from .clock import Now, utc_now
from .errors import SessionNotFoundError, StoreError
from .events import AgentEvent
from .fold import SessionState
from .problems import Problem, VerifyReport
from .projection import SessionDetails, SessionSummary
from .records import ImportRecord, RecordedEvent, StoredEvent, decode_body
from .search import SearchFilters, SearchHit

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "ChainKind",
    "Durability",
    "Erasure",
    "Journal",
    "JournalAdmin",
    "JournalBase",
    "JournalDerivedData",
    "JournalReader",
    "JournalWriter",
    "SchemaSetup",
    "erasure_bytes",
    "without_password",
]

Durability = Literal["normal", "full"]
ChainKind = Literal["sha256", "hmac-sha256"]
"""How a journal's hash chains are computed: plain sha256, or HMAC-SHA256 with a key."""

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The largest event a journal takes by default: 16 MiB of canonical bytes (the record
without its ``hash``). One runaway payload above it would slow every later read, export and
view of its session; the agent runtime compacts large tool results well below it
(`journal.Guardrails.max_result_bytes`)."""


_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")
_PASSWORD = re.compile(r"(://[^:@/]*):[^@/]*@")


def without_password(target: str) -> str:
    """Return a journal's path or URL as given but for a URL's password (options kept)."""
    return _PASSWORD.sub(r"\1@", target)


class SchemaSetup(BaseModel):
    """What opening a journal did to its schema: created it, upgraded it, or nothing."""

    model_config = ConfigDict(frozen=True)

    action: Literal["created", "upgraded", "current"]
    version: int
    from_version: int | None = None

    def describe(self, target: str) -> str:
        """Return one line saying what was done to the journal at ``target``."""
        if self.action == "created":
            return f"created a journal at {target} (schema version {self.version})"
        if self.action == "upgraded":
            return (
                f"upgraded the journal at {target} from schema version {self.from_version} "
                f"to {self.version}"
            )
        return f"the journal at {target} is up to date (schema version {self.version})"


class Erasure(BaseModel):
    """The audit record of an erased session: who removed it, when, why, and what it was."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    erased_at: str
    erased_by: str
    reason: str
    events: int
    head_hash: str
    hash: str = ""
    """The link of this record in the chain of erasure records (`erasure_bytes`); empty
    for records written before erasures were chained."""


def erasure_bytes(erasure: Erasure) -> bytes:
    """The canonical bytes of an erasure record that its ``hash`` covers (all but it)."""
    return canonical_bytes(erasure.model_dump(exclude={"hash"}))


class JournalBase(ABC):
    """What every role of a journal shares: where it is, what it was opened with, closing it.

    A context manager: the block's end closes it.
    """

    PAGE_SIZE = 500
    """Rows fetched per round trip when streaming (a session's rows, the global tail)."""

    def __init__(
        self,
        *,
        clock: Now | None = None,
        hmac_key: bytes | None = None,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        if max_event_bytes is not None and max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be positive, not {max_event_bytes}")
        self._clock: Now = clock or utc_now
        self.max_event_bytes = max_event_bytes
        """The largest event (canonical bytes) an append or an import takes; None: any."""
        self.hasher: Callable[[str, bytes], str] = (
            chain_hash if hmac_key is None else functools.partial(chain_hash, key=hmac_key)
        )
        self.chain_kind: ChainKind = "sha256" if hmac_key is None else "hmac-sha256"
        """How this journal's chains are hashed (the ``chain`` of its ``meta`` table)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    @property
    @abstractmethod
    def target(self) -> str:
        """Where this journal is (a path or a URL without its password)."""

    @property
    def schema_name(self) -> str | None:
        """The schema within the target that holds this journal, or None.

        PostgreSQL: one database holds a journal per schema. None where the target is the
        journal (SQLite).
        """
        return None

    def now(self) -> datetime:
        """Return the journal clock's current time."""
        return self._clock()


class JournalReader(JournalBase):
    """Reading a journal: a session's events and rows, the global tail, the listings.

    Nothing here writes. The listings (`sessions`, `summary`, `last_summaries`) come from
    the ``sessions`` projection and the rows' columns, without decoding a payload.
    """

    @abstractmethod
    def stored_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[StoredEvent]:
        """Stream a session's stored rows with ``start <= seq < stop``, in seq order."""

    def events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Stream a session's events with ``start <= seq < stop``, validated, in seq order.

        Rows are read in pages, so memory stays flat however long the session is. Each event
        is decoded from its stored body, the bytes the hash chain covers (`verify` also checks
        the row's envelope columns against it).
        """
        for row in self.stored_events(session_id, start=start, stop=stop):
            yield decode_body(row.session_id, row.seq, row.body, row.hash, row.position)

    @abstractmethod
    def read_after(self, position: int, *, limit: int = 500) -> list[StoredEvent]:
        """Return up to ``limit`` rows of any session appended after global ``position``.

        Positions grow in commit order, so a reader that remembers the last position it saw
        follows the journal without missing or repeating an event.
        """

    @abstractmethod
    def head_position(self) -> int:
        """Return the global position of the newest event (0 for an empty journal)."""

    def wait_for_events(self, position: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for an event after global ``position``.

        Returns True as soon as one is there (at once when it already is), False on timeout.
        This default polls `head_position`; PostgreSQL overrides it with LISTEN/NOTIFY.
        """
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            if self.head_position() > position:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.25)

    def follow(
        self, position: int = 0, *, idle_timeout: float | None = None
    ) -> Iterator[StoredEvent]:
        """Yield every row appended after global ``position``, waiting for new ones.

        Rows come in position order, each once, none skipped. The iterator ends after
        ``idle_timeout`` seconds without a new event (None: it never ends by itself).
        """
        while True:
            rows = self.read_after(position, limit=self.PAGE_SIZE)
            for row in rows:
                position = row.position if row.position is not None else position
                yield row
            if len(rows) == self.PAGE_SIZE:
                continue
            waited = self.wait_for_events(position, 1.0 if idle_timeout is None else idle_timeout)
            if not waited and idle_timeout is not None:
                return

    @abstractmethod
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
        """List session summaries, newest first, filtered as given (all must hold).

        ``status``, ``agent``, ``rule`` (the halt rule): equal; ``since``/``until``: the
        start time.
        ``meta``: each key must have the value given (as in `SearchFilters.meta`).
        """

    @abstractmethod
    def session_details(self, session_ids: Sequence[str]) -> dict[str, SessionDetails]:
        """Return each session's metadata and halt reason (one query per 500 sessions).

        Unknown sessions are left out.
        """

    @abstractmethod
    def last_summaries(self, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Return the type and one-line summary of each session's last event.

        Listings show how each session ended without reading a payload: one query per 500
        sessions. Unknown sessions are left out.
        """

    @abstractmethod
    def summary(self, session_id: str) -> SessionSummary | None:
        """Return one session's summary, or None when there is no such session."""

    @abstractmethod
    def state(self, session_id: str) -> SessionState:
        """Return the folded state after the session's last event (from the projection)."""

    def require(self, session_id: str) -> SessionSummary:
        """Return the session's summary or raise `SessionNotFoundError`."""
        found = self.summary(session_id)
        if found is None:
            raise SessionNotFoundError(f"session {session_id}: not in {self.target}")
        return found

    def last_seq(self, session_id: str) -> int | None:
        """Return the last seq of a session, or None when it does not exist."""
        found = self.summary(session_id)
        return None if found is None else found.last_seq


class JournalWriter(JournalBase):
    """Writing a journal: appends of events, imports of whole sessions, all or nothing.

    Every write is checked before anything of it is committed (canonical bytes, the hash
    chain, the seqs, the size of each event) and is one transaction.
    """

    def _state_after(self, session_id: str, seq: int) -> SessionState | None:
        """The session's state as this journal folded it writing up to ``seq``, or None.

        None: not at hand (fold the events). Lets a writer that holds the session's state
        skip a fold of its own.
        """
        return None

    @abstractmethod
    def append(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: Stamps | None = None,
    ) -> int:
        """Append ``events`` to a session in one transaction and return the last seq written.

        Seqs are dense from 0; seq 0 must be ``session_started``. ``expected_seq`` is the seq
        the first event must take (0 for a new session); when another writer got there first
        a `ConflictError` is raised and nothing is written. ``ts`` stamps every event of the
        call, or (a sequence as long as ``events``) each event its own (default: the
        journal's clock).
        """

    async def append_async(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: Stamps | None = None,
    ) -> int:
        """`append` for asyncio code: the event loop runs on while the append waits.

        The append runs on a thread of a pool the process shares (`append_pool`) and this
        returns once the commit that holds its events is done, as `append` does. On SQLite,
        concurrent calls share commits (group commit), as threads do; on PostgreSQL each
        runs on its own pooled connection. Cancelling the awaiting task does not withdraw
        an append already handed to a thread: it may still be committed.
        """
        import asyncio  # here: the other callers of a journal need not load asyncio

        call = functools.partial(self.append, session_id, events, expected_seq=expected_seq, ts=ts)
        return await asyncio.get_running_loop().run_in_executor(append_pool(), call)

    @abstractmethod
    def import_records(
        self,
        session_id: str,
        records: Iterable[ImportRecord],
        *,
        check_new: Callable[[SessionState], None] | None = None,
    ) -> int:
        """Import a whole session's flat records, all or nothing; return how many were new.

        Each record comes with the place it was read from (``file:line``) for error messages:
        a flat dict, or a `journal.records.CanonicalRecord` (a line read from its own
        canonical bytes, which are then not checked or made again). Identical content is a
        no-op (0); a longer recording of the same session appends the rest; different
        content raises `SessionConflictError`. The records are read once,
        as they come (a generator keeps memory flat in the session's size). For a session
        new to the journal, ``check_new`` is given the state its events end in before
        anything is committed; what it raises aborts the import.
        """

    def import_sessions(self, sessions: Sequence[tuple[str, Iterable[ImportRecord]]]) -> list[int]:
        """Import several whole sessions, all or nothing; return how many events each added.

        Each session follows the rules of `import_records`. The SQL stores write them all in
        one transaction (a file of many sessions imports whole or not at all), streaming each
        session's records as `import_records` does; this default
        imports one after another, so a store without transactions keeps the earlier ones.
        """
        return [self.import_records(session_id, records) for session_id, records in sessions]


class JournalAdmin(JournalBase):
    """Looking after a journal: its schema, verify and repair, anchors' heads, erasure."""

    @property
    @abstractmethod
    def schema_setup(self) -> SchemaSetup:
        """What opening this journal did to its schema (created, upgraded, or nothing)."""

    @abstractmethod
    def verify(
        self,
        session_ids: Sequence[str] | None = None,
        *,
        quick: bool = False,
        allow_triggers: Collection[str] = (),
    ) -> VerifyReport:
        """Check the hash chains, decoding, derived data and the append-only guards.

        Each session is read in one consistent snapshot (appends meanwhile are no finding).
        Derived data is checked against the events: each row's summary, the projection (a
        refold of the session) and stored snapshots; ``quick`` skips the refold (so the
        projection's columns and state and the snapshots are not checked; the last seq and
        head hash are). Triggers and rules on the journal's tables that are not its own are
        findings unless named in ``allow_triggers``. Global positions are checked too: each
        session's in seq order, and, when every session is verified, the whole journal's
        against what hands them out (``position`` findings).
        """

    def heads(self) -> dict[str, tuple[int, str]]:
        """Return each session's last seq and head hash, from its events (not the projection)."""
        return {sid: (seq, head) for sid, (seq, head, _) in self.placed_heads().items()}

    @abstractmethod
    def placed_heads(self) -> dict[str, tuple[int, str, int]]:
        """Return each session's last seq, head hash and global position, from its events.

        Read at one moment (one statement). This is what an anchor records (`journal.anchor`).
        """

    @abstractmethod
    def hash_at(self, session_id: str, seq: int) -> str | None:
        """Return the stored hash of the session's event at ``seq``, or None."""

    @abstractmethod
    def placed_hash_at(self, session_id: str, seq: int) -> tuple[str, int] | None:
        """Return the stored hash and global position of the session's event at ``seq``."""

    @abstractmethod
    def repair(self, session_ids: Sequence[str] | None = None) -> list[Problem]:
        """Rebuild derived data that `verify` found disagreeing with intact events.

        For each session (all by default) whose only findings are about its projection or
        its snapshots, and whose chain holds: the projection row is rewritten from the fold
        of the events and the session's snapshots are dropped (they are rebuilt on need). A
        search index that disagrees with the events (``search_index`` findings) is dropped
        whole; the next search builds it again.
        A session whose events are in question (altered, removed, cut, undecodable) or
        whose summary column disagrees (event rows are append-only) is left as it is.
        Returns the findings repaired.
        """

    @abstractmethod
    def erase(self, session_id: str, *, reason: str, erased_by: str | None = None) -> Erasure:
        """Remove a whole session (retention, a right to erasure), audited, in one transaction.

        The one sanctioned way around append-only: the audit record (who, when, why, how
        many events, the head hash) is written first and can itself never be altered or
        removed; the store's triggers reject any other DELETE. ``erased_by`` defaults to
        the operating-system user.

        Raises:
            SessionNotFoundError: no such session.
            InvalidInputError: an empty reason.
        """

    @abstractmethod
    def erasures(self, session_id: str | None = None) -> list[Erasure]:
        """Return the audit records of erased sessions, oldest first."""


class JournalDerivedData(JournalBase):
    """Data derived from the events and kept beside them: snapshots and the search index.

    Never exported and never trusted: rebuilt from the events on need, checked by verify
    (the snapshots) or caught up on use (the index).
    """

    @abstractmethod
    def load_snapshot(
        self, session_id: str, seq: int, fold_version: int
    ) -> tuple[int, SessionState] | None:
        """The latest stored snapshot of a session's state at or before ``seq``, if any.

        Snapshots are derived data (see `replay.Timeline`): never exported; `verify` checks
        them against the fold of the events.
        """

    @abstractmethod
    def save_snapshots(
        self, session_id: str, fold_version: int, snapshots: Sequence[tuple[int, SessionState]]
    ) -> None:
        """Store snapshots (seq, state after it) of a session; existing ones are kept."""

    @abstractmethod
    def refresh_search_index(self) -> int:
        """Catch the search index up with the journal; return how many events it added.

        `search` does this first; call it to index ahead of time (in the background of a
        UI, or after a bulk import). The index is derived data (`journal.search`): never
        written by an append, exported or verified.
        """

    @abstractmethod
    def search(
        self, query: str, filters: SearchFilters | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Return the events whose text matches ``query``, best first, at most ``limit``.

        ``query`` is words and quoted phrases, all of which must be there (`journal.search`
        says what is indexed); ``filters`` narrow it by tool, type, time, session, status,
        halt rule and metadata. The index is caught up first.

        Raises:
            InvalidInputError: a query without a word, or a limit below 1.
        """


class Journal(JournalReader, JournalWriter, JournalAdmin, JournalDerivedData):
    """An append-only store of sessions of typed events.

    Subclasses implement the storage; the public methods of its roles (`JournalReader`,
    `JournalWriter`, `JournalAdmin`, `JournalDerivedData`) are the whole contract (the same
    for SQLite and PostgreSQL, tested by one contract suite).
    """

    @staticmethod
    def open(
        target: str | Path,
        *,
        create: bool = True,
        durability: Durability = "normal",
        clock: Now | None = None,
        hmac_key: bytes | None = None,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
        busy_timeout: float | None = None,
    ) -> Journal:
        """Open the journal at ``target``: a SQLite path, ``":memory:"``, or a PostgreSQL URL.

        Args:
            target: where the journal is.
            create: create the journal (and its file) when it does not exist yet; with
                False a missing or empty target raises `JournalMissingError` or
                `NotAJournalError`.
            durability: ``"normal"`` commits survive a process crash; ``"full"`` also
                survives a power loss (an fsync per commit).
            clock: the source of event timestamps (the recorded clock in a replay).
            hmac_key: turn the hash chain into an HMAC chain (rewriting it needs the key).
            max_event_bytes: the largest event an append or an import takes, in canonical
                bytes (default 16 MiB; None: no limit); a larger one raises
                `EventTooLargeError` and nothing of that call is written. Reading is not
                limited: events stored before stay readable.
            busy_timeout: how long, in seconds, a call waits for the SQLite file's write
                lock, or for a PostgreSQL connection (to connect, and from the pool),
                before it fails with `JournalBusyError`; None keeps the store's defaults
                (5 s for SQLite's lock and PostgreSQL's connect, 30 s for its pool).
        """
        text = str(target)
        store: type[Journal]
        other = _URL_SCHEME.match(text)
        if other and other[1] not in ("postgresql", "postgres"):
            # the scheme alone is named: the rest of the URL may hold a password
            raise StoreError(
                f"{other[1]}:// is not a journal location: give a SQLite file path or a "
                "postgresql:// URL"
            )
        waits: dict[str, Any] = {}
        if text.startswith(("postgresql://", "postgres://")):
            try:
                from .postgres import PostgresJournal
            except ImportError as e:
                raise StoreError(
                    "PostgreSQL journals need psycopg: pip install 'agent-journal[postgres]'"
                ) from e
            store = PostgresJournal
            if busy_timeout is not None:
                waits = {"connect_timeout": busy_timeout, "pool_timeout": busy_timeout}
        else:
            from .sqlite import SQLiteJournal

            store = SQLiteJournal
            if busy_timeout is not None:
                waits = {"busy_timeout_ms": max(1, round(busy_timeout * 1000))}
        return store(
            text,
            create=create,
            durability=durability,
            clock=clock,
            hmac_key=hmac_key,
            max_event_bytes=max_event_bytes,
            **waits,
        )
