"""The Verify phase: each gate stage, in its order, as a pure decision and as journaled events."""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Accepted, ModelResponse, Plan, Rejected, Tool, verify_call, verify_reply
from agentloop.examples.sloppy import SHIPMENT_SCHEMA
from agentloop.gate import EMPTY_REPLY
from journal import (
    ActionCommitted,
    ActionFailed,
    AgentCompleted,
    AgentConfig,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    Guardrails,
    Journal,
    RepairApplied,
    SessionStarted,
    SessionState,
    ToolCall,
    UserInput,
    VerificationFailed,
    fold,
)
from journal.events import EventModel

from .loop_helpers import (
    Amount,
    Args,
    Script,
    after_start,
    agent_of,
    answer,
    ok_tool,
    propose,
    proposed,
    run_events,
    run_turns,
    tc,
)

ASK = UserInput(text="go")
DONE = AgentCompleted(answer="done")
PATIENT = {"max_consecutive_failures": 9}
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
    "required": ["q"],
    "additionalProperties": False,
}


def state_of(tools: list[Tool], *events: EventModel, **rails: Any) -> SessionState:
    """The folded state of a session of these tools after ``events`` (one turn started)."""
    start = SessionStarted(
        config=AgentConfig(guardrails=Guardrails(**rails), tools=[t.spec() for t in tools])
    )
    return fold([start, ASK, *events])


def decide(tools: list[Tool], call: ToolCall, state: SessionState, plan: Plan | None = None) -> Any:
    return verify_call(call, tools={t.name: t for t in tools}, state=state, plan=plan or Plan())


def committed(tool: str, args: dict[str, Any], call_id: str = "c0") -> ActionCommitted:
    return ActionCommitted(call_id=call_id, tool=tool, args=args, result="ok")


def refuse_big(args: Amount, state: SessionState) -> str | None:
    return f"amount {args.amount} exceeds 100; propose at most 100" if args.amount > 100 else None


def pay_tool(**options: Any) -> Tool:
    return Tool("pay", lambda a: {"paid": a.amount}, "pay", Amount, guard=refuse_big, **options)


# -- pure decisions -------------------------------------------------------------------


def test_an_accepted_call_carries_the_validated_args() -> None:
    echo = ok_tool()
    decision = decide([echo], tc("echo", {"q": "hi"}), state_of([echo]))
    assert decision == Accepted(tc("echo", {"q": "hi"}), echo, Args(q="hi"), {"q": "hi"})


@pytest.mark.parametrize(
    ("spec", "label"),
    [
        (ECHO_SCHEMA, "json schema"),
        ({"type": "function", "function": {"name": "echo", "parameters": ECHO_SCHEMA}}, "openai"),
    ],
)
def test_json_schema_args_are_checked_by_jsonschema(spec: dict[str, Any], label: str) -> None:
    echo = Tool("echo", lambda a: a, "echo", spec)
    assert echo.parameters == ECHO_SCHEMA, label
    state = state_of([echo])
    good = decide([echo], tc("echo", {"q": "hi", "n": 2}), state)
    assert good == Accepted(tc("echo", {"q": "hi", "n": 2}), echo, {"q": "hi", "n": 2}, good.args)
    bad = decide([echo], tc("echo", {"n": -1, "x": 1}), state)
    assert bad == Rejected(
        tc("echo", {"n": -1, "x": 1}),
        "schema",
        "invalid arguments for echo: 'q' is a required property; Additional properties are "
        "not allowed ('x' was unexpected); n: -1 is less than the minimum of 0. "
        "Fix them to match: {q: string, n?: integer}",
    )


def test_tool_from_an_openai_spec() -> None:
    spec = {
        "type": "function",
        "function": {"name": "echo", "description": "says it", "parameters": ECHO_SCHEMA},
    }
    echo = Tool.from_openai(spec, lambda a: a, parallel_safe=True)
    assert (echo.name, echo.description, echo.parameters, echo.parallel_safe) == (
        "echo",
        "says it",
        ECHO_SCHEMA,
        True,
    )
    assert decide([echo], tc("echo", {"q": 1}), state_of([echo])) == Rejected(
        tc("echo", {"q": 1}),
        "schema",
        "invalid arguments for echo: q: 1 is not of type 'string'. "
        "Fix them to match: {q: string, n?: integer}",
    )


