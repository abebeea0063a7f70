"""The typed events of a session: one pydantic model per type, a union tagged by ``type``.

An event is the payload only. Where it sits in a session (session id, seq, timestamp,
schema version, hash) is the envelope, kept apart in `journal.records`.

The type names and the field names ``agent``, ``text``, ``calls``, ``call_id``, ``tool``,
``args``, ``level``, ``stage``, ``message``, ``result``, ``kind``, ``failures``,
``fallback``, ``answer``, ``rule`` and ``reason`` are a public contract: scripts and other
languages rely on them. `event_json_schema` gives the JSON Schema of the whole union.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from .canonical import INT64_MAX, INT64_MIN, loads_exact, loads_strict

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "PART_MODELS",
    "ActionCommitted",
    "ActionFailed",
    "ActionProposed",
    "AgentCompleted",
    "AgentConfig",
    "AgentEvent",
    "AgentHalted",
    "CircuitOpened",
    "ContextCompacted",
    "EventModel",
    "FailureKind",
    "FallbackInvoked",
    "Guardrails",
    "Json",
    "ModelCallFailed",
    "RepairApplied",
    "RepairLevel",
    "SessionStarted",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "UserInput",
    "VerificationFailed",
    "VerificationStage",
    "arguments_text",
    "event_json_schema",
    "json_stand_in",
    "ordered_text",
    "result_record",
]

RepairLevel = Literal["flatten", "scavenge", "truncation", "storm"]
VerificationStage = Literal[
    "unknown_tool",
    "schema",
    "guard",
    "repeat",
    "storm",
    "circuit_open",
    "step_limit",
    "empty_reply",
]
FailureKind = Literal["business", "infrastructure", "timeout"]

Json = Annotated[Any, WithJsonSchema({"description": "any JSON value"})]
"""A JSON value held as given (dicts, lists, str, int, float, bool, None).

