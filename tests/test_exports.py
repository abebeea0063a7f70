"""Each package's public API is its sorted ``__all__``, pinned name by name, and no module
imports across packages anything outside a package's ``__all__``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = ("journal", "agentloop", "replay", "tui")

PUBLIC: dict[str, list[str]] = {
    "journal": [
        "CAPTURED_WITH_KEY",
        "DEFAULT_MAX_EVENT_BYTES",
        "DEPS_FACTORY_KEY",
        "ENTRY_INPUTS_KEY",
        "EVENT_ADAPTER",
        "EVENT_TYPES",
        "FOLD_VERSION",
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
        "loads_strict",
        "otlp_document",
        "parse_ts",
        "predated_settings",
        "prefix_hash",
        "query_parts",
        "read_jsonl",
        "register_upcaster",
        "sets_ordered",
        "system_clock",
        "take_anchor",
        "without_password",
        "write_jsonl",
    ],
    "journal.formats": [
        "FORMAT",
        "FORMAT_VERSION",
        "MODEL_SETTINGS",
        "CopyResult",
        "ImportReport",
        "ImportResult",
        "JsonlFile",
        "Redactor",
        "content_text",
        "convert_files",
        "copy_session",
        "copy_sessions",
        "export_lines",
        "export_session",
        "header_for",
        "import_converted",
        "import_file",
        "import_openai",
        "otlp_document",
        "otlp_json",
        "parse_arguments",
        "proposal_from_completion",
        "read_input",
        "read_jsonl",
        "response_body",
        "select_sessions",
        "tool_specs_of",
        "write_atomically",
        "write_jsonl",
    ],
    "journal.capture": [
        "CAPTURED_WITH",
        "MODEL_CALL",
        "Capture",
        "CapturedSession",
        "Destination",
        "DrainReport",
        "HaltSession",
        "InProposalOrder",
        "JournaledOpenAI",
        "ModelOutput",
        "Player",
        "RecordedOrder",
        "Recorder",
        "ReplayTarget",
        "ReplayedException",
        "ReplayedFailure",
        "Sampling",
        "SessionOutput",
        "Spool",
        "SpoolCounts",
        "ToolInfo",
        "ToolPlay",
        "as_return_type",
        "current_session",
        "describe_error",
        "drain",
        "exception_record",
        "failure_kind",
        "failure_message",
        "failure_of",
        "frame_note",
        "full_requests",
        "is_method",
        "json_value",
        "raised_by_model_call",
        "rebuilt",
        "replay_target",
        "replaying",
        "request_record",
        "return_type",
        "spool_line",
        "spool_path_for",
    ],
    "agentloop": [
        "COMPACTED_RESULT",
        "DEFAULT_TRUSTED",
        "TRANSITIONS",
        "TRUST_ENV",
        "Accepted",
        "Agent",
        "AgentDefinitionError",
        "AgentLoadError",
        "AgentLoopError",
        "AgentRuntime",
        "ArgsInvalid",
        "Clock",
        "Context",
        "IdSource",
        "IllegalTransitionError",
        "LLMProvider",
        "LiveToolExecutor",
        "ModelRequest",
        "ModelResponse",
        "OpenAIProvider",
        "Phase",
        "Plan",
        "Rejected",
        "SessionEndedError",
        "Tool",
        "ToolError",
        "ToolExecutor",
        "ToolOutcome",
        "TrustList",
        "TurnResult",
        "UntrustedReferenceError",
        "call_factory",
        "classify_error",
        "compact_result",
        "counter_ids",
        "default_code_version",
        "estimate_tokens",
        "load_agent",
        "load_object",
        "plan_compaction",
        "prefix_hash",
        "repair_truncated_json",
        "scavenge_calls",
        "system_clock",
        "uuid_ids",
        "verify_call",
        "verify_reply",
    ],
    "agentloop.examples": [
        "SCENARIOS",
        "DemoSession",
        "Policy",
        "Scenario",
        "ScriptedLLM",
        "Turn",
        "call",
        "demo_session_id",
        "reply",
        "run_demo",
    ],
    "replay": [
        "ABSENT",
        "CONFIG_FIELDS",
        "DEFAULT_RULES",
        "SNAPSHOT_INTERVAL",
        "Change",
        "DiffResult",
        "DiffRow",
        "Divergence",
        "DivergenceError",
        "Exhaustion",
        "FixtureReplay",
        "ForkPoint",
        "ForkResult",
        "LiveDifference",
        "NormalizationRules",
        "RecordedClock",
        "RecordedLLM",
        "RecordedModel",
        "RecordedOutcome",
        "RecordedToolPort",
        "RecordedTools",
        "RecordingExhausted",
        "ReplayResult",
        "Replayer",
        "StateChange",
        "Timeline",
        "UnrecordedCall",
        "agent_for",
        "align",
        "behaviour_rules",
        "compare",
        "config_changes",
        "configuration_divergence",
        "describe",
        "diff_records",
        "field_changes",
        "fingerprint",
        "fork",
        "normalize",
        "normalized_bytes",
        "record_of",
        "replay_agent_session",
        "replay_entry",
        "replay_fixture",
        "replay_loop",
        "session_records",
        "state_changes",
        "write_fixture",
    ],
    "replay.integrations": [
        "DEPS_FACTORY",
        "InProposalOrder",
        "MissingExtraError",
        "ModelRequests",
        "answer_text",
        "captured_replay",
        "checked_live",
        "compared_requests",
        "first_requests",
        "jsonable",
        "missing_extra",
    ],
    "tui": [],
}
"""What each package exports. Adding or dropping a name is a change of the public API:
update this table on purpose, and say so in the commit."""


def _isort_key(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions: the order ruff's RUF022 keeps."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_all_is_pinned_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == PUBLIC[name]
    assert exported == sorted(exported, key=_isort_key)
    for attribute in exported:
        assert hasattr(module, attribute), f"{name}.{attribute}"


def test_journal_exports_the_public_contract() -> None:
    for required in ("Journal", "fold", "apply", "SessionState", "AgentEvent", "JournalError"):
        assert required in PUBLIC["journal"]


def _cross_package_imports() -> list[tuple[str, int, str, str]]:
    """Every ``from X import name`` in the packages where X belongs to another package."""
    found = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
                    continue
                if node.module.split(".")[0] in TOP and node.module.split(".")[0] != top:
                    where = str(path.relative_to(ROOT))
                    found += [(where, node.lineno, node.module, a.name) for a in node.names]
    return found


def test_packages_import_each_other_only_through_their_public_names() -> None:
    """A module imports from another package only names a package (not a module) exports."""
    imports = _cross_package_imports()
    assert imports, "the scan found nothing: it is broken"
    wrong = [
        f"{where}:{line}: from {module} import {name}"
        for where, line, module, name in imports
        if module not in PUBLIC or name not in PUBLIC[module]
    ]
    assert wrong == []


def test_imports_point_one_way() -> None:
    """journal <- agentloop <- replay <- tui: nothing imports a package to its right."""
    order = {top: rank for rank, top in enumerate(TOP)}
    backwards = [
        f"{where}:{line}: from {module} import {name}"
        for where, line, module, name in _cross_package_imports()
        if order[module.split(".")[0]] > order[where.split("/")[0]]
    ]
    assert backwards == []