def test_pydantic_schema_errors_name_each_field() -> None:
    pay = pay_tool()
    decision = decide([pay], tc("pay", {"amount": "lots", "extra": 1}), state_of([pay]))
    assert decision == Rejected(
        tc("pay", {"amount": "lots", "extra": 1}),
        "schema",
        "invalid arguments for pay: amount: Input should be a valid integer, unable to parse "
        "string as an integer. Fix them to match: {amount: integer}",
    )


def test_args_that_are_not_json_are_a_schema_rejection() -> None:
    echo = ok_tool()
    assert decide([echo], tc("echo", "not json"), state_of([echo])) == Rejected(
        tc("echo", "not json"),
        "schema",
        "the arguments of echo are not valid JSON; send one complete JSON object matching "
        "its schema: {q: string}",
    )


def test_schema_rejections_in_a_row_end_in_repair_retries() -> None:
    echo = ok_tool()
    bad = VerificationFailed(call_id="c0", tool="echo", stage="schema", message="bad")
    assert decide([echo], tc("echo", {}), state_of([echo], bad)).halt is None
    assert decide([echo], tc("echo", {}), state_of([echo], bad, bad)).halt == "repair_retries"
    assert decide([echo], tc("echo", {}), state_of([echo], bad, repair_retries=0)).halt == (
        "repair_retries"
    )
    fixed = committed("echo", {"q": "x"})
    assert decide([echo], tc("echo", {}), state_of([echo], bad, bad, fixed)).halt is None


def test_the_guard_sees_validated_args_and_the_state() -> None:
    seen: list[tuple[Any, SessionState]] = []

    def guard(args: Amount, state: SessionState) -> str | None:
        seen.append((args, state))
        return None

    pay = Tool("pay", lambda a: a, "pay", Amount, guard=guard)
    state = state_of([pay])
    assert isinstance(decide([pay], tc("pay", {"amount": 5}), state), Accepted)
    assert seen == [(Amount(amount=5), state)]
    assert decide([pay_tool()], tc("pay", {"amount": 150}), state) == Rejected(
        tc("pay", {"amount": 150}), "guard", "amount 150 exceeds 100; propose at most 100"
    )


def test_a_raising_guard_propagates() -> None:
    def guard(args: Amount, state: SessionState) -> str | None:
        raise KeyError("no such rate")

    pay = Tool("pay", lambda a: a, "pay", Amount, guard=guard)
    with pytest.raises(KeyError, match="no such rate"):
        decide([pay], tc("pay", {"amount": 1}), state_of([pay]))


def test_stage_order() -> None:
    """Each stage wins over all that follow it."""
    pay = pay_tool()
    echo = ok_tool()
    tools = [pay, echo]
    at_limit = state_of(tools, *[committed("echo", {"q": str(i)}) for i in range(10)])
    # a schema error hides a guard refusal and a step limit
    assert decide(tools, tc("pay", {"amount": "x"}), at_limit).stage == "schema"
    # a guard refusal hides the step limit
    assert decide(tools, tc("pay", {"amount": 500}), at_limit).stage == "guard"
    # the step limit hides a repeat
    at_limit_repeated = state_of(
        tools, *[committed("echo", {"q": "same" if i < 2 else str(i)}) for i in range(10)]
    )
    assert decide(tools, tc("echo", {"q": "same"}), at_limit_repeated).stage == "step_limit"
    # a repeat hides a storm
    twice = state_of(tools, committed("echo", {"q": "a"}), committed("echo", {"q": "a"}))
    plan = Plan(recent=[decide(tools, tc("echo", {"q": "a"}), state_of(tools)).key])
    assert decide(tools, tc("echo", {"q": "a"}), twice, plan).stage == "repeat"
    # a storm hides an open breaker
    broken = state_of(tools, CircuitOpened(tool="echo", failures=3))
    assert decide(tools, tc("echo", {"q": "a"}), broken, plan).stage == "storm"
    assert decide(tools, tc("echo", {"q": "b"}), broken, plan).stage == "circuit_open"


