"""The fold: what a session's events mean, as one pure, JSON-serialisable SessionState."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import (
    EVENT_TYPES,
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
    RecordedEvent,
    RepairApplied,
    SessionStarted,
    SessionState,
    ToolCall,
    Usage,
    UserInput,
    VerificationFailed,
    apply,
    call_key,
    canonical_bytes,
    decode,
    fold,
    format_ts,
)
from journal.events import EventModel
from journal.fold import _HANDLERS, IDENTICAL_FAILURES_KEPT

from .helpers import REFUND_MESSAGE, T0, sample_session, stored
from .strategies import sessions, sessions_with_status

START = SessionStarted(agent="app:build")
REFUSED = call_key("refund", {"amount": 150, "order": 7})  # the call sample_session's guard refuses
ASK = UserInput(text="go")
DONE = AgentCompleted(answer="done")


def recorded(events: list[EventModel], session_id: str = "s") -> list[RecordedEvent]:
    """The events as read back from a journal: seq from 0, one millisecond apart."""
    return [
        RecordedEvent(
            session_id=session_id,
            seq=seq,
            ts=format_ts(T0 + timedelta(milliseconds=seq)),
            v=1,
            hash="0" * 64,
            event=event,  # type: ignore[arg-type]
        )
        for seq, event in enumerate(events)
    ]


def ts(seq: int) -> str:
    return format_ts(T0 + timedelta(milliseconds=seq))


def committed(tool: str = "t", args: dict[str, Any] | None = None, call_id: str = "c") -> Any:
    return ActionCommitted(call_id=call_id, tool=tool, args=args or {}, result="ok")


def failed(
    kind: Any = "business", tool: str = "t", message: str = "no", args: dict[str, Any] | None = None
) -> ActionFailed:
    return ActionFailed(call_id="c", tool=tool, kind=kind, message=message, args=args or {})


def rejected(stage: Any = "guard", tool: str = "t", message: str = "no") -> VerificationFailed:
    return VerificationFailed(call_id="c", tool=tool, stage=stage, message=message)


# -- whole states ------------------------------------------------------------------------


def test_fold_of_a_whole_session_is_exactly_this_state() -> None:
    events = sample_session()
    state = fold(recorded(events))
    assert state == SessionState(
        session_id="s",
        agent="tests.agents:build",
        model="model-1",
        guardrails=Guardrails(storm_window=3),
        tools=["search", "refund"],
        status="failed",
        events=14,
        last_seq=13,
        started=ts(0),
        ended=ts(13),
        last_ts=ts(13),
        turns=2,
        turn_steps=0,
        steps=3,
        committed=1,
        failures=2,
        rejections=1,
        consecutive_failures=0,
        tool_failures={"refund": 1},
        open_breakers=["refund"],
        fallbacks=1,
        repeats={},
        identical_failures={REFUSED: (f"guard: {REFUND_MESSAGE}", 1)},
        repairs=1,
        compactions=1,
        pending_calls=[],
        model_calls=2,
        tokens_in=220,
        tokens_out=30,
        tokens_cached=150,
        cost=0.75,
        latency_ms=200.0,
        last_error="ValueError: boom",
        answer="Refund queued for manual review.",
        halt_rule="error",
        halt_reason="ValueError: boom",
    )


def test_state_after_the_first_turn_is_exactly_this_state() -> None:
    state = fold(sample_session()[:12])  # bare events: seqs counted, no timestamps
    search = call_key("search", {"q": "order 7"})
    assert state == SessionState(
        agent="tests.agents:build",
        model="model-1",
        guardrails=Guardrails(storm_window=3),
        tools=["search", "refund"],
        status="completed",
        events=12,
        last_seq=11,
        turns=1,
        turn_steps=3,
        steps=3,
        committed=1,
        failures=2,
        rejections=1,
        consecutive_failures=0,  # the breaker took over the streak
        tool_failures={"refund": 1},
        open_breakers=["refund"],
        fallbacks=1,
        repeats={search: 1},
        identical_failures={REFUSED: (f"guard: {REFUND_MESSAGE}", 1)},
        repairs=1,
        compactions=1,
        model_calls=2,
        tokens_in=220,
        tokens_out=30,
        tokens_cached=150,
        cost=0.75,
        latency_ms=200.0,
        last_error="payments API unreachable",
        answer="Refund queued for manual review.",
    )
    assert (state.cache_hit_rate, state.tool_success_rate) == (150 / 220, 1 / 3)
    assert not state.ended_session


# -- one event at a time: exactly these fields change ------------------------------------


BASE = fold([START, ASK])


@pytest.mark.parametrize(
    ("event", "changes"),
    [
        (
            ActionProposed(
                calls=[ToolCall(call_id="c", tool="t")],
                usage=Usage(input_tokens=10, output_tokens=5, cached_tokens=4),
                cost=0.5,
                latency_ms=30.0,
            ),
            {
                "model_calls": 1,
                "pending_calls": [ToolCall(call_id="c", tool="t")],
                "tokens_in": 10,
                "tokens_out": 5,
                "tokens_cached": 4,
                "cost": 0.5,
                "latency_ms": 30.0,
            },
        ),
        (ActionProposed(text="thinking"), {"model_calls": 1}),
        (
            committed(args={"a": 1}),
            {"steps": 1, "turn_steps": 1, "committed": 1, "repeats": {call_key("t", {"a": 1}): 1}},
        ),
        (
            failed("business"),
            {
                "steps": 1,
                "turn_steps": 1,
                "failures": 1,
                "consecutive_failures": 1,
                "last_error": "no",
                "identical_failures": {call_key("t", {}): ("business: no", 1)},
            },
        ),
        (
            failed("timeout"),
            {
                "steps": 1,
                "turn_steps": 1,
                "failures": 1,
                "consecutive_failures": 1,
                "last_error": "no",
                "tool_failures": {"t": 1},
            },
        ),
        (
            rejected("guard"),
            {
                "steps": 1,
                "turn_steps": 1,
                "failures": 1,
                "rejections": 1,
                "consecutive_failures": 1,
                "last_error": "no",
            },
        ),
        (
            rejected("step_limit"),
            {"failures": 1, "rejections": 1, "consecutive_failures": 1, "last_error": "no"},
        ),
        (
            VerificationFailed(call_id="", tool="", stage="empty_reply", message="no"),
            {
                "failures": 1,
                "rejections": 1,
                "consecutive_failures": 1,
                "last_error": "no",
                "empty_replies": 1,
            },
        ),
        (
            rejected("schema"),
            {
                "steps": 1,
                "turn_steps": 1,
                "failures": 1,
                "rejections": 1,
                "consecutive_failures": 1,
                "last_error": "no",
                "schema_retries": 1,
            },
        ),
        (RepairApplied(level="storm", detail="x"), {"repairs": 1, "storms": 1}),
        (RepairApplied(level="flatten", detail="x"), {"repairs": 1}),
        (CircuitOpened(tool="t", failures=3), {"open_breakers": ["t"]}),
        (FallbackInvoked(tool="t", fallback="u"), {"fallbacks": 1}),
        (ContextCompacted(from_seq=1, to_seq=1, summary="s"), {"compactions": 1}),
        (DONE, {"status": "completed", "answer": "done"}),
        (
            AgentHalted(rule="repeat", reason="same call thrice"),
            {
                "status": "halted",
                "halt_rule": "repeat",
                "halt_reason": "same call thrice",
                "last_error": "same call thrice",
            },
        ),
        (
            AgentHalted(rule="error", reason="boom"),
            {"status": "failed", "halt_rule": "error", "halt_reason": "boom", "last_error": "boom"},
        ),
        (UserInput(text="more"), {"turns": 2}),
    ],
    ids=lambda value: getattr(value, "type", None),
)
def test_apply_changes_exactly_these_fields(event: Any, changes: dict[str, Any]) -> None:
    assert apply(BASE, event) == BASE.model_copy(update={"events": 3, "last_seq": 2, **changes})


def test_apply_is_pure() -> None:
    state = fold([START, ASK, ActionProposed(calls=[ToolCall(call_id="c", tool="t")])])
    before = state.model_dump()
    for event in [committed(args={"a": 1}), failed("timeout"), CircuitOpened(tool="t", failures=3)]:
        after = apply(state, event)
        assert after is not state
        assert state.model_dump() == before


def test_every_event_type_has_a_fold_rule_and_subclasses_fold_like_their_base() -> None:
    assert set(_HANDLERS) == set(EVENT_TYPES.values())

    class Answer(AgentCompleted):
        pass

    assert apply(BASE, Answer(answer="x")) == apply(BASE, AgentCompleted(answer="x"))
    with pytest.raises(TypeError, match="not an event: Usage"):
        apply(BASE, Usage())  # type: ignore[arg-type]


# -- status and turns --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "status", "turns", "ended_at"),
    [
        ([START], "running", 0, None),
        ([START, ASK], "running", 1, None),
        ([START, ASK, ActionProposed(), committed()], "running", 1, None),
        ([START, ASK, DONE], "completed", 1, 2),
        ([START, DONE], "completed", 0, 1),
        ([START, DONE, ASK], "running", 1, None),
        ([START, ASK, DONE, ASK], "running", 2, None),
        ([START, ASK, DONE, ASK, DONE], "completed", 2, 4),
        ([START, ASK, AgentHalted(rule="step_limit", reason="10 steps")], "halted", 1, 2),
        ([START, ASK, DONE, ASK, AgentHalted(rule="error", reason="boom")], "failed", 2, 4),
        ([START, ASK, AgentHalted(rule="repeat", reason="r"), ASK], "halted", 2, 2),
    ],
)
def test_status_follows_turns_and_endings(
    events: list[EventModel], status: str, turns: int, ended_at: int | None
) -> None:
    state = fold(recorded(events))
    assert (state.status, state.turns) == (status, turns)
    assert state.ended == (None if ended_at is None else ts(ended_at))
    assert state.ended_session == (status in ("halted", "failed"))


def test_a_new_turn_resets_the_turn_counters_but_not_the_totals() -> None:
    storm = RepairApplied(level="storm", detail="x")
    empty = VerificationFailed(call_id="", tool="", stage="empty_reply", message="say it")
    first = [START, ASK, committed(), failed(), rejected("schema"), storm, empty]
    state = fold([*first, UserInput(text="again")])
    assert (state.turn_steps, state.repeats, state.storms) == (0, {}, 0)
    assert (state.consecutive_failures, state.schema_retries, state.empty_replies) == (0, 0, 0)
    assert (state.steps, state.failures, state.repairs) == (3, 3, 1)
    assert state.identical_failures == {call_key("t", {}): ("business: no", 1)}  # not per turn


# -- counters ----------------------------------------------------------------------------


def test_consecutive_failures_reset_on_commit_turn_and_breaker() -> None:
    events: list[EventModel] = [START, ASK]
    seen = []
    for event in [
        failed(),
        rejected(),
        failed("infrastructure"),
        committed(),
        failed(),
        CircuitOpened(tool="t", failures=3),
        failed(),
        UserInput(text="next"),
    ]:
        events.append(event)
        seen.append(fold(events).consecutive_failures)
    assert seen == [1, 2, 3, 0, 1, 0, 1, 0]


def test_tool_failures_count_infrastructure_and_timeouts_per_tool_only() -> None:
    state = fold(
        [
            START,
            ASK,
            failed("business", tool="a"),
            failed("infrastructure", tool="a"),
            failed("timeout", tool="a"),
            failed("timeout", tool="b"),
            rejected("guard", tool="b"),
        ]
    )
    assert state.tool_failures == {"a": 2, "b": 1}
    assert state.failures == 5


def test_breakers_open_once_per_tool_in_sorted_order() -> None:
    opened = [CircuitOpened(tool=tool, failures=3) for tool in ("b", "a", "b")]
    assert fold([START, *opened]).open_breakers == ["a", "b"]


def test_repeats_count_committed_calls_by_tool_and_canonical_args() -> None:
    state = fold(
        [
            START,
            ASK,
            committed("t", {"a": 1, "b": [1, 2]}),
            committed("t", {"b": [1, 2], "a": 1}),
            committed("t", {"a": 2, "b": [1, 2]}),
            committed("u", {"a": 1, "b": [1, 2]}),
        ]
    )
    args = {"a": 1, "b": [1, 2]}
    assert state.repeats == {
        call_key("t", args): 2,
        call_key("t", {"a": 2, "b": [1, 2]}): 1,
        call_key("u", args): 1,
    }


def _asked(tool: str, args: dict[str, Any] | str) -> ActionProposed:
    return ActionProposed(calls=[ToolCall(call_id="c", tool=tool, args=args)])


def test_identical_failures_count_one_call_failing_the_same_way_across_turns() -> None:
    a, b = {"q": "a"}, {"q": "b"}
    key_a, key_b = call_key("t", a), call_key("t", b)
    steps: list[tuple[EventModel, dict[str, tuple[str, int]]]] = [
        (failed(message="gone", args=a), {key_a: ("business: gone", 1)}),
        (UserInput(text="again"), {key_a: ("business: gone", 1)}),  # a new turn keeps it
        (failed(message="gone", args=a), {key_a: ("business: gone", 2)}),
        (
            failed(message="gone", args=b),
            {key_a: ("business: gone", 2), key_b: ("business: gone", 1)},
        ),
        (
            failed(message="moved", args=a),
            {key_a: ("business: moved", 1), key_b: ("business: gone", 1)},
        ),
        (
            failed("infrastructure", args=a),
            {key_a: ("business: moved", 1), key_b: ("business: gone", 1)},
        ),
        (failed("timeout", args=a), {key_a: ("business: moved", 1), key_b: ("business: gone", 1)}),
        (committed(args=a), {key_b: ("business: gone", 1)}),  # a commit of the call clears it
        (_asked("t", b), {key_b: ("business: gone", 1)}),
        (rejected("guard", message="gone"), {key_b: ("guard: gone", 1)}),  # args as proposed
        (_asked("t", b), {key_b: ("guard: gone", 1)}),
        (rejected("guard", message="gone"), {key_b: ("guard: gone", 2)}),
        (_asked("t", b), {key_b: ("guard: gone", 2)}),
        (rejected("step_limit", message="gone"), {key_b: ("guard: gone", 2)}),  # not the call's
        (_asked("nope", "{bad"), {key_b: ("guard: gone", 2)}),
        (
            rejected("unknown_tool", tool="nope", message="no such tool"),
            {
                key_b: ("guard: gone", 2),
                call_key("nope", "{bad"): ("unknown_tool: no such tool", 1),
            },
        ),
    ]
    events: list[EventModel] = [START, ASK]
    for event, expected in steps:
        events.append(event)
        assert fold(events).identical_failures == expected, event


def test_identical_failures_keep_the_calls_that_failed_last() -> None:
    """Bounded in a long session: the call whose last failure is the oldest goes first."""
    calls = [{"q": str(n)} for n in range(IDENTICAL_FAILURES_KEPT + 1)]
    events: list[EventModel] = [START, ASK, failed(args=calls[0]), failed(args=calls[1])]
    events += [failed(args=args) for args in calls[2:-1]]
    events.append(failed(args=calls[0]))  # fails again: now the last to fail, at 2
    events.append(failed(args=calls[-1]))  # one too many: calls[1] is forgotten
    state = fold(events)
    stepped = SessionState()
    for event in events:
        stepped = apply(stepped, event)
    assert stepped == state
    assert len(state.identical_failures) == IDENTICAL_FAILURES_KEPT
    assert list(state.identical_failures)[-2:] == [
        call_key("t", calls[0]),
        call_key("t", calls[-1]),
    ]
    assert state.identical_failures[call_key("t", calls[0])] == ("business: no", 2)
    assert call_key("t", calls[1]) not in state.identical_failures


def test_a_v1_session_started_folds_with_the_settings_it_ran_with() -> None:
    old = decode(stored("session_started", 1, {}, seq=0))
    assert fold([old]).guardrails == Guardrails(
        max_identical_failures=None, empty_reply_retries=None, max_result_bytes=None
    )


def test_call_key_is_the_tool_and_a_sha256_prefix_of_the_canonical_args() -> None:
    digest = hashlib.sha256(b'{"a":1,"b":"\xc3\xa9"}').hexdigest()[:16]
    assert call_key("t", {"b": "é", "a": 1}) == f"t:{digest}"
    raw = '{"b": 1'  # args that were not valid JSON are hashed as the raw string
    assert call_key("t", raw) == f"t:{hashlib.sha256(raw.encode()).hexdigest()[:16]}"
    assert call_key("t", {}) == f"t:{hashlib.sha256(canonical_bytes({})).hexdigest()[:16]}"


def test_schema_retries_count_schema_rejections_in_a_row() -> None:
    events: list[EventModel] = [START, ASK]
    seen = []
    for event in [
        rejected("schema"),
        rejected("schema"),
        rejected("guard"),
        rejected("schema"),
        committed(),
    ]:
        events.append(event)
        seen.append(fold(events).schema_retries)
    assert seen == [1, 2, 0, 1, 0]


def test_steps_count_calls_per_turn_and_in_total() -> None:
    turn = [ASK, committed(), failed(), rejected("guard"), rejected("step_limit"), DONE]
    state = fold([START, *turn, *turn[:3]])
    assert (state.steps, state.turn_steps, state.committed) == (5, 2, 2)


def test_tokens_cost_and_latency_add_up() -> None:
    proposals = [
        ActionProposed(usage=Usage(input_tokens=100, output_tokens=7, cached_tokens=60), cost=0.1),
        ActionProposed(usage=Usage(input_tokens=50, output_tokens=3), latency_ms=12.5),
        ActionProposed(cost=0.2, latency_ms=0.5),
    ]
    state = fold([START, ASK, *proposals])
    assert (state.model_calls, state.tokens_in, state.tokens_out, state.tokens_cached) == (
        3,
        150,
        10,
        60,
    )
    assert state.cost == pytest.approx(0.3)
    assert state.latency_ms == 13.0


def test_pending_calls_are_answered_by_id_and_tool_even_when_ids_repeat() -> None:
    calls = [
        ToolCall(call_id="c", tool="a", args={"n": 1}),
        ToolCall(call_id="c", tool="b", args={"n": 2}),
        ToolCall(call_id="c", tool="a", args={"n": 3}),
    ]
    state = fold([START, ASK, ActionProposed(calls=calls), committed("b", call_id="c")])
    assert state.pending_calls == [calls[0], calls[2]]
    state = apply(state, failed(tool="a"))
    assert state.pending_calls == [calls[2]]
    assert apply(state, DONE).pending_calls == []


def test_session_started_records_config_and_lineage() -> None:
    start = SessionStarted(
        agent="app:build",
        model="m",
        config=AgentConfig(guardrails=Guardrails(max_steps=4, storm_window=7)),
        replay_of="orig",
        forked_from="parent",
        fork_seq=12,
    )
    state = fold(recorded([start], session_id="child"))
    assert state == SessionState(
        session_id="child",
        agent="app:build",
        model="m",
        guardrails=Guardrails(max_steps=4, storm_window=7),
        replay_of="orig",
        forked_from="parent",
        fork_seq=12,
        events=1,
        last_seq=0,
        started=ts(0),
        last_ts=ts(0),
    )


# -- properties --------------------------------------------------------------------------


@settings(max_examples=60)
@given(sessions_with_status())
def test_fold_is_repeated_apply_and_gives_the_status_of_the_ending(
    generated: tuple[list[EventModel], str],
) -> None:
    events, status = generated
    items = recorded(events)
    state = SessionState()
    for item in items:
        before = state.model_dump()
        next_state = apply(state, item)
        assert state.model_dump() == before
        state = next_state
    assert fold(items) == state
    assert state.status == status
    assert (state.events, state.last_seq) == (len(events), len(events) - 1)


@settings(max_examples=60)
@given(sessions(), st.data())
def test_fold_of_a_prefix_then_the_rest_equals_the_whole_fold(
    events: list[EventModel], data: st.DataObject
) -> None:
    items = recorded(events)
    cut = data.draw(st.integers(0, len(items)))
    prefix = fold(items[:cut])
    before = prefix.model_dump()
    assert fold(items[cut:], prefix) == fold(items)
    assert prefix.model_dump() == before  # folding on top of a state leaves it as it was


@settings(max_examples=60)
@given(sessions())
def test_folding_one_event_at_a_time_as_appends_do_equals_the_whole_fold(
    events: list[EventModel],
) -> None:
    state = SessionState()
    for item in recorded(events):
        before = state.model_dump()
        next_state = fold([item], state)
        assert state.model_dump() == before  # each append's state stays as it was
        state = next_state
    assert state == fold(recorded(events))


@settings(max_examples=60)
@given(sessions())
def test_state_is_json_serialisable_and_round_trips(events: list[EventModel]) -> None:
    state = fold(recorded(events))
    text = state.model_dump_json()
    assert SessionState.model_validate_json(text) == state
    assert canonical_bytes(state.model_dump(mode="json"))  # canonical JSON, no NaN or big ints