Not checked when an event is built: pydantic's ``JsonValue`` walks and copies every nested
value on each validation and dump, which made it most of the cost of encoding and decoding
an event. Values are checked where they become bytes instead: `journal.records.encode`
rejects what is not canonical JSON, naming the path (``$.result.when: datetime is not a
JSON value``), and anything read back was parsed from JSON. An event keeps references to
the values it was given; do not change them after building it.
"""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventModel(_Frozen):
    """Base of every event model; ``VERSION`` is the schema version new events are written at."""

    VERSION: ClassVar[int] = 1


class Guardrails(_Frozen):
    """The limits the loop enforces; recorded in ``session_started`` so a replay uses the same."""

    max_steps: int = Field(10, ge=1, description="tool calls allowed per turn")
    max_repeats: int = Field(2, ge=1, description="identical tool + args calls allowed per turn")
    max_consecutive_failures: int = Field(3, ge=1, description="failures in a row before a halt")
    breaker_threshold: int = Field(
        3, ge=1, description="failures of one tool that open its breaker"
    )
    repair_retries: int = Field(2, ge=0, description="schema-hint retries inside one step")
    storm_window: int = Field(5, ge=2, description="recent calls checked for a storm")
    max_parallel: int = Field(3, ge=1, le=16, description="parallel-safe calls run at once")
    serial: bool = Field(False, description="force serial dispatch of every call")
    tool_timeout_s: float = Field(5.0, gt=0, description="default tool timeout in seconds")
    flatten_leaves: int = Field(10, ge=1, description="flatten a schema with more leaves than this")
    flatten_depth: int = Field(2, ge=1, description="flatten a schema nested deeper than this")
    compact_result_tokens: int = Field(3000, ge=1, description="compact results larger than this")
    compact_summary_tokens: int = Field(800, ge=1, description="longest summary of a result")
    compact_early: float = Field(0.4, gt=0, le=1, description="window share that starts compacting")
    compact_urgent: float = Field(0.8, gt=0, le=1, description="window share that forces it")
    compact_failure_run: int | None = Field(
        2,
        ge=2,
        description="proposals in a row whose calls failed the same way, folded into one "
        "summary before the next model call; None: never folded",
    )
    max_identical_failures: int | None = Field(
        3,
        ge=1,
        description="business failures or rejections of one call (tool + canonical args) "
        "with the same message, counted across turns, that halt the session; None: no limit",
    )
    empty_reply_retries: int | None = Field(
        2,
        ge=0,
        description="empty replies (no text, no calls) sent back to the model per turn "
        "before a halt; None: an empty reply is the turn's answer",
    )
    max_result_bytes: int | None = Field(
        1_048_576,
        ge=1024,
        description="a tool result larger than this (canonical JSON bytes) is recorded "
        "compacted; None: recorded whole",
    )
    model_retries: int = Field(
        0,
        ge=0,
        description="failed model calls in a row (a 429, a 503) asked again before the "
        "session halts; each failure is journaled (model_call_failed)",
    )


class ToolSpec(_Frozen):
    """A tool as the session saw it: its schema (and that schema's hash) and dispatch facts."""

    name: str
    description: str = ""
    parameters: dict[str, Json] = Field(default_factory=dict)
    schema_hash: str = ""
    parallel_safe: bool = False
    timeout_s: float | None = None
    fallback: str | None = None


class AgentConfig(_Frozen):
    """Everything about an agent that a faithful replay needs besides its code."""

    guardrails: Guardrails = Field(default_factory=Guardrails)
    tools: list[ToolSpec] = Field(default_factory=list)


class Usage(_Frozen):
    """Token counts of one model call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


class ToolCall(_Frozen):
    """One tool call as the model emitted it.

    ``args`` is the arguments as an object (the raw string when not valid JSON), what the
    journal reads, hashes and compares; ``arguments`` is their text exactly as the model
    wrote it (key order, number forms, spacing), which the canonical bytes of ``args``
    cannot keep. A tool is given `as_given`: what the text says, in its own order.
    """

    call_id: str
    tool: str
    args: dict[str, Json] | str = Field(default_factory=dict)
    arguments: str | None = Field(
        None, description="the arguments' text exactly as emitted (None: not recorded)"
    )

    def with_text(self) -> ToolCall:
        """This call with the text of its arguments (written from ``args`` when it has none)."""
        if self.arguments is not None:
            return self
        return self.model_copy(update={"arguments": arguments_text(self.args)})

    @property
    def as_given(self) -> dict[str, Any] | str:
        """The arguments as the model gave them.

        ``arguments`` parsed (keys in its order, numbers in its forms) when it is a JSON
        object; ``args`` otherwise.
        """
        if self.arguments is not None:
            try:
                value = loads_strict(self.arguments)
            except ValueError:
                return self.args
            if isinstance(value, dict):
                return value
        return self.args


def _as_given_of(make: Any) -> Callable[[Any], str]:
    """What encodes a JSON value as ``json.dumps(value, ensure_ascii=False)`` does.

    One C encoder made once (a JSON value is acyclic: it checks for no cycle), where
    ``JSONEncoder.encode`` makes one per call, a third of the cost of encoding a small
    object. Without C (``make`` None), the stdlib's encoder.
    """
    if make is None:
        return json.JSONEncoder(ensure_ascii=False).encode
    encoder = make(
        None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ": ", ", ",
        False, False, True,
    )  # fmt: skip

    def as_given(value: Any) -> str:
        return "".join(encoder(value, 0))

    return as_given


_as_given = _as_given_of(json.encoder.c_make_encoder)  # type: ignore[attr-defined]
"""``json.dumps(value, ensure_ascii=False)``, without making an encoder per call."""


def ordered_text(value: Any) -> str | None:
    """The JSON text of ``value`` in its own key order, or None when that order is sorted.

    None means the canonical bytes keep the order already.
    """
    order = _key_order(value)
    if order == "sorted":
        return None
    text = _as_given(value)
    if order == "unsorted":  # an object's keys (strings, all distinct) out of order
        return text
    return None if text == json.dumps(value, ensure_ascii=False, sort_keys=True) else text


_SCALARS = frozenset({str, int, float, bool})
_STR = frozenset({str})


def result_record(value: Any) -> tuple[Any, str | None]:
    """The ``result`` and ``result_text`` of an `ActionCommitted` for a tool's JSON value.

    ``value`` as produced by ``pydantic_core.to_jsonable_python``. What canonical JSON cannot
    hold is written as a string in ``result`` (NaN, ``"Infinity"``, ``"-Infinity"``, an
    integer past signed 64 bits as its digits), so a tool may return it and a change of it
    still shows; ``result_text`` then keeps the exact value (`ActionCommitted.given_result`
    hands it back as it was). Otherwise the text is `ordered_text`.
    """
    stood_in = json_stand_in(value)
    if stood_in is value:
        return value, ordered_text(value)
    return stood_in, _as_given(value)


def json_stand_in(value: Any) -> Any:
    """``value`` with what canonical JSON cannot hold written as strings (see `result_record`).

    ``value`` itself when it holds none.
    """
    stood_in = _stand_in(value)
    return value if stood_in is _UNCHANGED else stood_in


_UNCHANGED: Any = object()


def _stand_in(value: Any) -> Any:
    """``value`` with its non-finite floats and huge integers as strings, or `_UNCHANGED`."""
    kind = type(value)
    if kind is float and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if kind is int and not INT64_MIN <= value <= INT64_MAX:
        return str(value)
    if kind is dict:
        items = {key: _stand_in(item) for key, item in value.items()}
        if all(item is _UNCHANGED for item in items.values()):
            return _UNCHANGED
        return {key: value[key] if item is _UNCHANGED else item for key, item in items.items()}
    if kind is list:
        found = [_stand_in(item) for item in value]
        if all(item is _UNCHANGED for item in found):
            return _UNCHANGED
        return [old if new is _UNCHANGED else new for old, new in zip(value, found, strict=True)]
    return _UNCHANGED


def _key_order(value: Any) -> Literal["sorted", "unsorted", "unsure"]:
    """Whether the objects in ``value`` all have their string keys in sorted order.

    ``unsure`` (a key that is not a string: JSON text sorts it differently; a container
    that is not a dict or a list) leaves the decision to comparing the texts.
    """
    found: Literal["sorted", "unsorted", "unsure"] = "sorted"
    if type(value) is dict:
        keys = list(value)
        if not _STR.issuperset(map(type, keys)):
            return "unsure"
        if keys != sorted(keys):
            found = "unsorted"
        items: Any = value.values()
    elif type(value) is list:
        items = value
    else:  # a scalar has no keys; anything else (a tuple, a dict subclass) json decides
        return found if value is None or type(value) in _SCALARS else "unsure"
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            continue  # a scalar, sorted (as the call below would say, at a call's cost)
        inner = _key_order(item)
        if inner == "unsure":
            return inner
        if inner == "unsorted":
            found = inner
    return found


def arguments_text(args: Mapping[str, Any] | str) -> str:
    """The text of arguments given as an object (its keys in their order), or the text itself."""
    if isinstance(args, str):
        return args
    return _as_given(args)


class SessionStarted(EventModel):
    """Seq 0 of every session: who runs, with what configuration, prompt and model.

    v2 added the guardrails ``max_identical_failures``, ``empty_reply_retries`` and
    ``max_result_bytes``; a v1 record upcasts to the values that reproduce how it ran
    (`journal.upcasting.predated_settings`).

    v3 added the guardrail ``model_retries`` (a v2 record upcasts to 0, how it ran) and
    ``client_settings``: the model client's own settings that shape what a call
    does beyond its request (``max_retries``, ``timeout``), where a capture knows the
    client; None when it does not (the runtime, a hand-written loop). A v3 session also
    journals its failed model calls (``model_call_failed``). A v2 record upcasts with none,
    and a replay judges it by what it holds (`journal.upcasting.predates`).
    """

    VERSION: ClassVar[int] = 3
    type: Literal["session_started"] = "session_started"
    agent: str | None = Field(None, description="`module:factory` that builds the agent")
    config: AgentConfig = Field(default_factory=AgentConfig)
    system_prompt: str = ""
    system_prompt_hash: str = ""
    model: str | None = None
    model_settings: dict[str, Json] = Field(default_factory=dict)
    client_settings: dict[str, Json] | None = None
    code_version: str | None = None
    metadata: dict[str, Json] = Field(default_factory=dict)
    replay_of: str | None = None
    forked_from: str | None = None
    fork_seq: int | None = None


class UserInput(EventModel):
    """A user's message; it begins a turn."""

    type: Literal["user_input"] = "user_input"
    text: str


class ActionProposed(EventModel):
    """The model's whole output as received, recorded before anything acts on it.

    v2 keeps each call's argument text (`ToolCall.arguments`) and, for code captured at
    its model client, the ``request`` that got this output (its digest, the messages new
    since the session's previous request, its other parameters: see
    `capture.requests`) and the raw ``response`` the client parsed (a list of
    chunks for a stream). A v1 record upcasts with the arguments' text written from its
    ``args`` and no request or response.
    """

    VERSION: ClassVar[int] = 2
    type: Literal["action_proposed"] = "action_proposed"
    calls: list[ToolCall] = Field(default_factory=list)
    text: str | None = None
    reasoning: str | None = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float | None = None
    cost: float | None = None
    request: dict[str, Json] | None = None
    response: Json = None


class ModelCallFailed(EventModel):
    """A call of the model that raised instead of answering: a rate limit, a 500, a timeout.

    A fact of the run like any other: a failure a retry absorbed, or one the code caught and
    answered with a fallback, is recorded, so a replay raises it again from the same call
    and the code's own handling of it runs again (a changed retry or fallback diverges).
    ``request`` is the request as a captured client records it (as `ActionProposed`'s);
    ``error`` the exception (its type, MRO, args and attributes:
    `capture.exception_record`), so a replay raises it as its own type; ``message`` its
    one line, ``kind`` how `journal.failure_kind` classifies it, ``status_code`` the HTTP
    status an API error carries. ``response`` holds what a stream had sent before it
    broke (its chunk bodies; None for a call that was not a stream), so a replay yields
    those chunks, then raises.

    It is not a tool failure: it counts in `journal.SessionState.model_failures`, not in
    ``failures``, and the runtime's consecutive-failure limit does not see it.
    """

    type: Literal["model_call_failed"] = "model_call_failed"
    message: str
    kind: FailureKind = "infrastructure"
    status_code: int | None = None
    model: str | None = None
    latency_ms: float | None = None
    request: dict[str, Json] | None = None
    error: dict[str, Json] | None = None
    response: Json = None


class RepairApplied(EventModel):
    """The runtime repaired the model's output; ``detail`` says what changed."""

    type: Literal["repair_applied"] = "repair_applied"
    level: RepairLevel
    detail: str
    call_id: str | None = None
    tool: str | None = None
    before: Json = None
    after: Json = None


class VerificationFailed(EventModel):
    """The gate rejected a call; ``message`` tells the model what to change.

    Stage ``empty_reply`` rejects a reply with no text and no calls: there is no call, so
    ``call_id`` and ``tool`` are empty strings.
    """

    type: Literal["verification_failed"] = "verification_failed"
    call_id: str
    tool: str
    stage: VerificationStage
    message: str


class ActionCommitted(EventModel):
    """A tool ran with validated ``args`` and returned ``result``.

    ``result_text`` (v2): the result's JSON text in the order the tool gave its keys, kept
    when that order is not the sorted one of the canonical bytes, or when ``result`` holds
    strings for what canonical JSON cannot (NaN, Infinity, integers past 64 bits:
    `result_record`), so only then: code that serialises a result into its next model
    request sends, in a replay, what it sent. A tool is handed back `given_result`. A v1
    record upcasts without it.

    ``ran_after`` (v3): the order the code ran its calls in, where the loop tells it
    (captured code does): the positions, in the step's ``action_proposed`` calls, of the
    calls that had finished before this one started (for captured code: on the same thread
    and asyncio task, one after the other as the code wrote them); None when none had, or
    when the loop did not say (the runtime, a v2 record). Outcomes are journaled in the
    order the model proposed the calls, so this is what tells a run that sent the email
    before charging the card from one that charged first.
    """

    VERSION: ClassVar[int] = 3
    type: Literal["action_committed"] = "action_committed"
    call_id: str
    tool: str
    args: dict[str, Json] = Field(default_factory=dict)
    result: Json = None
    duration_ms: float | None = None
    result_text: str | None = None
    ran_after: list[int] | None = None

    @property
    def given_result(self) -> Any:
        """The result as the tool returned it.

        ``result_text`` parsed (its key order) when it was kept, else ``result``.
        """
        return self.result if self.result_text is None else loads_exact(self.result_text)


class ActionFailed(EventModel):
    """A tool ran and failed; business errors go back to the model, others count to the breaker.

    ``abandoned`` (v2): the runtime stopped waiting for the call at its timeout and never
    took its outcome. An async tool is cancelled there; a sync tool's thread cannot be
    stopped and may run on. Either way what the call did is unknown, and a late result is
    never journaled. A v1 record upcasts to False (not recorded then).

    ``error`` (v3): the exception a tool of captured code raised (its type, MRO, args and
    attributes: `capture.exception_record`), so a replay raises it again as its
    own type; None for failures that were not exceptions, and in a v2 record.

    ``ran_after`` (v4): as `ActionCommitted`'s: the calls of the step that had finished
    before this one started.
    """

    VERSION: ClassVar[int] = 4
    type: Literal["action_failed"] = "action_failed"
    call_id: str
    tool: str
    kind: FailureKind
    message: str
    args: dict[str, Json] = Field(default_factory=dict)
    duration_ms: float | None = None
    abandoned: bool = False
    error: dict[str, Json] | None = None
    ran_after: list[int] | None = None


class CircuitOpened(EventModel):
    """A tool's breaker tripped after ``failures`` failures; calls to it are now rejected."""

    type: Literal["circuit_opened"] = "circuit_opened"
    tool: str
    failures: int


class FallbackInvoked(EventModel):
    """A call to a tool with an open breaker was routed to its ``fallback``."""

    type: Literal["fallback_invoked"] = "fallback_invoked"
    tool: str
    fallback: str
    call_id: str | None = None


class ContextCompacted(EventModel):
    """Events ``from_seq``..``to_seq`` were summarised in the model's context."""

    type: Literal["context_compacted"] = "context_compacted"
    from_seq: int
    to_seq: int
    summary: str
    tokens_before: int | None = None
    tokens_after: int | None = None


class AgentCompleted(EventModel):
    """The reply that ends a turn; the session may take another user input."""

    type: Literal["agent_completed"] = "agent_completed"
    answer: str


class AgentHalted(EventModel):
    """A rule stopped the session; rule ``error`` marks a failed session.

    v2 keeps the ``error`` that ended a failed session, when an exception did (its type,
    MRO, args and attributes: `capture.exception_record`), so a replay can raise
    it again as its own type. A v1 record upcasts with none.
    """

    VERSION: ClassVar[int] = 2
    type: Literal["agent_halted"] = "agent_halted"
    rule: str
    reason: str
    error: dict[str, Json] | None = None


AgentEvent = Annotated[
    SessionStarted
    | UserInput
    | ActionProposed
    | ModelCallFailed
    | RepairApplied
    | VerificationFailed
    | ActionCommitted
    | ActionFailed
    | CircuitOpened
    | FallbackInvoked
    | ContextCompacted
    | AgentCompleted
    | AgentHalted,
    Field(discriminator="type"),
]
"""Any event; validate with `EVENT_ADAPTER`."""

EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
"""The one TypeAdapter of the union."""

EVENT_TYPES: dict[str, type[EventModel]] = {
    model.model_fields["type"].default: model
    for model in (
        SessionStarted,
        UserInput,
        ActionProposed,
        ModelCallFailed,
        RepairApplied,
        VerificationFailed,
        ActionCommitted,
        ActionFailed,
        CircuitOpened,
        FallbackInvoked,
        ContextCompacted,
        AgentCompleted,
        AgentHalted,
    )
}
"""Event model by type name."""

PART_MODELS: frozenset[type[BaseModel]] = frozenset(
    {Guardrails, ToolSpec, AgentConfig, Usage, ToolCall}
)
"""The models events are built of besides themselves; all of them (like the events) plain
data: no aliases, no custom serialisers, every field a JSON value or one of these."""


def event_json_schema() -> dict[str, Any]:
    """Return the JSON Schema of one stored record: the envelope beside any event's fields."""
    schema = EVENT_ADAPTER.json_schema(mode="serialization")
    envelope = {
        "session_id": {"type": "string", "pattern": "^[A-Za-z0-9_.:\\-]{1,128}$"},
        "seq": {"type": "integer", "minimum": 0},
        "ts": {
            "type": "string",
            "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{6}Z$",
            "description": "RFC 3339 UTC with microseconds",
        },
        "v": {"type": "integer", "minimum": 0, "description": "schema version of the type"},
        "hash": {
            "type": "string",
            "pattern": "^[0-9a-f]{64}$",
            "description": "sha256 hex of the previous hash (64 zeros at seq 0) + "
            "the canonical bytes of this record without hash",
        },
    }
    for definition in schema.get("$defs", {}).values():
        if "type" in definition.get("properties", {}):
            definition["properties"] = {**envelope, **definition["properties"]}
            definition["required"] = sorted(
                {*definition.get("required", []), "session_id", "seq", "ts", "type", "v"}
            )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "agent-journal event record",
        "description": "One line of an agent-journal JSONL file after its header: the "
        "envelope fields flat beside the event's fields, keys sorted, canonical JSON.",
        **schema,
    }
