"""Each package's public API is its sorted ``__all__``, pinned name by name, and no module
imports across packages anything outside a package's ``__all__``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = ("journal", "capture", "agentloop", "replay", "tui")

PUBLIC: dict[str, list[str]] = {
    "journal": [
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
    ],
    "journal.formats": [
        "CONTENT_SETTINGS",
        "FORMAT",
        "FORMAT_VERSION",
        "HEADER_KEYS",
        "MODEL_SETTINGS",
        "CopyResult",
        "ImportReport",
        "ImportResult",
        "JsonlFile",
        "OtlpBatch",
        "Redactor",
        "TraceCollector",
        "atif_json",
        "atif_trajectory",
        "content_text",
        "convert_atif",
        "convert_batch",
        "convert_files",
        "convert_otlp",
        "copy_session",
        "copy_sessions",
        "export_lines",
        "export_session",
        "header_for",
        "import_converted",
        "import_file",
        "import_openai",
        "message_projection",
        "otlp_document",
        "otlp_json",
        "parse_arguments",
        "parse_line",
        "proposal_from_completion",
        "proposal_from_response",
        "read_body",
        "read_input",
        "read_jsonl",
        "read_otlp",
        "rechain",
        "request_digest",
        "response_body",
        "select_sessions",
        "system_prompt_of",
        "tool_specs_of",
        "write_atomically",
        "write_jsonl",
    ],
    "capture": [
        "CAPTURED_WITH",
        "LIST_TOOLS",
        "MODEL_CALL",
        "REPLAY_STOPPED",
        "AsyncToolPlayer",
        "Capture",
        "CapturedSession",
        "Destination",
        "DrainReport",
        "FailedCall",
        "InProposalOrder",
        "JournaledOpenAI",
        "MissingExtraError",
        "ModelOutput",
        "Player",
        "RecordedOrder",
        "Recorder",
        "ReplayTarget",
        "ReplayedException",
        "Sampling",
        "SessionOutput",
        "Spool",
        "SpoolCounts",
        "ToolInfo",
        "ToolPlay",
        "as_return_type",
        "current_session",
        "drain",
        "exception_record",
        "frame_note",
        "full_requests",
        "halt_of",
        "is_method",
        "json_value",
        "mcp_tool_names",
        "missing_extra",
        "raised_by_model_call",
        "rebuilt",
        "replay_target",
        "replaying",
        "request_record",
        "return_type",
        "spool_line",
        "spool_path_for",
    ],
    "capture.frameworks": [
        "ModelRequests",
        "answer_text",
        "jsonable",
    ],
    "capture.frameworks.langchain": [
        "KIND",
        "NodeTracker",
        "journaled_model",
        "journaled_tool",
        "model_request",
        "proposal_of",
        "seen_message",
    ],
    "capture.frameworks.langgraph": [
        "CAPTURED_WITH",
        "METADATA_KEY",
        "METHODS",
        "CapturedGraph",
        "Seed",
        "UnrestorableState",
        "decode_value",
        "encode_value",
        "seeded",
        "seeded_checkpointer",
    ],
    "capture.frameworks.openai_agents": [
        "CAPTURED_WITH",
        "REQUEST_FORM",
        "JournalRunHooks",
        "ServedText",
        "proposal_of",
    ],
    "capture.frameworks.pydantic_ai": [
        "CAPTURED_WITH",
        "REQUEST_FORM",
        "JournalCapability",
        "proposal_of",
    ],
    "capture.proxy": [
        "CAPTURED_WITH",
        "CHAT",
        "MESSAGES",
        "METADATA_PREFIX",
        "RESPONSES",
        "SESSION_HEADER",
        "WIRES",
        "Conversations",
        "Exchange",
        "ProxyServer",
        "ProxySession",
        "Recording",
        "Refusal",
        "SessionSource",
        "SseEvent",
        "SseReader",
        "StartFields",
        "Turn",
        "Upstream",
        "UpstreamError",
        "Wire",
        "proxy_metadata",
    ],
    "replay.proxy": [
        "ProxyReplay",
        "ProxyVerdict",
        "ReplayingProxy",
        "proxy_sessions",
        "replaying_proxy",
        "verdict_line",
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
        "EVERY_TOOL",
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
        "ReplayOptions",
        "ReplayResult",
        "Replayer",
        "Served",
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
        "known_tools",
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
        "checked_live",
        "compared_requests",
        "first_requests",
        "framework_live_model",
        "recorded_deps",
    ],
    "tui": [],
    "tui.share": ["CHUNK", "SharedRuns", "gather", "page_data", "write_page"],
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


SHIM = "journal/capture/__init__.py"
"""The deprecated ``journal.capture`` path (until the next release): the one module of
`journal` that reaches into `capture`, only when a moved name is asked for."""

MAY_IMPORT: dict[str, frozenset[str]] = {
    "journal": frozenset(),
    "capture": frozenset({"journal"}),
    "agentloop": frozenset({"journal"}),
    "replay": frozenset({"journal", "capture", "agentloop"}),
    "tui": frozenset({"journal", "capture", "agentloop", "replay"}),
}
"""The arrows: which packages each package may import. Never: journal -> anything,
capture <-> agentloop, capture -> replay, anything -> tui."""


def _imported(node: ast.AST) -> list[tuple[str, str]]:
    """``(module, name)`` pairs a node imports: ``from X import a``, ``import X``, and
    ``importlib.import_module("X")`` with a literal name."""
    if isinstance(node, ast.ImportFrom) and not node.level and node.module is not None:
        return [(node.module, alias.name) for alias in node.names]
    if isinstance(node, ast.Import):
        return [(alias.name, "") for alias in node.names]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and not node.args[0].value.startswith(".")
    ):
        return [(node.args[0].value, "")]
    return []


def _cross_package_imports() -> list[tuple[str, int, str, str]]:
    """Every import in the packages of a module that belongs to another package."""
    found = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = str(path.relative_to(ROOT))
            for node in ast.walk(tree):
                for module, name in _imported(node):
                    if module.split(".")[0] in TOP and module.split(".")[0] != top:
                        found.append((where, getattr(node, "lineno", 0), module, name))
    return found


def test_packages_import_each_other_only_through_their_public_names() -> None:
    """A module imports from another package only names a package (not a module) exports."""
    imports = _cross_package_imports()
    assert imports, "the scan found nothing: it is broken"
    wrong = [
        f"{where}:{line}: from {module} import {name}"
        for where, line, module, name in imports
        if name and (module not in PUBLIC or name not in PUBLIC[module])
    ]
    assert wrong == []


def test_imports_point_one_way() -> None:
    """journal <- capture, journal <- agentloop, all three <- replay <- tui; nothing else."""
    backwards = [
        f"{where}:{line}: {module} ({name or 'module'})"
        for where, line, module, name in _cross_package_imports()
        if module.split(".")[0] not in MAY_IMPORT[where.split("/")[0]] and where != SHIM
    ]
    assert backwards == []


def test_the_shim_is_the_only_exception_and_reaches_capture_alone() -> None:
    reached = {
        module.split(".")[0] for where, _, module, _ in _cross_package_imports() if where == SHIM
    }
    assert reached == {"capture"}


def test_the_scan_sees_each_kind_of_import() -> None:
    tree = ast.parse(
        "from capture import Capture\nimport replay.fork\n"
        "importlib.import_module('tui.cli')\nimport_module('.x')\n"
    )
    found = [pair for node in ast.walk(tree) for pair in _imported(node)]
    assert sorted(found) == [("capture", "Capture"), ("replay.fork", ""), ("tui.cli", "")]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path, name: str) -> set[str]:
    """The package modules ``name`` imports at module level, ``if TYPE_CHECKING:`` included."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.stmt] = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If):  # if TYPE_CHECKING: (and other module-level ifs)
            nodes += node.body + node.orelse
        elif isinstance(node, ast.Try):
            nodes += node.body
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_no_module_level_import_cycle_even_for_type_checking() -> None:
    """A cycle held apart only by ``if TYPE_CHECKING:`` is a boundary in the wrong place."""
    paths = {_module_name(path): path for top in TOP for path in sorted((ROOT / top).rglob("*.py"))}
    graph = {
        name: {m for m in _module_level_imports(path, name) if m in paths and m != name}
        for name, path in paths.items()
    }
    # a module's own package __init__ imports it: that edge is the package, not a cycle
    graph = {
        name: {m for m in targets if not name.startswith(f"{m}.")}
        for name, targets in graph.items()
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []
