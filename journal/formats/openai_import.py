"""Import OpenAI-style chat transcripts as sessions, with a report of what could not be mapped.

Each conversation (see `journal.formats.openai_read` for the file shapes) becomes one session:

* ``session_started``: the leading ``system`` / ``developer`` messages as the system
  prompt, the conversation's ``tools`` as tool specs, its model, and all of its metadata
  (ids, reward, termination, ...) plus ``"imported_from": "openai"``; no agent reference;
* an assistant message before the first user message (a greeting) is ``agent_completed``
  alone: it is not a model call of the session;
* ``user`` → ``user_input``;
* assistant with ``tool_calls`` (or a legacy ``function_call``) → ``action_proposed`` with
  every call, arguments as an object or, when not a JSON object, the raw string; reasoning,
  usage, cost and model where present;
* a plain assistant reply → ``action_proposed`` then ``agent_completed``: it ends the
  turn, not the session;
* ``tool`` (or legacy ``function``) → ``action_committed`` with the content as result, or
  ``action_failed`` (kind ``business``) when the message has ``"error": true`` /
  ``"is_error": true`` or its content starts with the error prefix. A result answers the
  first unanswered call with its id, so repeated ids pair by position;
* a conversation that ends without a final answer ends with ``agent_halted`` when its
  metadata says why (``termination``, ``termination_reason`` or ``stop_reason`` is the
  rule), and is left ``running`` otherwise.

Nothing is dropped silently: whatever has no event (an unknown role, a tool result that
answers no call, a field with no place) is counted in the report with its first examples
(``file:line (conversation C, message M)``), and what was mapped by a fallback (a repeated
call id, arguments kept raw) is listed as a note. Timestamps come from the messages
(``timestamp``, ``created_at``, ``created``) or are synthetic: the epoch plus one second per
event, so the same content always gives the same events and a re-import is a no-op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..canonical import check_json, format_ts, prefix_hash, valid_session_id
from ..errors import InvalidEventError, InvalidInputError, SessionConflictError
from ..events import (
    ActionCommitted,
    ActionFailed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    AgentHalted,
    SessionStarted,
    ToolCall,
    UserInput,
)
from ..store import Journal
from .erasures import erased_heads, reaches_erased
from .openai_messages import (
    REASONING_FIELDS,
    PendingCalls,
    content_text,
    proposal_from_message,
    system_prompt_of,
    tool_specs_of,
)
from .openai_read import Conversation, TranscriptFile, read_transcripts

__all__ = [
    "EPOCH",
    "ConvertedFile",
    "ConvertedSession",
    "Findings",
    "ImportReport",
    "convert_file",
    "convert_files",
    "import_converted",
    "import_openai",
]

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""Where synthetic timestamps start."""

SESSION_ID_KEYS = ("session_id", "conversation_id", "id")
"""Metadata (or top-level) fields read as the session id, in order."""
HALT_KEYS = ("termination", "termination_reason", "stop_reason")
"""Metadata fields read as the rule of a conversation that ends without a final answer."""
_TIME_KEYS = ("timestamp", "created_at", "created")
_KNOWN = {
    "*": {"role", "content", *_TIME_KEYS},
    "assistant": {"tool_calls", "function_call", "usage", "cost", "model", "latency_ms"}
    | set(REASONING_FIELDS),
    "tool": {"tool_call_id", "name", "error", "is_error"},
    "function": {"name", "error", "is_error"},
}
_EXAMPLES = 3


@dataclass
class Findings:
    """Counts of one sort of finding by kind, each with its first examples."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, where: str, detail: str) -> None:
        """Count one finding of ``kind`` at ``where``."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < _EXAMPLES:
            shown.append(f"{where}: {detail}")

    def merge(self, other: Findings) -> None:
        """Add ``other``'s counts and examples to these."""
        for kind, count in other.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + count
            shown = self.examples.setdefault(kind, [])
            shown.extend(other.examples[kind][: _EXAMPLES - len(shown)])

    @property
    def total(self) -> int:
        """How many findings in all."""
        return sum(self.counts.values())

    def as_json(self) -> dict[str, Any]:
        """``{"total", "kinds": {kind: {"count", "examples"}}}``."""
        return {
            "total": self.total,
            "kinds": {
                kind: {"count": self.counts[kind], "examples": self.examples[kind]}
                for kind in sorted(self.counts)
            },
        }


