"""The record: typed events, canonical JSON, the fold, the stores and the JSONL format.

Open a journal, append events, read them back and fold them::

    from journal import Journal, SessionStarted, UserInput, fold

    with Journal.open("agent-journal.db") as j:
        j.append("s1", [SessionStarted(agent="app:build"), UserInput(text="hi")])
        state = fold(j.events("s1"))
"""

from .canonical import (
    canonical_bytes,
    chain_hash,
    check_json,
    format_ts,
    loads_strict,
    parse_ts,
)
from .capture_openai import JournaledOpenAI
from .errors import (
    ConflictError,
    InvalidEventError,
    InvalidInputError,
    JournalBusyError,
    JournalError,
    JournalMissingError,
    NotAJournalError,
    RecordingOrderError,
    SchemaVersionError,
    SessionConflictError,
    SessionNotFoundError,
    StoreError,
    UnknownEventTypeError,
    UnknownVersionError,
)
from .events import (
    EVENT_ADAPTER,
    EVENT_TYPES,
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    Guardrails,
    RepairApplied,
    SessionStarted,
    ToolCall,
    ToolSpec,
    Usage,
    UserInput,
    VerificationFailed,
    event_json_schema,
)
from .fold import FOLD_VERSION, SessionState, SessionStatus, apply, call_key, fold
from .jsonl import export_session, import_file, read_jsonl, write_jsonl
from .openai_import import ImportReport, import_openai
from .otlp import otlp_document
from .recorder import ModelOutput, Recorder, ReplayedFailure, describe_error, failure_of
from .records import RecordedEvent, StoredEvent, decode, encode
from .sessions import SessionSummary
from .store import Erasure, Journal, SchemaSetup
from .upcasting import register_upcaster
from .verify import Problem, VerifyReport

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "FOLD_VERSION",
    "ActionCommitted",
    "ActionFailed",
    "ActionProposed",
    "AgentCompleted",
    "AgentConfig",
    "AgentEvent",
    "AgentHalted",
    "CircuitOpened",
    "ConflictError",
    "ContextCompacted",
    "Erasure",
    "FallbackInvoked",
    "Guardrails",
    "ImportReport",
    "InvalidEventError",
    "InvalidInputError",
    "Journal",
    "JournalBusyError",
    "JournalError",
    "JournalMissingError",
    "JournaledOpenAI",
    "ModelOutput",
    "NotAJournalError",
    "Problem",
    "RecordedEvent",
    "Recorder",
    "RecordingOrderError",
    "RepairApplied",
    "ReplayedFailure",
    "SchemaSetup",
    "SchemaVersionError",
    "SessionConflictError",
    "SessionNotFoundError",
    "SessionStarted",
    "SessionState",
    "SessionStatus",
    "SessionSummary",
    "StoreError",
    "StoredEvent",
    "ToolCall",
    "ToolSpec",
    "UnknownEventTypeError",
    "UnknownVersionError",
    "Usage",
    "UserInput",
    "VerificationFailed",
    "VerifyReport",
    "apply",
    "call_key",
    "canonical_bytes",
    "chain_hash",
    "check_json",
    "decode",
    "describe_error",
    "encode",
    "event_json_schema",
    "export_session",
    "failure_of",
    "fold",
    "format_ts",
    "import_file",
    "import_openai",
    "loads_strict",
    "otlp_document",
    "parse_ts",
    "read_jsonl",
    "register_upcaster",
    "write_jsonl",
]
