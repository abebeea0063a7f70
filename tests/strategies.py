"""Hypothesis strategies for canonical JSON, every event type and whole plausible sessions.

Reused by the codec, fold, store, JSONL and (later) replay tests. Everything generated here
is valid: it passes the event models and the canonical rules, so a failure on it is a bug.

* `json_values` / `json_objects`: canonical JSON (int64 integers, finite floats, any text);
* `EVENT_STRATEGIES`: one strategy per event type (a test checks it covers `EVENT_TYPES`);
* `events`: any single event except ``session_started``; `session_started_events`;
* `sessions()`: a whole session as a list of events that a real loop could have written
  (seq 0 ``session_started``, turns of proposals and their outcomes, breakers and
  fallbacks, repairs, compactions, each turn answered or the session halted or cut off);
  `sessions_with_status()` also gives the status the fold must derive;
* `timestamps`: canonical ``ts`` strings; `session_ids`: valid session ids.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

from hypothesis import strategies as st

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    Guardrails,
    ModelCallFailed,
    RepairApplied,
    SessionStarted,
    ToolCall,
    ToolSpec,
    Usage,
    UserInput,
    VerificationFailed,
)
from journal.canonical import INT64_MAX, INT64_MIN, format_ts
from journal.events import EventModel, FailureKind, RepairLevel, VerificationStage

__all__ = [
    "EVENT_STRATEGIES",
    "HALT_RULES",
    "agent_configs",
    "events",
    "json_objects",
    "json_scalars",
    "json_trees",
    "json_values",
    "names",
    "session_ids",
    "session_started_events",
    "sessions",
    "sessions_with_status",
    "texts",
    "timestamps",
    "tool_calls",
]

HALT_RULES = (
    "step_limit",
    "repeat",
    "consecutive_failures",
    "identical_failures",
    "empty_reply",
    "storm",
    "circuit_open",
    "error",
)

texts = st.text(max_size=40)
"""Any text: unicode, control characters and terminal escapes included (never surrogates)."""

names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
"""Tool names, call ids and other identifiers."""

session_ids = st.from_regex(r"[A-Za-z0-9_.:\-]{1,128}", fullmatch=True)
"""Valid session ids: 1 to 128 letters, digits and ``-_.:``."""

hashes = st.from_regex(r"[0-9a-f]{64}", fullmatch=True)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
non_negative_floats = st.floats(min_value=0, max_value=1e9, allow_nan=False)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | finite_floats
    | texts
)
"""Canonical JSON scalars: null, booleans, int64 integers, finite floats, strings."""


def json_trees(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Arrays and objects of ``scalars``, nested a few levels."""
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=12,
    )


json_values = json_trees(json_scalars)
"""Any canonical JSON value, nested a few levels."""

json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
"""A canonical JSON object (tool arguments, metadata, settings)."""

timestamps = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
).map(format_ts)
"""Canonical ``ts`` strings (RFC 3339 UTC with microseconds, years 0001 to 9999)."""


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


guardrails = st.builds(
    Guardrails,
    max_steps=st.integers(1, 50),
    max_repeats=st.integers(1, 10),
    max_consecutive_failures=st.integers(1, 10),
    breaker_threshold=st.integers(1, 10),
    repair_retries=st.integers(0, 5),
    storm_window=st.integers(2, 20),
    max_parallel=st.integers(1, 16),
    serial=st.booleans(),
    tool_timeout_s=st.floats(min_value=0.001, max_value=600),
    flatten_leaves=st.integers(1, 100),
    flatten_depth=st.integers(1, 10),
    compact_result_tokens=st.integers(1, 100_000),
    compact_summary_tokens=st.integers(1, 10_000),
    compact_early=st.floats(min_value=0.01, max_value=1),
    compact_urgent=st.floats(min_value=0.01, max_value=1),
    max_identical_failures=_optional(st.integers(1, 10)),
    empty_reply_retries=_optional(st.integers(0, 5)),
    max_result_bytes=_optional(st.integers(1024, 10**9)),
)

tool_specs = st.builds(
    ToolSpec,
    name=names,
    description=texts,
    parameters=json_objects,
    schema_hash=hashes | st.just(""),
    parallel_safe=st.booleans(),
    timeout_s=_optional(st.floats(min_value=0.001, max_value=600)),
    fallback=_optional(names),
)