def test_the_plan_counts_calls_that_have_not_run_yet() -> None:
    echo = ok_tool()
    tools = [echo]
    state = state_of(tools, *[committed("echo", {"q": str(i)}) for i in range(8)], max_repeats=1)
    plan = Plan()
    first = decide(tools, tc("echo", {"q": "a"}), state, plan)
    assert isinstance(first, Accepted)
    plan.add(first, window=5)
    assert decide(tools, tc("echo", {"q": "a"}), state, plan).stage == "repeat"
    second = decide(tools, tc("echo", {"q": "b"}), state, plan)
    assert isinstance(second, Accepted)
    plan.add(second, window=5)
    assert decide(tools, tc("echo", {"q": "c"}), state, plan).stage == "step_limit"


def test_storms_are_suppressed_once_per_turn_then_halt() -> None:
    echo = ok_tool()
    tools = [echo]
    key = decide(tools, tc("echo", {"q": "a"}), state_of(tools)).key
    first = decide(tools, tc("echo", {"q": "a"}), state_of(tools), Plan(recent=[key]))
    assert (first.stage, first.suppress, first.halt) == ("storm", True, None)
    again = decide(
        tools, tc("echo", {"q": "a"}), state_of(tools), Plan(recent=[key], storms_before=1)
    )
    assert (again.stage, again.suppress, again.halt) == ("storm", False, "storm")
    # outside the window it is no storm
    far = Plan(recent=[key, "x:1", "x:2", "x:3", "x:4"])
    assert isinstance(decide(tools, tc("echo", {"q": "a"}), state_of(tools), far), Accepted)


def test_an_open_breaker_routes_to_the_fallback_or_halts() -> None:
    cache = ok_tool("cache")
    live = ok_tool("live", fallback="cache")
    alone = ok_tool("alone")
    tools = [cache, live, alone]
    state = state_of(
        tools, CircuitOpened(tool="live", failures=3), CircuitOpened(tool="alone", failures=3)
    )
    routed = decide(tools, tc("live", {"q": "a"}), state)
    assert routed == Rejected(
        tc("live", {"q": "a"}),
        "circuit_open",
        "live is unavailable (its circuit breaker is open after repeated failures); "
        "routed to cache",
        fallback=cache,
    )
    assert decide(tools, tc("alone", {"q": "a"}), state) == Rejected(
        tc("alone", {"q": "a"}),
        "circuit_open",
        "alone is unavailable (its circuit breaker is open after repeated failures)",
        halt="circuit_open",
    )


def test_verification_is_pure() -> None:
    pay = pay_tool()
    state = state_of([pay], committed("pay", {"amount": 1}))
    before = state.model_dump()
    plan = Plan(recent=["x"])
    for args in ({"amount": 1}, {"amount": 500}, {"amount": "x"}):
        decide([pay], tc("pay", args), state, plan)
    assert state.model_dump() == before
    assert plan == Plan(recent=["x"])


# -- the stages as the loop journals them ---------------------------------------------


def test_unknown_tool_is_journaled(journal: Journal) -> None:
    call = propose(("nope", {"q": "x"}))
    assert run_events(ok_tool(), steps=[call], journal=journal) == [
        ASK,
        proposed(call),
        VerificationFailed(
            call_id="c1",
            tool="nope",
            stage="unknown_tool",
            message="there is no tool named 'nope'; the tools are: echo",
        ),
        proposed(answer()),
        DONE,
    ]


def test_schema_rejection_then_a_fixed_call(journal: Journal) -> None:
    bad, good = propose(("echo", {"q": 1})), propose(("echo", {"q": "1"}))
    assert run_events(ok_tool(), steps=[bad, good], journal=journal) == [
        ASK,
        proposed(bad),
        VerificationFailed(
            call_id="c1",
            tool="echo",
            stage="schema",
            message="invalid arguments for echo: q: Input should be a valid string. "
            "Fix them to match: {q: string}",
        ),
        proposed(good),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "1"}, result={"echo": "1"}),
        proposed(answer()),
        DONE,
    ]


