"""The JSONL file format: one session per file, a header line, then one event per line.

Line 1 is a header object: ``"format": "agent-journal"``, ``"format_version"``,
``session_id`` and the session's metadata (agent, model, status, times, lineage; no counts
or digests). Every further line is one record in canonical bytes: the envelope fields
(``session_id``, ``seq``, ``ts``, ``type``, ``v``, ``hash``) flat beside the event's fields.
``hash`` may be absent on import (it is computed); when present it must verify.

Export then import then export gives the same bytes. An import is all or nothing, and
streams: lines are parsed, checked and written in batches inside one transaction, so its
memory is flat in the session's size.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..canonical import canonical_object, dumps_canonical, loads_strict
from ..errors import EventTooLargeError, InvalidEventError, InvalidInputError, SessionConflictError
from ..fold import SessionState
from ..records import CanonicalRecord, ImportRecord, canonical_record
from ..store import Journal
from .atomic import write_atomically
from .erasures import erased_heads
from .redact import Redactor, rechain

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "HEADER_KEYS",
    "ImportResult",
    "JsonlFile",
    "export_lines",
    "export_session",
    "header_for",
    "import_file",
    "parse_line",
    "read_input",
    "read_jsonl",
    "write_jsonl",
]

FORMAT = "agent-journal"
FORMAT_VERSION = 1
_HEADER_FIELDS = (
    "agent",
    "model",
    "status",
    "started",
    "ended",
    "replay_of",
    "forked_from",
    "fork_seq",
)
HEADER_KEYS = frozenset({"format", "format_version", "session_id", *_HEADER_FIELDS, "expect"})
"""Every key a header may have; any other is refused, naming it (it would be dropped
unseen). ``expect`` is a fixture's expected ending (`replay.fixtures`)."""


def header_for(journal: Journal, session_id: str) -> dict[str, Any]:
    """Return the header object of a session's JSONL file."""
    summary = journal.require(session_id)
    header: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "session_id": session_id,
    }
    header.update({name: getattr(summary, name) for name in _HEADER_FIELDS})
    return header


def export_lines(
    journal: Journal,
    session_id: str,
    *,
    redactor: Redactor | None = None,
    rename: str | None = None,
    header_extra: dict[str, Any] | None = None,
) -> Iterator[bytes]:
    """Yield a session's JSONL lines (header first), each without its newline.

    With a ``redactor`` every record is redacted and the hash chain recomputed; ``rename``
    writes the session under another id (its lineage cleared); ``header_extra`` adds
    fields to the header.
    """
    header = header_for(journal, session_id)
    if rename is not None:
        header.update(session_id=rename, replay_of=None)
    header.update(header_extra or {})
    yield dumps_canonical(header)
    if redactor is None and rename is None:
        for row in journal.stored_events(session_id):
            yield row.line()
        return
    records = (row.record() for row in journal.stored_events(session_id))
    if rename is not None:
        records = ({**record, "session_id": rename} for record in records)
    if redactor is not None:
        records = (redactor.redact_record(record) for record in records)
    for record in rechain(records, journal.hasher):
        yield dumps_canonical(record)


def export_session(journal: Journal, session_id: str) -> bytes:
    """Return a session's whole JSONL file as bytes."""
    return b"".join(line + b"\n" for line in export_lines(journal, session_id))


def write_jsonl(journal: Journal, session_id: str, path: str | Path) -> int:
    """Write a session to ``path`` atomically; return the number of events written."""
    journal.require(session_id)
    return write_atomically(export_lines(journal, session_id), path) - 1


@dataclass(frozen=True)
class JsonlFile:
    """A parsed JSONL file: its header and its records, each with the place it came from."""

    path: str
    header: dict[str, Any]
    records: list[tuple[str, dict[str, Any]]]

    @property
    def session_id(self) -> str:
        """The session id the header names."""
        return str(self.header["session_id"])


def parse_line(raw: bytes, at: str) -> dict[str, Any]:
    """Parse one line as a JSON object, strictly; errors name ``at`` (file:line).

    What import reads every line with (`journal.canonical.loads_strict`: duplicate keys,
    NaN, integers past 64 bits, deep nesting and invalid UTF-8 refused), and a spool's drain.

    A canonical line (an export's) takes `canonical_object`'s fast path; any other line
    goes to the strict parser, which decides and words the error.

    Raises:
        InvalidInputError: ``AT: not valid JSON: ...`` and the like.
    """
    value = canonical_object(raw)
    return value if value is not None else _parse_strict(raw, at)