agent_configs = st.builds(
    AgentConfig, guardrails=guardrails, tools=st.lists(tool_specs, max_size=3)
)

tool_calls = st.builds(ToolCall, call_id=names, tool=names, args=json_objects | texts)
"""A call as the model emitted it: object args, or the raw string when not valid JSON."""

usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**7),
    output_tokens=st.integers(0, 10**7),
    cached_tokens=st.integers(0, 10**7),
)

session_started_events = st.builds(
    SessionStarted,
    agent=_optional(st.from_regex(r"[a-z_.]{1,12}:[a-z_]{1,12}", fullmatch=True)),
    config=agent_configs,
    system_prompt=texts,
    system_prompt_hash=hashes | st.just(""),
    model=_optional(texts),
    model_settings=json_objects,
    client_settings=_optional(json_objects),
    code_version=_optional(texts),
    metadata=json_objects,
    replay_of=_optional(session_ids),
    forked_from=_optional(session_ids),
    fork_seq=_optional(st.integers(0, 10**6)),
)

EVENT_STRATEGIES: dict[str, st.SearchStrategy[EventModel]] = {
    "session_started": session_started_events,
    "user_input": st.builds(UserInput, text=texts),
    "action_proposed": st.builds(
        ActionProposed,
        calls=st.lists(tool_calls, max_size=3),
        text=_optional(texts),
        reasoning=_optional(texts),
        model=_optional(texts),
        usage=usages,
        latency_ms=_optional(non_negative_floats),
        cost=_optional(st.floats(min_value=0, max_value=100)),
    ),
    "model_call_failed": st.builds(
        ModelCallFailed,
        message=texts,
        kind=st.sampled_from(get_args(FailureKind)),
        status_code=_optional(st.integers(100, 599)),
        model=_optional(texts),
        latency_ms=_optional(non_negative_floats),
        request=_optional(json_objects),
        error=_optional(json_objects),
        response=_optional(st.lists(json_objects, max_size=3)),
    ),
    "repair_applied": st.builds(
        RepairApplied,
        level=st.sampled_from(get_args(RepairLevel)),
        detail=texts,
        call_id=_optional(names),
        tool=_optional(names),
        before=json_values,
        after=json_values,
    ),
    "verification_failed": st.builds(
        VerificationFailed,
        call_id=names,
        tool=names,
        stage=st.sampled_from(get_args(VerificationStage)),
        message=texts,
    ),
    "action_committed": st.builds(
        ActionCommitted,
        call_id=names,
        tool=names,
        args=json_objects,
        result=json_values,
        duration_ms=_optional(non_negative_floats),
    ),
    "action_failed": st.builds(
        ActionFailed,
        call_id=names,
        tool=names,
        kind=st.sampled_from(get_args(FailureKind)),
        message=texts,
        args=json_objects,
        duration_ms=_optional(non_negative_floats),
        abandoned=st.booleans(),
    ),
    "circuit_opened": st.builds(CircuitOpened, tool=names, failures=st.integers(1, 100)),
    "fallback_invoked": st.builds(
        FallbackInvoked, tool=names, fallback=names, call_id=_optional(names)
    ),
    "context_compacted": st.builds(
        ContextCompacted,
        from_seq=st.integers(0, 10**6),
        to_seq=st.integers(0, 10**6),
        summary=texts,
        tokens_before=_optional(st.integers(0, 10**7)),
        tokens_after=_optional(st.integers(0, 10**7)),
    ),
    "agent_completed": st.builds(AgentCompleted, answer=texts),
    "agent_halted": st.builds(AgentHalted, rule=st.sampled_from(HALT_RULES) | names, reason=texts),
}
"""One strategy per event type, keyed by type name."""

events = st.one_of(
    [strategy for name, strategy in EVENT_STRATEGIES.items() if name != "session_started"]
)
"""Any event that may follow seq 0."""


_CALL_STAGES = [stage for stage in get_args(VerificationStage) if stage != "empty_reply"]
"""The stages that reject a call (``empty_reply`` rejects a reply without one)."""