@dataclass
class ConvertedSession:
    """One conversation mapped to events, with the time of each."""

    session_id: str
    where: str
    events: list[tuple[AgentEvent, datetime]]

    def records(self) -> list[tuple[str, dict[str, Any]]]:
        """The flat records `Journal.import_records` takes, each with where it came from."""
        out = []
        for seq, (event, moment) in enumerate(self.events):
            record = event.model_dump(mode="json")
            record.update(
                session_id=self.session_id, seq=seq, ts=format_ts(moment), v=type(event).VERSION
            )
            out.append((f"{self.where} seq {seq}", record))
        return out


@dataclass
class ConvertedFile:
    """A transcript file mapped to sessions, with what could not be mapped and the notes."""

    path: str
    sessions: list[ConvertedSession]
    unmapped: Findings
    notes: Findings
    messages: int = 0
    tool_calls: int = 0
    failed_calls: int = 0


def _slug(path: str) -> str:
    stem = Path(path).name
    for suffix in (".jsonl", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return re.sub(r"[^A-Za-z0-9_.:\-]", "_", stem)[:100] or "transcript"


def _moment(value: Any) -> datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def _time_of(message: Mapping[str, Any]) -> datetime | None:
    for key in _TIME_KEYS:
        found = _moment(message.get(key))
        if found is not None:
            return found
    return None


_USAGE_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
)