def test_json_schema_tool_in_the_loop(journal: Journal) -> None:
    deep = Tool("ship", lambda a: {"to": a["recipient"]["name"]}, "ship", SHIPMENT_SCHEMA)
    args = {
        "recipient": {
            "name": "Ada",
            "address": {"street": "1 Sq", "city": "London", "zip": "SW1", "country": "GB"},
        },
        "parcel": {"weight_kg": 2},
        "service": "express",
    }
    bad = propose(("ship", {**args, "service": "teleport"}))
    good = propose(("ship", args))
    events = run_events(deep, steps=[bad, good], journal=journal)
    assert events == [
        ASK,
        proposed(bad),
        VerificationFailed(
            call_id="c1",
            tool="ship",
            stage="schema",
            message="invalid arguments for ship: service: 'teleport' is not one of "
            "['standard', 'express']. Fix them to match: "
            "{recipient: object, parcel: object, service: string}",
        ),
        proposed(good),
        ActionCommitted(call_id="c1", tool="ship", args=args, result={"to": "Ada"}),
        proposed(answer()),
        DONE,
    ]


def test_guard_rejection_tells_the_model_what_to_change(journal: Journal) -> None:
    big, fixed = propose(("pay", {"amount": 150})), propose(("pay", {"amount": 100}))
    assert run_events(pay_tool(), steps=[big, fixed], journal=journal) == [
        ASK,
        proposed(big),
        VerificationFailed(
            call_id="c1",
            tool="pay",
            stage="guard",
            message="amount 150 exceeds 100; propose at most 100",
        ),
        proposed(fixed),
        ActionCommitted(call_id="c1", tool="pay", args={"amount": 100}, result={"paid": 100}),
        proposed(answer()),
        DONE,
    ]


def test_step_limit_halts(journal: Journal) -> None:
    steps = [propose(("echo", {"q": str(i)})) for i in range(3)]
    events = run_events(ok_tool(), steps=steps, journal=journal, rails={"max_steps": 2})
    message = "the limit of 2 tool calls per turn is reached; answer with what you have"
    assert events == [
        ASK,
        proposed(steps[0]),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "0"}, result={"echo": "0"}),
        proposed(steps[1]),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "1"}, result={"echo": "1"}),
        proposed(steps[2]),
        VerificationFailed(call_id="c1", tool="echo", stage="step_limit", message=message),
        AgentHalted(rule="step_limit", reason=message),
    ]


def test_step_limit_counts_per_turn(journal: Journal) -> None:
    first, second = propose(("echo", {"q": "a"})), propose(("echo", {"q": "b"}))
    steps = [first, answer("one"), second]
    events = run_events(
        ok_tool(), steps=steps, journal=journal, rails={"max_steps": 1}, inputs=("x", "y")
    )
    assert events == [
        UserInput(text="x"),
        proposed(first),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "a"}, result={"echo": "a"}),
        proposed(answer("one")),
        AgentCompleted(answer="one"),
        UserInput(text="y"),
        proposed(second),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "b"}, result={"echo": "b"}),
        proposed(answer()),
        DONE,
    ]


def test_repeat_halts_on_the_third_identical_call(journal: Journal) -> None:
    same = propose(("echo", {"q": "a"}))
    events = run_events(ok_tool(), steps=[same] * 3, journal=journal)
    message = (
        "echo was already called 2 times with these exact arguments this turn; "
        "the result will not change"
    )
    done = ActionCommitted(call_id="c1", tool="echo", args={"q": "a"}, result={"echo": "a"})
    assert events == [
        ASK,
        proposed(same),
        done,
        proposed(same),
        done,
        proposed(same),
        VerificationFailed(call_id="c1", tool="echo", stage="repeat", message=message),
        AgentHalted(rule="repeat", reason=message),
    ]