def _call_outcome(
    draw: st.DrawFn, call: ToolCall, fallbacks: dict[str, str], failures: dict[str, int]
) -> list[EventModel]:
    """The events a gate and executor could write for one proposed call."""
    args = call.args if isinstance(call.args, dict) else {}
    outcome = draw(st.sampled_from(["commit", "commit", "business", "fault", "reject", "repair"]))
    if outcome == "commit":
        return [
            ActionCommitted(
                call_id=call.call_id,
                tool=call.tool,
                args=args,
                result=draw(json_values),
                duration_ms=draw(non_negative_floats),
            )
        ]
    if outcome == "reject":
        stage = draw(st.sampled_from(_CALL_STAGES))
        return [VerificationFailed(call_id=call.call_id, tool=call.tool, stage=stage, message="no")]
    if outcome == "repair":
        level = draw(st.sampled_from(get_args(RepairLevel)))
        repaired = ActionCommitted(call_id=call.call_id, tool=call.tool, args=args, result=None)
        return [
            RepairApplied(level=level, detail="fixed", call_id=call.call_id, tool=call.tool),
            repaired,
        ]
    if outcome == "business":
        kind: FailureKind = "business"
    else:
        kind = draw(st.sampled_from(["infrastructure", "timeout"]))
    written: list[EventModel] = [
        ActionFailed(call_id=call.call_id, tool=call.tool, kind=kind, message="it broke", args=args)
    ]
    if kind != "business":
        failures[call.tool] = failures.get(call.tool, 0) + 1
        if failures[call.tool] == 3:
            written.append(CircuitOpened(tool=call.tool, failures=3))
            if call.tool in fallbacks:
                written.append(
                    FallbackInvoked(
                        tool=call.tool, fallback=fallbacks[call.tool], call_id=call.call_id
                    )
                )
    return written


@st.composite
def sessions_with_status(
    draw: st.DrawFn, *, max_turns: int = 3, max_proposals: int = 3
) -> tuple[list[EventModel], str]:
    """A plausible session and the status its fold must show.

    The last turn is answered (``completed``), halted by a rule (``halted``, or
    ``failed`` for rule ``error``) or cut off as by a crash (``running``).
    """
    tools = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    fallbacks = {tool: f"{tool}_backup" for tool in tools if draw(st.booleans())}
    specs = [
        ToolSpec(name=tool, parallel_safe=draw(st.booleans()), fallback=fallbacks.get(tool))
        for tool in tools
    ]
    start = draw(session_started_events)
    start = start.model_copy(update={"config": AgentConfig(tools=specs)})
    written: list[EventModel] = [start]
    if draw(st.booleans()):
        written.append(AgentCompleted(answer=draw(texts)))  # a greeting before any input
    status = "completed" if len(written) > 1 else "running"
    failures: dict[str, int] = {}
    for _turn in range(draw(st.integers(0, max_turns))):
        written.append(UserInput(text=draw(texts)))
        status = "running"
        for _proposal in range(draw(st.integers(0, max_proposals))):
            if draw(st.integers(0, 4)) == 0:  # a failed call, retried
                written.append(draw(EVENT_STRATEGIES["model_call_failed"]))
            calls = draw(
                st.lists(
                    st.builds(
                        ToolCall, call_id=names, tool=st.sampled_from(tools), args=json_objects
                    ),
                    max_size=3,
                )
            )
            written.append(
                draw(EVENT_STRATEGIES["action_proposed"]).model_copy(update={"calls": calls})
            )
            for call in calls:
                written.extend(_call_outcome(draw, call, fallbacks, failures))
            if not calls and draw(st.integers(0, 3)) == 0:  # an empty reply, sent back
                written.append(
                    VerificationFailed(call_id="", tool="", stage="empty_reply", message="empty")
                )
            if draw(st.integers(0, 4)) == 0:
                written.append(ContextCompacted(from_seq=1, to_seq=len(written) - 1, summary="s"))
        ending = draw(st.sampled_from(["completed", "completed", "halted", "failed", "cut"]))
        if ending == "completed":
            written.append(AgentCompleted(answer=draw(texts)))
            status = "completed"
            continue
        if ending != "cut":
            rule = "error" if ending == "failed" else draw(st.sampled_from(HALT_RULES[:-1]))
            written.append(AgentHalted(rule=rule, reason=draw(texts)))
            status = ending
        break
    return written, status


def sessions(*, max_turns: int = 3, max_proposals: int = 3) -> st.SearchStrategy[list[EventModel]]:
    """A plausible session as a list of events (seq 0 is ``session_started``)."""
    return sessions_with_status(max_turns=max_turns, max_proposals=max_proposals).map(
        lambda pair: pair[0]
    )