def _parse_strict(raw: bytes, at: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"{at}: not valid UTF-8 (byte {e.start})") from e
    if not text.strip():
        raise InvalidInputError(f"{at}: empty line")
    try:
        value = loads_strict(text)
    except ValueError as e:
        raise InvalidInputError(f"{at}: not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise InvalidInputError(f"{at}: expected a JSON object, got {type(value).__name__}")
    return value


def _envelope_checked(record: dict[str, Any], at: str) -> dict[str, Any]:
    """The record, once its ``type`` and ``seq`` are of the types every reader relies on."""
    kind, seq = record.get("type"), record.get("seq")
    if not isinstance(kind, str):
        raise InvalidInputError(f"{at}: type {kind!r:.60} is not a string")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise InvalidInputError(f"{at}: seq {seq!r:.60} is not a non-negative integer")
    return record


def read_input(path: str | Path, kind: str) -> bytes:
    """Read a regular file's bytes; anything else is one clear error (see `_open_input`).

    Raises:
        InvalidInputError: naming the path (``kind`` says what the file should have been).
    """
    with _open_input(path, kind) as file:
        try:
            return file.read()
        except OSError as e:
            raise InvalidInputError(f"{path}: cannot read: {e.strerror}") from e


def _open_input(path: str | Path, kind: str) -> BinaryIO:
    """Open a regular file for reading bytes; anything else is one clear error, never a hang.

    The file is opened without blocking (a FIFO with no writer would wait forever) and
    checked on the open descriptor: a FIFO, a device (``/dev/zero`` never ends), a socket or
    a directory is refused before a byte is read.

    Raises:
        InvalidInputError: naming the path (``kind`` says what the file should have been).
    """
    name = str(path)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as e:
        raise InvalidInputError(f"{name}: no such file") from e
    except OSError as e:
        raise InvalidInputError(f"{name}: cannot read: {e.strerror}") from e
    mode = os.fstat(handle).st_mode
    if not stat.S_ISREG(mode):
        os.close(handle)
        if stat.S_ISDIR(mode):
            raise InvalidInputError(f"{name}: is a directory, not {kind}")
        raise InvalidInputError(
            f"{name}: is a {_file_type(mode)}, not a regular file; only files are read"
        )
    return os.fdopen(handle, "rb")


def _file_type(mode: int) -> str:
    for check, what in (
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if check(mode):
            return what
    return "special file"


_TRANSCRIPT_HINT = "OpenAI chat transcripts import with --format openai"


def _header(raw: bytes, name: str) -> dict[str, Any]:
    """Parse and check a JSONL file's first line, its header.

    A file that starts a JSON array, or whose first object is a chat message or
    conversation, is a transcript: the error says which format reads it.
    """
    if raw.lstrip()[:1] == b"[":
        raise InvalidInputError(
            f"{name}:1: not an agent-journal file (it starts a JSON array; {_TRANSCRIPT_HINT})"
        )
    header = parse_line(raw, f"{name}:1")
    if header.get("format") != FORMAT:
        hint = f"; {_TRANSCRIPT_HINT}" if "messages" in header or "role" in header else ""
        raise InvalidInputError(
            f"{name}:1: not an agent-journal file "
            f'(header "format" is {header.get("format")!r}{hint})'
        )
    version = header.get("format_version")
    if "format_version" not in header:
        raise InvalidInputError(
            f'{name}:1: header has no "format_version" (an export writes '
            f'"format_version": {FORMAT_VERSION}; this code reads up to {FORMAT_VERSION})'
        )
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise InvalidInputError(
            f"{name}:1: format_version {version!r} is not supported (this code reads up to "
            f"{FORMAT_VERSION})"
        )
    if not isinstance(header.get("session_id"), str):
        raise InvalidInputError(f"{name}:1: header has no session_id")
    unknown = sorted(set(header) - HEADER_KEYS)
    if unknown:
        raise InvalidInputError(
            f"{name}:1: header has unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(key)[:60] for key in unknown[:5])} (a header holds "
            f"{', '.join(sorted(HEADER_KEYS))}; a session's metadata is in its session_started)"
        )
    return header


def _records(lines: Iterable[bytes], name: str) -> Iterator[ImportRecord]:
    """Parse and check each event line (after the header) as it comes, with its file:line.

    A canonical line (an export's) comes as a `CanonicalRecord` (`canonical_record`'s fast
    path: its bytes are not checked or made again on import); any other goes to the strict
    parser, which decides and words the error, and comes as a dict.
    """
    number = 1
    for number, line in enumerate(lines, start=2):
        raw = line[:-1] if line.endswith(b"\n") else line
        at = f"{name}:{number}"
        found = canonical_record(raw)
        if found is not None:
            fields = found.fields
            seq = fields.get("seq")
            if type(fields.get("type")) is not str or type(seq) is not int or seq < 0:
                _envelope_checked(fields, at)  # raises, naming the field
            yield at, found
        else:
            yield at, _envelope_checked(_parse_strict(raw, at), at)
    if number == 1:
        raise InvalidInputError(f"{name}: header only, no events")


def _first_line(file: BinaryIO, name: str) -> bytes:
    try:
        first = file.readline()
    except OSError as e:
        raise InvalidInputError(f"{name}: cannot read: {e.strerror}") from e
    if not first:
        raise InvalidInputError(f"{name}:1: empty file, expected an agent-journal header")
    return first[:-1] if first.endswith(b"\n") else first


def read_jsonl(path: str | Path) -> JsonlFile:
    """Read and check a JSONL file's structure; events are validated on import.

    Holds the whole file's records (`import_file` streams instead).

    Raises:
        InvalidInputError: a missing or unreadable file, or a malformed line (names file:line).
    """
    name = str(path)
    with _open_input(path, "a JSONL file") as file:
        header = _header(_first_line(file, name), name)
        records = [
            (at, record.flat() if isinstance(record, CanonicalRecord) else record)
            for at, record in _records(_lines(file, name), name)
        ]
    return JsonlFile(path=name, header=header, records=records)


def _lines(file: BinaryIO, name: str) -> Iterator[bytes]:
    """The file's remaining lines, a read error as one clear error."""
    try:
        yield from file
    except OSError as e:
        raise InvalidInputError(f"{name}: cannot read: {e.strerror}") from e


@dataclass(frozen=True)
class ImportResult:
    """What one imported file did: the session and how many events were new (0: a no-op).

    ``erased``: the file holds a session this journal erased, so nothing was imported.
    """

    path: str
    session_id: str
    new_events: int
    erased: bool = False


class _Erased(Exception):
    """The file's chain reaches the head of an erased session (aborts its import)."""


def _unless_erased(
    records: Iterable[ImportRecord], journal: Journal, session_id: str
) -> Iterable[ImportRecord]:
    """The records, unless they are a session the journal erased (or a longer copy of it).

    See `journal.formats.erasures`; the records carry their hashes here.
    """
    heads = erased_heads(journal, session_id)
    if not heads:
        return records

    def checked() -> Iterator[ImportRecord]:
        for at, record in records:
            fields, claimed = (
                (record.fields, record.hash)
                if isinstance(record, CanonicalRecord)
                else (record, record.get("hash"))
            )
            if heads.get(fields["seq"]) == claimed:
                raise _Erased
            yield at, record

    return checked()


def _status_check(name: str, header: dict[str, Any]) -> Callable[[SessionState], None] | None:
    """Refuse a new session whose events do not end as its header says (a file cut short).

    A JSONL file cut at a line boundary is well formed, so only the header's ``status``
    (written from the whole session) tells that events are missing at the end. An existing
    session is not checked: the import is a no-op, a conflict or its new tail.
    """
    claimed = header.get("status")
    if not isinstance(claimed, str):
        return None

    def check(found: SessionState) -> None:
        if found.status != claimed:
            raise InvalidInputError(
                f"{name}: the header says the session is {claimed} but its events end "
                f"{found.status} at seq {found.last_seq}: the file was cut short or edited; "
                "nothing was imported"
            )

    return check


def import_file(journal: Journal, path: str | Path, *, whole: bool = False) -> ImportResult:
    """Import one JSONL file into ``journal``, all or nothing.

    With ``whole`` (``agent-journal import`` sets it), a new session whose events do not end
    with the status its header gives is refused: the file was cut short at a line boundary.
    Without it a prefix of a recording is taken as it is (``diff`` and ``replay`` of a cut
    recording read it up to its end).

    Raises:
        InvalidInputError: a malformed file, a bad event or hash (names file:line), or,
            with ``whole``, events that do not end with the status the header gives.
        EventTooLargeError: an event is larger than the journal's ``max_event_bytes``
            (names file:line, the session, the seq and the size).
        SessionConflictError: the session exists with different content.

    A session the journal erased is not brought back (``erased`` in the result).
    """
    name = str(path)
    with _open_input(path, "a JSONL file") as file:
        header = _header(_first_line(file, name), name)
        session_id = str(header["session_id"])
        records = _unless_erased(_records(_lines(file, name), name), journal, session_id)
        check = _status_check(name, header) if whole else None
        try:
            new = journal.import_records(session_id, records, check_new=check)
        except _Erased:
            return ImportResult(path=name, session_id=session_id, new_events=0, erased=True)
        except SessionConflictError as e:
            raise SessionConflictError(f"{name}: {e}") from e
        except EventTooLargeError:
            raise  # typed, and its message names file:line already
        except InvalidEventError as e:
            raise InvalidInputError(str(e)) from e
    return ImportResult(path=name, session_id=session_id, new_events=new)
