"""The record: typed events, canonical JSON, the fold, the stores, and their adapters.

Open a journal, append events, read them back and fold them::

    from journal import Journal, SessionStarted, UserInput, fold

    with Journal.open("agent-journal.db") as j:
        j.append("s1", [SessionStarted(agent="app:build"), UserInput(text="hi")])
        state = fold(j.events("s1"))
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._event_summary import clip
from .canonical import (
    GENESIS_HASH,
    canonical_bytes,
    chain_hash,
    check_json,
    format_ts,
    loads_exact,
    loads_strict,
    parse_ts,
    prefix_hash,
    sets_ordered,
)
from .clock import Clock, system_clock, utc_now
from .errors import (
    ChainKindError,
    ConflictError,
    EventTooLargeError,
    InvalidEventError,
    InvalidInputError,
    JournalBusyError,
    JournalError,
    JournalMissingError,
    NotAJournalError,
    PositionError,
    RecordingOrderError,
    SchemaVersionError,
    SessionConflictError,
    SessionNotFoundError,
    StoreError,
    UnknownEventTypeError,
    UnknownVersionError,
    UnplannedWriteError,
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
    EventModel,
    FailureKind,
    FallbackInvoked,
    Guardrails,
    ModelCallFailed,
    RepairApplied,
    RepairLevel,
    SessionStarted,
    ToolCall,
    ToolSpec,
    Usage,
    UserInput,
    VerificationFailed,
    VerificationStage,
    event_json_schema,
    json_stand_in,
    ordered_text,
    result_record,
)
from .failures import (
    MESSAGE_LIMIT,
    HaltSession,
    ReplayedFailure,
    describe_error,
    failure_kind,
    failure_message,
    failure_of,
    one_line,
    status_code_of,
)
from .fold import FOLD_VERSION, SessionState, SessionStatus, apply, call_key, fold
from .formats import (
    ImportReport,
    export_session,
    import_file,
    import_openai,
    otlp_document,
    read_jsonl,
    write_jsonl,
)
from .keys import CAPTURED_WITH_KEY, DEPS_FACTORY_KEY, ENTRY_INPUTS_KEY, REPLAY_KEYS
from .problems import Problem, VerifyReport
from .projection import SessionDetails, SessionSummary
from .records import RecordedEvent, StoredEvent, decode, encode
from .search import SEARCH_INDEX_TABLE, SearchFilters, SearchHit, query_parts
from .store import (
    DEFAULT_MAX_EVENT_BYTES,
    Erasure,
    Journal,
    JournalAdmin,
    JournalDerivedData,
    JournalReader,
    JournalWriter,
    SchemaSetup,
    without_password,
)
from .upcasting import predated_settings, predates, register_upcaster

if TYPE_CHECKING:
    from .anchor import Anchor, check_anchor, take_anchor
else:
    _LAZY = {"anchor": ("Anchor", "check_anchor", "take_anchor")}
    _LAZY_HOME = {name: module for module, names in _LAZY.items() for name in names}
    """Names imported from their module when first used: `journal.anchor` is not needed to
    append, read, import or verify. (Defined for the interpreter only: type checkers see the
    imports above, and no ``__getattr__`` that would let a misspelt name by.)"""

    _MOVED = ("JournaledOpenAI", "ModelOutput", "Recorder")
    """Names of the capture SDK that `journal` exported before it became the top-level
    `capture` package: still found here for this release, with a `DeprecationWarning`."""

    def __getattr__(name: str) -> Any:
        """Import a name of `journal.anchor` when it is first asked for.

        A name of the capture SDK (`_MOVED`) comes from `capture`, with a warning.
        """
        if name in _MOVED:
            from .capture import moved  # the deprecated path, loaded only when asked for

            return moved(f"journal.{name}", name)
        home = _LAZY_HOME.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(import_module(f".{home}", __name__), name)
        globals()[name] = value
        return value


__all__ = [
    "CAPTURED_WITH_KEY",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEPS_FACTORY_KEY",
    "ENTRY_INPUTS_KEY",
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "FOLD_VERSION",
    "GENESIS_HASH",
    "MESSAGE_LIMIT",
    "REPLAY_KEYS",
    "SEARCH_INDEX_TABLE",
    "ActionCommitted",
    "ActionFailed",
    "ActionProposed",
    "AgentCompleted",
    "AgentConfig",
    "AgentEvent",
    "AgentHalted",
    "Anchor",
    "ChainKindError",
    "CircuitOpened",
    "Clock",
    "ConflictError",
    "ContextCompacted",
    "Erasure",
    "EventModel",
    "EventTooLargeError",
    "FailureKind",
    "FallbackInvoked",
    "Guardrails",
    "HaltSession",
    "ImportReport",
    "InvalidEventError",
    "InvalidInputError",
    "Journal",
    "JournalAdmin",
    "JournalBusyError",
    "JournalDerivedData",
    "JournalError",
    "JournalMissingError",
    "JournalReader",
    "JournalWriter",
    "ModelCallFailed",
    "NotAJournalError",
    "PositionError",
    "Problem",
    "RecordedEvent",
    "RecordingOrderError",
    "RepairApplied",
    "RepairLevel",
    "ReplayedFailure",
    "SchemaSetup",
    "SchemaVersionError",
    "SearchFilters",
    "SearchHit",
    "SessionConflictError",
    "SessionDetails",
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
    "UnplannedWriteError",
    "Usage",
    "UserInput",
    "VerificationFailed",
    "VerificationStage",
    "VerifyReport",
    "apply",
    "call_key",
    "canonical_bytes",
    "chain_hash",
    "check_anchor",
    "check_json",
    "clip",
    "decode",
    "describe_error",
    "encode",
    "event_json_schema",
    "export_session",
    "failure_kind",
    "failure_message",
    "failure_of",
    "fold",
    "format_ts",
    "import_file",
    "import_openai",
    "json_stand_in",
    "loads_exact",
    "loads_strict",
    "one_line",
    "ordered_text",
    "otlp_document",
    "parse_ts",
    "predated_settings",
    "predates",
    "prefix_hash",
    "query_parts",
    "read_jsonl",
    "register_upcaster",
    "result_record",
    "sets_ordered",
    "status_code_of",
    "system_clock",
    "take_anchor",
    "utc_now",
    "without_password",
    "write_jsonl",
]