def test_repeat_uses_canonical_args(journal: Journal) -> None:
    """Key order and the pydantic dump do not make a call different."""
    schema_tool = Tool("find", lambda a: "ok", "find", ECHO_SCHEMA)
    steps = [propose(("find", {"q": "a", "n": 1})), propose(("find", {"n": 1, "q": "a"}))] * 2
    events = run_events(schema_tool, steps=steps, journal=journal)
    assert events[-1] == AgentHalted(rule="repeat", reason=events[-2].message)  # type: ignore[union-attr]


def test_storm_is_suppressed_once_then_halts(journal: Journal) -> None:
    burst = propose(("echo", {"q": "a"}), ("echo", {"q": "a"}), ("echo", {"q": "b"}))
    again = propose(("echo", {"q": "c"}), ("echo", {"q": "c"}))
    events = run_events(ok_tool(), steps=[burst, again], journal=journal)
    suppressed = (
        "duplicate call: echo with these arguments is already in this response. "
        "It was suppressed; use the earlier result and send each call once."
    )
    halted = (
        "duplicate call: echo with these arguments is already in this response. "
        "A second storm in this turn ends the session."
    )
    assert events == [
        ASK,
        proposed(burst),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "a"}, result={"echo": "a"}),
        RepairApplied(level="storm", call_id="c2", tool="echo", detail=suppressed),
        ActionCommitted(call_id="c3", tool="echo", args={"q": "b"}, result={"echo": "b"}),
        proposed(again),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "c"}, result={"echo": "c"}),
        VerificationFailed(call_id="c2", tool="echo", stage="storm", message=halted),
        AgentHalted(rule="storm", reason=halted),
    ]


def test_a_storm_in_a_new_turn_is_suppressed_again(journal: Journal) -> None:
    burst = propose(("echo", {"q": "a"}), ("echo", {"q": "a"}))
    events = run_events(
        ok_tool(), steps=[burst, answer("1"), burst], journal=journal, inputs=("x", "y")
    )
    assert [e.level for e in events if isinstance(e, RepairApplied)] == ["storm", "storm"]
    assert events[-1] == DONE


REFUSED = "ConnectionError: connection refused"


def breaker_prefix(call: Any) -> list[EventModel]:
    """Three infrastructure failures of ``live``, the compaction of the run, the breaker."""
    failed = ActionFailed(
        call_id="c1", tool="live", kind="infrastructure", message=REFUSED, args={"q": "a"}
    )
    return [
        ASK,
        proposed(call),
        failed,
        proposed(call),
        failed,
        ContextCompacted(
            from_seq=2,
            to_seq=5,
            summary=f"2 calls to live failed the same way: error (infrastructure): {REFUSED}",
            tokens_before=38,
            tokens_after=24,
        ),
        proposed(call),
        failed,
        CircuitOpened(tool="live", failures=3),
        proposed(call),
    ]


def test_breaker_with_fallback_routes_the_call(journal: Journal) -> None:
    live = Tool("live", _refused, "live", Args, fallback="cache")
    call = propose(("live", {"q": "a"}))
    events = run_events(live, ok_tool("cache"), steps=[call] * 4, journal=journal, rails=PATIENT)
    assert events == [
        *breaker_prefix(call),
        VerificationFailed(
            call_id="c1",
            tool="live",
            stage="circuit_open",
            message="live is unavailable (its circuit breaker is open after repeated failures); "
            "routed to cache",
        ),
        FallbackInvoked(tool="live", fallback="cache", call_id="c1"),
        ActionCommitted(call_id="c1", tool="cache", args={"q": "a"}, result={"echo": "a"}),
        proposed(answer()),
        DONE,
    ]


def test_breaker_without_fallback_halts(journal: Journal) -> None:
    live = Tool("live", _refused, "live", Args)
    call = propose(("live", {"q": "a"}))
    events = run_events(live, steps=[call] * 4, journal=journal, rails=PATIENT)
    message = "live is unavailable (its circuit breaker is open after repeated failures)"
    assert events == [
        *breaker_prefix(call),
        VerificationFailed(call_id="c1", tool="live", stage="circuit_open", message=message),
        AgentHalted(rule="circuit_open", reason=message),
    ]