def _unreadable_values(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Known fields whose value the mapping cannot use, by name and value.

    A time that is no time, a token count that is no count: each is reported as unmapped
    rather than silently replaced by the previous time or 0.
    """
    found = [
        (key, message[key])
        for key in _TIME_KEYS
        if not _empty(message.get(key)) and _moment(message[key]) is None
    ]
    usage = message.get("usage")
    if isinstance(usage, Mapping):
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        counts = [(f"usage.{key}", usage.get(key)) for key in _USAGE_COUNTS]
        if isinstance(details, Mapping):
            counts.append(("usage.cached_tokens", details.get("cached_tokens")))
        found += [
            (key, value)
            for key, value in counts
            if value is not None
            and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
        ]
    return found


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


class _Converter:
    """Maps one conversation to events; see the module docstring for the rules."""

    def __init__(
        self,
        parsed: TranscriptFile,
        conversation: Conversation,
        error_prefix: str | None,
        unmapped: Findings,
        notes: Findings,
    ) -> None:
        self.parsed = parsed
        self.conversation = conversation
        self.error_prefix = error_prefix
        self.unmapped = unmapped
        self.notes = notes
        self.events: list[tuple[AgentEvent, datetime]] = []
        self.pending = PendingCalls()
        self.timed = any(_time_of(m) is not None for m in conversation.messages)
        self.clock = EPOCH
        self.seen_user = False
        self.metadata: dict[str, Any] = {}
        self.proposals = 0
        self.tool_calls = 0
        self.failed_calls = 0

    def at(self, index: int | None = None) -> str:
        return self.parsed.where(self.conversation, index)

    def emit(self, event: AgentEvent, message: Mapping[str, Any] | None = None) -> None:
        if self.timed:
            found = _time_of(message) if message is not None else None
            if found is not None and found > self.clock:
                self.clock = found
        elif self.events:
            self.clock += timedelta(seconds=1)
        self.events.append((event, self.clock))

    # -- the session's start -----------------------------------------------------------

    def start(self) -> int:
        """Emit ``session_started``; return the index of the first non-system message."""
        conversation = self.conversation
        prompt, first, parts = system_prompt_of(conversation.messages)
        self.unknown_parts(0, parts)
        for index in range(first):
            self.unknown_fields(index, conversation.messages[index])
        metadata = {key: value for key, value in conversation.extra.items() if key != "tools"}
        for key, value in conversation.metadata.items():
            if key in metadata and metadata[key] != value:
                self.unmapped.add(
                    "field:" + key, self.at(), "a top-level field the metadata overrides"
                )
            metadata[key] = value
        metadata["imported_from"] = "openai"
        self.metadata = metadata
        model = metadata.get("model")
        self.model = model if isinstance(model, str) and model else None
        tools, problems = tool_specs_of(conversation.extra.get("tools"))
        for problem in problems:
            self.unmapped.add("tool_spec", self.at(), problem)
        if self.timed:
            first_time = next(
                (t for t in map(_time_of, conversation.messages) if t is not None), EPOCH
            )
            self.clock = first_time
        self.emit(
            SessionStarted(
                config=AgentConfig(tools=tools),
                system_prompt=prompt,
                system_prompt_hash=_prefix_hash(prompt, conversation.extra.get("tools")),
                model=self.model,
                metadata=metadata,
            )
        )
        return first

    # -- messages --------------------------------------------------------------------

    def unknown_parts(self, index: int, parts: Sequence[str]) -> None:
        for part in parts:
            self.unmapped.add(f"content_part:{part}", self.at(index), "a non-text content part")

    def unknown_fields(self, index: int, message: Mapping[str, Any]) -> None:
        role = message["role"]
        known = _KNOWN["*"] | _KNOWN.get(role, set())
        for key, value in message.items():
            if key not in known and not _empty(value):
                self.unmapped.add(f"field:{role}.{key}", self.at(index), f"{key}={value!r:.60}")
        for key, value in _unreadable_values(message):
            self.unmapped.add(
                f"value:{role}.{key}", self.at(index), f"{key}={value!r:.60} (not used)"
            )

    def unanswered(self, calls: Sequence[ToolCall], index: int) -> None:
        for call in calls:
            self.unmapped.add(
                "unanswered_call",
                self.at(index),
                f"{call.tool} call {call.call_id!r} has no tool result",
            )

    def convert(self) -> list[tuple[AgentEvent, datetime]]:
        first = self.start()
        messages = self.conversation.messages
        for index in range(first, len(messages)):
            message = messages[index]
            role = message["role"]
            self.unknown_fields(index, message)
            if role == "user":
                self.user(index, message)
            elif role == "assistant":
                self.assistant(index, message)
            elif role in ("tool", "function"):
                self.result(index, message)
            elif role in ("system", "developer"):
                self.unmapped.add(
                    "system_message_mid_conversation",
                    self.at(index),
                    "a system message after the conversation started has no event",
                )
            else:
                self.unmapped.add(f"role:{role}", self.at(index), f"unknown role {role!r}")
        self.finish(len(messages))
        return self.events

    def user(self, index: int, message: Mapping[str, Any]) -> None:
        self.unanswered(self.pending.reset([]), index)
        text, parts = content_text(message.get("content"))
        self.unknown_parts(index, parts)
        self.seen_user = True
        self.emit(UserInput(text=text), message)

    def assistant(self, index: int, message: Mapping[str, Any]) -> None:
        proposal, parsed = proposal_from_message(
            message, id_prefix=f"call-{index}", model=_own_model(message) or self.model
        )
        text, parts = content_text(message.get("content"))
        self.unknown_parts(index, parts)
        for problem in parsed.unreadable:
            self.unmapped.add("unreadable_tool_call", self.at(index), problem)
        for call_id in parsed.invalid_arguments:
            self.notes.add(
                "invalid_arguments", self.at(index), f"call {call_id!r}: kept as the raw string"
            )
        if parsed.missing_ids:
            self.notes.add(
                "missing_call_id", self.at(index), f"{parsed.missing_ids} call(s) given an id"
            )
        self.unanswered(self.pending.reset(proposal.calls), index)
        if not proposal.calls and not self.seen_user and self.proposals == 0 and text:
            if proposal.usage.input_tokens or proposal.usage.output_tokens or proposal.reasoning:
                self.notes.add(
                    "greeting_usage",
                    self.at(index),
                    "the greeting's usage and reasoning have no event (it is not a model call)",
                )
            self.emit(AgentCompleted(answer=text), message)
            return
        self.proposals += 1
        self.tool_calls += len(proposal.calls)
        if not text and not proposal.calls and index < len(self.conversation.messages) - 1:
            self.notes.add("empty_reply", self.at(index), "an empty assistant message ends a turn")
        self.emit(proposal, message)
        if not proposal.calls and (text or index < len(self.conversation.messages) - 1):
            self.emit(AgentCompleted(answer=text), message)

    def result(self, index: int, message: Mapping[str, Any]) -> None:
        call_id = message.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        name = message.get("name") if isinstance(message.get("name"), str) else None
        if call_id is not None and self.pending.repeated(call_id):
            self.notes.add(
                "repeated_call_id", self.at(index), f"id {call_id!r} repeats; paired by position"
            )
        call = self.pending.take(call_id, tool=name, by_position=False)
        if call is None and self.pending.calls:
            call = self.pending.take(None, by_position=True)
            assert call is not None
            self.notes.add(
                "call_paired_by_position",
                self.at(index),
                f"tool result for id {call_id!r} paired with the next call ({call.call_id!r})",
            )
        text, parts = content_text(message.get("content"))
        self.unknown_parts(index, parts)
        if call is None:
            self.unmapped.add(
                "orphan_tool_result",
                self.at(index),
                f"tool result for id {call_id!r} answers no call ({text!r:.60})",
            )
            return
        args = call.args if isinstance(call.args, dict) else {}
        if not isinstance(call.args, dict):
            self.notes.add(
                "outcome_without_arguments",
                self.at(index),
                f"{call.tool} call {call.call_id!r}: its raw arguments are in action_proposed",
            )
        failed = message.get("error") is True or message.get("is_error") is True
        if self.error_prefix and text.startswith(self.error_prefix):
            failed = True
        event: AgentEvent
        if failed:
            self.failed_calls += 1
            event = ActionFailed(
                call_id=call.call_id, tool=call.tool, kind="business", message=text, args=args
            )
        else:
            event = ActionCommitted(call_id=call.call_id, tool=call.tool, args=args, result=text)
        self.emit(event, message)

    def finish(self, end: int) -> None:
        self.unanswered(self.pending.reset([]), end - 1)
        last = self.events[-1][0]
        if isinstance(last, (AgentCompleted, SessionStarted)):
            return
        for key in HALT_KEYS:
            rule = self.metadata.get(key)
            if isinstance(rule, str) and rule:
                self.emit(
                    AgentHalted(
                        rule=rule,
                        reason=f"the transcript ends without a final answer ({key}: {rule})",
                    )
                )
                return
        self.notes.add(
            "no_final_answer", self.at(), "ends without a final answer and no termination: running"
        )


def _own_model(message: Mapping[str, Any]) -> str | None:
    value = message.get("model")
    return value if isinstance(value, str) and value else None


def _session_id(conversation: Conversation, slug: str, notes: Findings, where: str) -> str:
    for source in (conversation.metadata, conversation.extra):
        for key in SESSION_ID_KEYS:
            value = source.get(key)
            if value is None:
                continue
            text = str(value) if isinstance(value, (str, int)) else ""
            if valid_session_id(text):
                return text
            notes.add("invalid_session_id", where, f"{key}={value!r:.60} is not a session id")
    return f"{slug}-{conversation.index}"


def convert_file(path: str | Path, *, error_prefix: str | None = None) -> ConvertedFile:
    """Read one transcript file and map its conversations to sessions (nothing written).

    Raises:
        InvalidInputError: malformed input (one line naming ``file:line``), or two
            conversations with the same session id.
    """
    parsed = read_transcripts(path)
    converted = ConvertedFile(parsed.path, [], Findings(), Findings())
    slug = _slug(parsed.path)
    seen: dict[str, str] = {}
    for conversation in parsed.conversations:
        where = parsed.where(conversation)
        session_id = _session_id(conversation, slug, converted.notes, where)
        if session_id in seen:
            raise InvalidInputError(
                f"{where}: session id {session_id!r} is used by {seen[session_id]} too"
            )
        seen[session_id] = where
        converter = _Converter(
            parsed, conversation, error_prefix, converted.unmapped, converted.notes
        )
        session = ConvertedSession(session_id, where, converter.convert())
        for at, record in session.records():
            try:
                check_json(record)
            except InvalidEventError as e:
                raise InvalidInputError(f"{at}: {e}") from e
        converted.sessions.append(session)
        converted.messages += len(conversation.messages)
        converted.tool_calls += converter.tool_calls
        converted.failed_calls += converter.failed_calls
    return converted


@dataclass
class ImportReport:
    """What an import did, and what it could not map (the ``import --json`` document)."""

    files: list[dict[str, Any]] = field(default_factory=list)
    unmapped: Findings = field(default_factory=Findings)
    notes: Findings = field(default_factory=Findings)
    errors: list[str] = field(default_factory=list)

    def total(self, key: str) -> int:
        """Sum of one per-file count over the files."""
        return sum(int(item[key]) for item in self.files)

    def as_json(self) -> dict[str, Any]:
        """The report as JSON: totals, per-file results, findings and errors."""
        return {
            "format": "openai",
            "files": self.files,
            "sessions": self.total("sessions"),
            "new_sessions": self.total("new_sessions"),
            "new_events": self.total("new_events"),
            "messages": self.total("messages"),
            "tool_calls": self.total("tool_calls"),
            "failed_calls": self.total("failed_calls"),
            "unmapped": self.unmapped.as_json(),
            "notes": self.notes.as_json(),
            "errors": self.errors,
        }


def convert_files(
    paths: Sequence[str | Path], *, error_prefix: str | None = None
) -> list[ConvertedFile]:
    """Read and map every file before anything is written (see `convert_file`)."""
    return [convert_file(path, error_prefix=error_prefix) for path in paths]


def import_converted(journal: Journal, converted: Sequence[ConvertedFile]) -> ImportReport:
    """Write mapped files, each whole (its sessions in one transaction) or not at all.

    A file whose session exists with different content is an error in the report (that
    file writes nothing; the others are imported). The same content again writes nothing.
    A conversation the journal erased is not brought back (`journal.formats.erasures`):
    the file's other sessions are imported, and the report names it (``erased``).
    """
    report = ImportReport()
    for item in converted:
        report.unmapped.merge(item.unmapped)
        report.notes.merge(item.notes)
        error: str | None = None
        kept, erased = [], []
        for session in item.sessions:
            records = session.records()
            heads = erased_heads(journal, session.session_id)
            if reaches_erased(journal, heads, (record for _, record in records)):
                erased.append(session.session_id)
            else:
                kept.append((session.session_id, records))
        try:
            counts = journal.import_sessions(kept)
        except SessionConflictError as e:
            error = str(e)
            report.errors.append(f"{item.path}: {e}")
            counts = []
        except InvalidEventError as e:
            raise InvalidInputError(f"{item.path}: {e}") from e
        report.files.append(
            {
                "path": item.path,
                "sessions": len(item.sessions),
                "new_sessions": sum(1 for count in counts if count),
                "new_events": sum(counts),
                "messages": item.messages,
                "tool_calls": item.tool_calls,
                "failed_calls": item.failed_calls,
                "session_ids": [session.session_id for session in item.sessions],
                "erased": erased,
                "error": error,
            }
        )
    return report


def import_openai(
    journal: Journal, paths: Sequence[str | Path], *, error_prefix: str | None = None
) -> ImportReport:
    """Import transcript files: all are read and mapped first, then each is written whole.

    Raises:
        InvalidInputError: a malformed file (nothing was written).
    """
    return import_converted(journal, convert_files(paths, error_prefix=error_prefix))


def _prefix_hash(prompt: str, tools: object) -> str:
    """The prefix hash of an imported conversation (tools that are not a list: none)."""
    try:
        return prefix_hash(prompt, tools if isinstance(tools, list) else [])
    except InvalidEventError:  # tools with no canonical form: hashed as none
        return prefix_hash(prompt, [])