def test_repair_retries_halt(journal: Journal) -> None:
    bad = propose(("echo", {"q": 1}))
    events = run_events(ok_tool(), steps=[bad] * 4, journal=journal, rails=PATIENT)
    rejections = [e for e in events if isinstance(e, VerificationFailed)]
    assert [e.stage for e in rejections] == ["schema"] * 3
    assert events[-1] == AgentHalted(rule="repair_retries", reason=rejections[-1].message)
    assert events[-2] == rejections[-1]


def _refused(args: Args) -> Any:
    raise ConnectionError("connection refused")


# -- replies without calls: empty ones are sent back ---------------------------------------

EMPTY = VerificationFailed(
    call_id="",
    tool="",
    stage="empty_reply",
    message="your reply was empty: no text and no tool call. Answer the user in text, or call "
    "one of the tools",
)


@pytest.mark.parametrize("text", [None, "", " \n\t "])
def test_an_empty_reply_is_rejected_while_retries_last_then_halts(text: str | None) -> None:
    state = state_of([])
    first = verify_reply(text, state)
    assert first == Rejected(EMPTY_REPLY, "empty_reply", EMPTY.message)
    assert verify_reply(text, state_of([], EMPTY)) == first
    assert verify_reply(text, state_of([], EMPTY, EMPTY)) == Rejected(
        EMPTY_REPLY,
        "empty_reply",
        "the model replied with nothing (no text, no tool call) 3 times this turn "
        "(retries allowed: 2)",
        halt="empty_reply",
    )
    assert verify_reply(text, state_of([], EMPTY, UserInput(text="next"))) == first
    assert verify_reply(text, state_of([], empty_reply_retries=0)).halt == "empty_reply"  # type: ignore[union-attr]


@pytest.mark.parametrize("retries", [None, 2])
def test_a_reply_with_text_is_the_answer_and_without_retries_so_is_an_empty_one(
    retries: int | None,
) -> None:
    state = state_of([], empty_reply_retries=retries)
    assert verify_reply("done", state) is None
    assert (verify_reply("", state) is None) is (retries is None)


def test_an_empty_reply_is_sent_back_and_the_model_told(journal: Journal) -> None:
    script = Script(answer(""), answer())
    run_turns(agent_of(ok_tool()), journal, script, "go")
    assert after_start(journal) == [
        ASK,
        proposed(answer("")),
        EMPTY,
        proposed(answer()),
        DONE,
    ]
    assert script.requests[1].messages[-1] == {
        "role": "system",
        "content": f"rejected: {EMPTY.message}",
    }
    state = journal.state("s")
    assert (state.status, state.failures, state.steps, state.empty_replies) == (
        "completed",
        1,
        0,
        1,
    )


def test_empty_replies_past_the_retries_halt(journal: Journal) -> None:
    silent = ModelResponse(reasoning="nothing to say")  # no text, no calls, nothing to scavenge
    events = run_events(ok_tool(), steps=[silent] * 3, journal=journal, rails=PATIENT)
    assert events == [
        ASK,
        proposed(silent),
        EMPTY,
        proposed(silent),
        EMPTY,
        proposed(silent),
        EMPTY.model_copy(
            update={
                "message": "the model replied with nothing (no text, no tool call) 3 times "
                "this turn (retries allowed: 2)"
            }
        ),
        AgentHalted(
            rule="empty_reply",
            reason="the model replied with nothing (no text, no tool call) 3 times this turn "
            "(retries allowed: 2)",
        ),
    ]


def test_empty_replies_count_as_consecutive_failures(journal: Journal) -> None:
    events = run_events(
        ok_tool(), steps=[answer("")] * 3, journal=journal, rails={"empty_reply_retries": 5}
    )
    assert events[-1] == AgentHalted(
        rule="consecutive_failures", reason=f"3 failures in a row (limit 3); last: {EMPTY.message}"
    )


def test_an_empty_reply_can_be_accepted_as_the_answer(journal: Journal) -> None:
    events = run_events(
        ok_tool(), steps=[answer("")], journal=journal, rails={"empty_reply_retries": None}
    )
    assert events == [ASK, proposed(answer("")), AgentCompleted(answer="")]
