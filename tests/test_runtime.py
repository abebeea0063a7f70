"""The loop: failures, breakers, timeouts, errors, parallel dispatch, turns, resume, the diagram."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentloop import (
    COMPACTED_RESULT,
    TRANSITIONS,
    AgentRuntime,
    IllegalTransitionError,
    LiveToolExecutor,
    ModelRequest,
    ModelResponse,
    Phase,
    SessionEndedError,
    Tool,
    ToolError,
    ToolOutcome,
    classify_error,
    compact_result,
)
from agentloop.runtime import _Session
from journal import (
    ActionCommitted,
    ActionFailed,
    AgentCompleted,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    EventTooLargeError,
    FallbackInvoked,
    Journal,
    ModelCallFailed,
    RepairApplied,
    SessionState,
    StoreError,
    ToolCall,
    UserInput,
    VerificationFailed,
    apply,
    canonical_bytes,
    failure_message,
    fold,
    loads_strict,
)
from journal.sqlite import SQLiteJournal

from .helpers import stored
from .loop_helpers import (
    Amount,
    Args,
    Gauge,
    Script,
    after_start,
    agent_of,
    answer,
    events_of,
    failing_tool,
    ok_tool,
    propose,
    proposed,
    run_events,
    run_turns,
    runtime_for,
    sleepy_tools,
    sync_sleepy_tool,
)

ASK = UserInput(text="go")
DONE = AgentCompleted(answer="done")
PATIENT = {"max_consecutive_failures": 9, "max_identical_failures": None}


def failed(
    tool: str,
    kind: str,
    message: str,
    q: str = "a",
    call_id: str = "c1",
    abandoned: bool = False,
) -> ActionFailed:
    return ActionFailed(
        call_id=call_id,
        tool=tool,
        kind=kind,  # type: ignore[arg-type]
        message=message,
        args={"q": q},
        abandoned=abandoned,
    )


def ok(tool: str, q: str, call_id: str = "c1", result: Any = None) -> ActionCommitted:
    return ActionCommitted(call_id=call_id, tool=tool, args={"q": q}, result=result or {"echo": q})


# -- failures, breakers, timeouts -----------------------------------------------------


def test_consecutive_failures_halt(journal: Journal) -> None:
    call = propose(("f", {"q": "a"}))
    events = run_events(
        failing_tool("f", ToolError("user not found")), steps=[call] * 5, journal=journal
    )
    lost = failed("f", "business", "user not found")
    assert events == [
        ASK,
        proposed(call),
        lost,
        proposed(call),
        lost,
        ContextCompacted(
            from_seq=2,
            to_seq=5,
            summary="2 calls to f failed the same way: error (business): user not found",
            tokens_before=24,
            tokens_after=17,
        ),
        proposed(call),
        lost,
        AgentHalted(
            rule="consecutive_failures",
            reason="3 failures in a row (limit 3); last: user not found",
        ),
    ]


def test_a_commit_resets_the_failure_streak(journal: Journal) -> None:
    bad, good = propose(("f", {"q": "a"})), propose(("echo", {"q": "b"}))
    tools = failing_tool("f", ToolError("no")), ok_tool()
    events = run_events(
        *tools,
        steps=[bad, bad, good, bad, bad],
        journal=journal,
        rails={"max_identical_failures": None},  # (which would halt at the third)
    )
    assert events[-1] == DONE
    assert journal.state("s").failures == 4


def test_business_failures_do_not_open_the_breaker(journal: Journal) -> None:
    call = propose(("f", {"q": "a"}))
    events = run_events(
        failing_tool("f", LookupError("no such user")),
        steps=[call] * 5,
        journal=journal,
        rails=PATIENT,
    )
    assert not [e for e in events if isinstance(e, CircuitOpened)]
    assert journal.state("s").tool_failures == {}
    assert [e.kind for e in events if isinstance(e, ActionFailed)] == ["business"] * 5


def test_the_breaker_opens_at_its_threshold(journal: Journal) -> None:
    call = propose(("f", {"q": "a"}))
    tool = failing_tool("f", OSError("disk on fire"))
    events = run_events(
        tool, steps=[call] * 2, journal=journal, rails={"breaker_threshold": 2, **PATIENT}
    )
    assert [e for e in events if isinstance(e, (ActionFailed, CircuitOpened))] == [
        failed("f", "infrastructure", "OSError: disk on fire"),
        failed("f", "infrastructure", "OSError: disk on fire"),
        CircuitOpened(tool="f", failures=2),
    ]


def test_timeouts_count_towards_the_breaker(journal: Journal) -> None:
    gauge = Gauge()
    (slow,) = sleepy_tools(gauge, {"slow": 10.0}, timeout_s=0.02)
    call = propose(("slow", {"q": "a"}))
    events = run_events(slow, steps=[call] * 3, journal=journal, rails=PATIENT)
    timed_out = failed(
        "slow", "timeout", "TimeoutError: slow did not answer within 0.02 s", abandoned=True
    )
    assert [e for e in events if isinstance(e, (ActionFailed, CircuitOpened))] == [
        timed_out,
        timed_out,
        timed_out,
        CircuitOpened(tool="slow", failures=3),
    ]
    assert gauge.log == ["+slow", "-slow"] * 3  # each body was cancelled


def test_a_slow_sync_tool_times_out(journal: Journal) -> None:
    gauge = Gauge()
    slow = sync_sleepy_tool(gauge, "slow", 0.3)
    events = run_events(
        slow, steps=[propose(("slow", {"q": "a"}))], journal=journal, rails={"tool_timeout_s": 0.02}
    )
    assert events[2] == failed(
        "slow", "timeout", "TimeoutError: slow did not answer within 0.02 s", abandoned=True
    )
    assert events[-1] == DONE


def test_the_default_timeout_comes_from_the_guardrails(journal: Journal) -> None:
    gauge = Gauge()
    (slow,) = sleepy_tools(gauge, {"slow": 10.0})
    events = run_events(
        slow, steps=[propose(("slow", {"q": "a"}))], journal=journal, rails={"tool_timeout_s": 0.01}
    )
    assert events[2] == failed(
        "slow", "timeout", "TimeoutError: slow did not answer within 0.01 s", abandoned=True
    )


# -- the error classifier -------------------------------------------------------------


class Flaky(Exception):
    """An exception whose text looks like a traceback."""


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (ToolError("user 7 not found"), "business", "user 7 not found"),
        (ValueError("amount must be positive"), "business", "amount must be positive"),
        (KeyError("order"), "business", "'order'"),
        (
            ConnectionError("connection refused"),
            "infrastructure",
            "ConnectionError: connection refused",
        ),
        (TimeoutError("upstream timed out"), "timeout", "TimeoutError: upstream timed out"),
        (RuntimeError(), "infrastructure", "RuntimeError: RuntimeError"),
        (
            Flaky('Traceback (most recent call last):\n  File "x.py", line 1\nboom'),
            "infrastructure",
            'Flaky: Traceback (most recent call last): File "x.py", line 1 boom',
        ),
    ],
)
def test_errors_are_classified_and_cleaned(
    journal: Journal, error: Exception, kind: str, message: str
) -> None:
    assert classify_error(error) == kind
    events = run_events(
        failing_tool("f", error), steps=[propose(("f", {"q": "a"}))], journal=journal
    )
    assert events[2] == failed("f", kind, message)
    assert "\n" not in message


def test_messages_are_bounded() -> None:
    cleaned = failure_message(ToolError("x" * 1000))
    assert cleaned == "x" * 299 + "…"


def test_a_custom_classifier_decides_the_kind(journal: Journal) -> None:
    def classify(error: BaseException) -> Any:
        return "business" if "quota" in str(error) else "infrastructure"

    tool = failing_tool("f", RuntimeError("quota exceeded"), classify=classify)
    events = run_events(tool, steps=[propose(("f", {"q": "a"}))], journal=journal)
    assert events[2] == failed("f", "business", "RuntimeError: quota exceeded")


def test_a_raising_classifier_falls_back_to_the_default(journal: Journal) -> None:
    def classify(error: BaseException) -> Any:
        raise AssertionError("classifier bug")

    tool = failing_tool("f", ToolError("no"), classify=classify)
    events = run_events(tool, steps=[propose(("f", {"q": "a"}))], journal=journal)
    assert events[2] == failed("f", "business", "no")


@pytest.mark.parametrize("result", [object(), float("nan"), {"n": 2**70}])
def test_a_result_that_is_not_json_is_an_infrastructure_failure(
    journal: Journal, result: object
) -> None:
    tool = Tool("odd", lambda a: result, "odd", Args)
    events = run_events(tool, steps=[propose(("odd", {"q": "a"}))], journal=journal)
    assert isinstance(events[2], ActionFailed)
    assert (events[2].kind, events[2].message.startswith("the result of odd is not JSON")) == (
        "infrastructure",
        True,
    )


# -- parallel dispatch ----------------------------------------------------------------


def test_results_are_committed_in_proposal_order(journal: Journal) -> None:
    gauge = Gauge()
    tools = sleepy_tools(gauge, {"slow": 0.08, "fast": 0.0, "mid": 0.04}, parallel_safe=True)
    call = propose(("slow", {"q": "1"}), ("fast", {"q": "2"}), ("mid", {"q": "3"}))
    events = run_events(*tools, steps=[call], journal=journal)
    assert gauge.finished == ["fast", "mid", "slow"]
    assert gauge.peak == 3
    assert events == [
        ASK,
        proposed(call),
        ok("slow", "1", "c1", {"tool": "slow", "q": "1"}),
        ok("fast", "2", "c2", {"tool": "fast", "q": "2"}),
        ok("mid", "3", "c3", {"tool": "mid", "q": "3"}),
        proposed(answer()),
        DONE,
    ]


@pytest.mark.parametrize(
    ("rails", "peak"), [({}, 3), ({"max_parallel": 2}, 2), ({"serial": True}, 1)]
)
def test_max_parallel_is_respected(journal: Journal, rails: dict[str, Any], peak: int) -> None:
    gauge = Gauge()
    (tool,) = sleepy_tools(gauge, {"read": 0.02}, parallel_safe=True)
    call = propose(*[("read", {"q": str(i)}) for i in range(7)])
    events = run_events(tool, steps=[call], journal=journal, rails=rails)
    assert gauge.peak == peak
    assert [e.call_id for e in events if isinstance(e, ActionCommitted)] == [
        f"c{i}" for i in range(1, 8)
    ]


def test_serial_dispatch_runs_one_at_a_time_in_order(journal: Journal) -> None:
    gauge = Gauge()
    tools = sleepy_tools(gauge, {"a": 0.03, "b": 0.0, "c": 0.01}, parallel_safe=True)
    call = propose(("a", {"q": "1"}), ("b", {"q": "2"}), ("c", {"q": "3"}))
    run_events(*tools, steps=[call], journal=journal, rails={"serial": True})
    assert gauge.log == ["+a", "-a", "+b", "-b", "+c", "-c"]


def test_a_call_that_is_not_parallel_safe_is_a_barrier(journal: Journal) -> None:
    gauge = Gauge()
    reads = sleepy_tools(gauge, {"a": 0.03, "b": 0.01, "c": 0.02, "d": 0.0}, parallel_safe=True)
    (write,) = sleepy_tools(gauge, {"w": 0.0})
    call = propose(
        ("a", {"q": "1"}),
        ("b", {"q": "2"}),
        ("w", {"q": "3"}),
        ("c", {"q": "4"}),
        ("d", {"q": "5"}),
    )
    events = run_events(*reads, write, steps=[call], journal=journal)
    log = gauge.log
    assert sorted(log[:4]) == ["+a", "+b", "-a", "-b"]
    assert log[4:6] == ["+w", "-w"]
    assert sorted(log[6:]) == ["+c", "+d", "-c", "-d"]
    assert [e.tool for e in events if isinstance(e, ActionCommitted)] == ["a", "b", "w", "c", "d"]


def test_a_rejection_keeps_its_place_between_parallel_results(journal: Journal) -> None:
    gauge = Gauge()
    tools = sleepy_tools(gauge, {"a": 0.02, "b": 0.0}, parallel_safe=True)
    call = propose(("a", {"q": "1"}), ("nope", {"q": "x"}), ("b", {"q": "2"}))
    events = run_events(*tools, steps=[call], journal=journal)
    assert [(e.type, getattr(e, "call_id", None)) for e in events[2:5]] == [
        ("action_committed", "c1"),
        ("verification_failed", "c2"),
        ("action_committed", "c3"),
    ]


# -- turns, resume, ended sessions ----------------------------------------------------


def chat_agent() -> Any:
    return agent_of(ok_tool())


def test_run_turn_continues_a_session(journal: Journal) -> None:
    first, second = propose(("echo", {"q": "a"})), propose(("echo", {"q": "b"}))
    model = Script(first, answer("one"), second, answer("two"))
    _, results = run_turns(chat_agent(), journal, model, "x", "y")
    assert [(r.status, r.answer) for r in results] == [("completed", "one"), ("completed", "two")]
    assert after_start(journal) == [
        UserInput(text="x"),
        proposed(first),
        ok("echo", "a"),
        proposed(answer("one")),
        AgentCompleted(answer="one"),
        UserInput(text="y"),
        proposed(second),
        ok("echo", "b"),
        proposed(answer("two")),
        AgentCompleted(answer="two"),
    ]
    # the second turn's model saw the whole conversation
    assert [m["role"] for m in model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert results[1].state == journal.state("s") == fold(journal.events("s"))
    assert results[1].state.turns == 2


def test_a_new_runtime_resumes_a_session_from_the_journal(db_path: Path) -> None:
    first, second = propose(("echo", {"q": "a"})), propose(("echo", {"q": "b"}))
    steps = [first, answer("one"), second, answer("two")]
    with Journal.open(db_path) as journal:
        run_turns(chat_agent(), journal, Script(*steps[:2]), "x")
    resumed_model = Script(*steps[2:])
    with Journal.open(db_path) as journal:
        runtime = runtime_for(chat_agent(), journal, resumed_model)
        state = runtime.resume("s")
        assert state == fold(journal.events("s"))
        result = asyncio.run(runtime.run_turn("s", "y"))
        assert (result.status, result.answer, result.state.turns) == ("completed", "two", 2)
        resumed = after_start(journal)
    # the same conversation run by one runtime, for comparison
    with Journal.open(db_path.with_name("one.db")) as journal:
        one_model = Script(*steps)
        run_turns(chat_agent(), journal, one_model, "x", "y")
        assert after_start(journal) == resumed
    assert resumed_model.requests[0].messages == one_model.requests[2].messages


def test_a_runtime_notices_turns_written_by_another(journal: Journal) -> None:
    a = runtime_for(chat_agent(), journal, Script(answer("1"), answer("3")))
    b = runtime_for(chat_agent(), journal, Script(answer("2")))
    for runtime, text in ((a, "x"), (b, "y"), (a, "z")):
        asyncio.run(runtime.run_turn("s", text))
    assert [e.answer for e in events_of(journal) if isinstance(e, AgentCompleted)] == [
        "1",
        "2",
        "3",
    ]


def test_resume_of_a_missing_session_raises(journal: Journal) -> None:
    from journal import SessionNotFoundError

    with pytest.raises(SessionNotFoundError):
        runtime_for(chat_agent(), journal, Script()).resume("nobody")


@pytest.mark.parametrize("fresh_runtime", [False, True])
def test_a_halted_session_takes_no_further_turn(journal: Journal, fresh_runtime: bool) -> None:
    agent = agent_of(ok_tool(), rails={"max_steps": 1})
    model = Script(propose(("echo", {"q": "a"}), ("echo", {"q": "b"})))
    runtime, results = run_turns(agent, journal, model, "x")
    assert (results[0].status, results[0].halt_rule) == ("halted", "step_limit")
    before = events_of(journal)
    if fresh_runtime:
        runtime = runtime_for(agent, journal, Script())
    with pytest.raises(SessionEndedError, match="halted by rule step_limit"):
        asyncio.run(runtime.run_turn("s", "more"))
    assert events_of(journal) == before


def test_a_failed_session_takes_no_further_turn(journal: Journal) -> None:
    runtime, _ = run_turns(chat_agent(), journal, Script(RuntimeError("down")), "x")
    with pytest.raises(SessionEndedError, match="failed by rule error"):
        asyncio.run(runtime.run_turn("s", "more"))


# -- errors in agent code -------------------------------------------------------------


def test_a_raising_guard_fails_the_session(journal: Journal) -> None:
    def guard(args: Amount, state: SessionState) -> str | None:
        raise KeyError("WINTER15")

    pay = Tool("pay", lambda a: a, "pay", Amount, guard=guard)
    call = propose(("pay", {"amount": 5}))
    events = run_events(pay, steps=[call], journal=journal)
    assert events == [
        ASK,
        proposed(call),
        AgentHalted(rule="error", reason="the guard of pay raised KeyError: 'WINTER15'"),
    ]
    state = journal.state("s")
    assert (state.status, state.halt_rule) == ("failed", "error")


def test_a_raising_guard_after_parallel_calls_still_runs_them(tmp_path: Path) -> None:
    """Serial or parallel, the calls proposed before the crash run (in proposal order)."""

    def guard(args: Amount, state: SessionState) -> str | None:
        raise KeyError("boom")

    pay = Tool("pay", lambda a: a, "pay", Amount, guard=guard, parallel_safe=True)
    call = propose(("echo", {"q": "a"}), ("pay", {"amount": 1}))
    outcomes = []
    for serial in (True, False):
        with Journal.open(tmp_path / f"{serial}.db") as journal:
            outcomes.append(
                run_events(
                    ok_tool(parallel_safe=True),
                    pay,
                    steps=[call],
                    journal=journal,
                    rails={"serial": serial},
                )
            )
    assert (
        outcomes[0]
        == outcomes[1]
        == [
            ASK,
            proposed(call),
            ok("echo", "a"),
            AgentHalted(rule="error", reason="the guard of pay raised KeyError: 'boom'"),
        ]
    )


def test_a_repeat_decided_before_a_failed_batch_is_decided_again(journal: Journal) -> None:
    """The batch ran first; the duplicate is judged on what the journal then holds."""
    runs = itertools.count()

    def works_once(args: Args) -> str:
        if next(runs):
            raise ConnectionError("down")
        return "ok"

    tool = Tool("t", works_once, "t", Args, parallel_safe=True)
    once, twice = propose(("t", {"q": "a"})), propose(("t", {"q": "a"}), ("t", {"q": "a"}))
    events = run_events(tool, steps=[once, twice], journal=journal)
    assert events[4:7] == [
        failed("t", "infrastructure", "ConnectionError: down"),
        RepairApplied(
            level="storm",
            call_id="c2",
            tool="t",
            detail="duplicate call: t with these arguments is already in this response. "
            "It was suppressed; use the earlier result and send each call once.",
        ),
        proposed(answer()),
    ]


def test_fallbacks_do_not_chain_into_a_loop(journal: Journal) -> None:
    a = failing_tool("a", ConnectionError("down"), fallback="b")
    b = failing_tool("b", ConnectionError("down"), fallback="a")
    opened = [CircuitOpened(tool="a", failures=1), CircuitOpened(tool="b", failures=1)]
    call = propose(("a", {"q": "x"}), ("b", {"q": "y"}))
    retry = propose(("a", {"q": "z"}))
    events = run_events(
        a, b, steps=[call, retry], journal=journal, rails={"breaker_threshold": 1, **PATIENT}
    )
    down = "is unavailable (its circuit breaker is open after repeated failures)"
    assert [e for e in events if isinstance(e, CircuitOpened)] == opened
    assert events[-4:] == [
        VerificationFailed(
            call_id="c1", tool="a", stage="circuit_open", message=f"a {down}; routed to b"
        ),
        FallbackInvoked(tool="a", fallback="b", call_id="c1"),
        VerificationFailed(call_id="c1", tool="b", stage="circuit_open", message=f"b {down}"),
        AgentHalted(rule="circuit_open", reason=f"b {down}"),
    ]


def test_a_raising_model_fails_the_session(journal: Journal) -> None:
    events = run_events(
        ok_tool(), steps=[RuntimeError("provider down\nTraceback ...")], journal=journal
    )
    assert events == [
        ASK,
        ModelCallFailed(
            message="RuntimeError: provider down Traceback ...",
            kind="infrastructure",
            model="test-model",
        ),
        AgentHalted(
            rule="error", reason="the model call failed: RuntimeError: provider down Traceback ..."
        ),
    ]
    state = journal.state("s")
    assert (state.status, state.model_failures, state.failures) == ("failed", 1, 0)


class Overloaded(Exception):
    status_code = 529


def test_a_failed_model_call_is_asked_again_up_to_model_retries(journal: Journal) -> None:
    """Each failure is journaled and the runtime asks again; a failed model call is no tool
    failure: it moves neither the failures nor the consecutive-failure limit."""
    events = run_events(
        ok_tool(),
        steps=[Overloaded("busy"), Overloaded("busy"), propose(text="done")],
        journal=journal,
        rails={"model_retries": 2, "max_consecutive_failures": 1},
    )
    failed = ModelCallFailed(
        message="Overloaded: busy", kind="infrastructure", status_code=529, model="test-model"
    )
    assert events[1:3] == [failed, failed]
    assert events[-1] == AgentCompleted(answer="done")
    state = journal.state("s")
    assert (state.model_failures, state.model_failures_in_row, state.failures) == (2, 0, 0)
    assert state.status == "completed"


def test_a_streak_of_failed_model_calls_past_model_retries_halts(journal: Journal) -> None:
    events = run_events(
        ok_tool(), steps=[Overloaded("busy")] * 3, journal=journal, rails={"model_retries": 2}
    )
    assert [event.type for event in events[1:]] == ["model_call_failed"] * 3 + ["agent_halted"]
    assert journal.state("s").halt_reason == "the model call failed: Overloaded: busy"


# -- the proposal is journaled first --------------------------------------------------


def test_the_proposal_is_journaled_before_any_tool_runs(journal: Journal, db_path: Path) -> None:
    seen: list[str] = []

    def peek(args: Args) -> str:
        with Journal.open(db_path) as reader:
            seen.extend(r.type for r in reader.events("s"))
        return "ok"

    tool = Tool("peek", peek, "reads the journal", Args)
    run_events(tool, steps=[propose(("peek", {"q": "a"}))], journal=journal)
    assert seen == ["session_started", "user_input", "action_proposed"]


@pytest.mark.parametrize("refusal", ["PRAGMA query_only = ON", "full"])
def test_a_journal_that_refuses_the_proposal_stops_the_loop(journal: Journal, refusal: str) -> None:
    ran: list[str] = []
    conn = journal._conn  # type: ignore[attr-defined]

    def refuse_then_propose(request: ModelRequest) -> ModelResponse:
        if refusal == "full":
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")
        else:
            conn.execute(refusal)
        return propose(("rec", {"q": "a"}), text="x" * 200_000)

    tool = Tool("rec", lambda a: ran.append(a.q), "records", Args)
    runtime = runtime_for(agent_of(tool), journal, Script(refuse_then_propose, answer()))
    with pytest.raises(StoreError, match="not written"):
        asyncio.run(runtime.run_turn("s", "go"))
    assert ran == []
    if refusal == "full":
        conn.execute("PRAGMA max_page_count = 1073741823")
    else:
        conn.execute("PRAGMA query_only = OFF")
    assert [e.type for e in events_of(journal)] == ["session_started", "user_input"]
    # once the journal takes writes again the same runtime carries on
    result = asyncio.run(runtime.run_turn("s", "again"))
    assert result.status == "completed"
    assert journal.state("s") == fold(journal.events("s"))


# -- the state diagram ----------------------------------------------------------------


def test_transitions_follow_the_diagram() -> None:
    for source, target in itertools.product(Phase, Phase):
        session = _Session("s", SessionState(), phase=source)
        if target in TRANSITIONS[source]:
            session.move(target)
            assert session.phase is target
        else:
            with pytest.raises(IllegalTransitionError, match=f"{source} -> {target}"):
                session.move(target)
            assert session.phase is source
    assert TRANSITIONS[Phase.HALTED] == frozenset()
    assert all(
        Phase.HALTED in TRANSITIONS[p] for p in Phase if p not in (Phase.HALTED, Phase.COMPLETED)
    )


def test_the_loop_walks_the_diagram(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[tuple[str, str]] = []
    real = _Session.move

    def move(self: _Session, to: Phase) -> None:
        walked.append((self.phase.value, to.value))
        real(self, to)

    monkeypatch.setattr(_Session, "move", move)
    steps = [propose(("echo", {"q": "a"}), ("echo", {"q": "b"})), answer("one"), answer("two")]
    run_turns(chat_agent(), journal, Script(*steps), "x", "y")
    assert walked == [
        ("idle", "observe"),
        ("observe", "propose"),
        ("propose", "verify"),
        ("verify", "commit"),  # c1 is serial: runs at once
        ("commit", "verify"),
        ("verify", "commit"),
        ("commit", "observe"),
        ("observe", "propose"),
        ("propose", "completed"),
        ("completed", "observe"),
        ("observe", "propose"),
        ("propose", "completed"),
    ]


def test_an_illegal_transition_in_the_loop_raises(journal: Journal) -> None:
    runtime = runtime_for(chat_agent(), journal, Script(answer("1"), answer("2")))
    asyncio.run(runtime.run_turn("s", "x"))
    runtime._sessions["s"].phase = Phase.PROPOSE  # a loop bug: a turn left mid-phase
    with pytest.raises(IllegalTransitionError, match="propose -> observe"):
        asyncio.run(runtime.run_turn("s", "y"))
    # nothing was written, and the next turn starts again from the journal
    assert [e.type for e in events_of(journal)][-1] == "agent_completed"
    assert asyncio.run(runtime.run_turn("s", "z")).answer == "2"


# -- the runtime's own state ----------------------------------------------------------


def test_the_runtime_state_is_the_fold_of_its_journal(journal: Journal) -> None:
    steps = [propose(("echo", {"q": "a"}), ("f", {"q": "b"})), propose(("nope", {})), answer()]
    runtime, _ = run_turns(
        agent_of(ok_tool(), failing_tool("f", ConnectionError("x"))), journal, Script(*steps), "go"
    )
    folded = fold(journal.events("s"))
    assert runtime._sessions["s"].state == folded == journal.state("s")


class _NoStateAtHand(SQLiteJournal):
    """A journal that never has a session's state at hand: the runtime folds it itself."""

    def _state_after(self, session_id: str, seq: int) -> SessionState | None:
        return None


@pytest.mark.parametrize("at_hand", [True, False])
def test_the_runtime_state_is_the_same_with_or_without_the_journals_own(
    db_path: Path, at_hand: bool
) -> None:
    steps = [
        propose(("echo", {"q": "a"}), ("f", {"q": "b"}), ("echo", {"q": "a"})),
        propose(("nope", {})),
        ModelResponse(),
        answer(),
    ]
    opened = SQLiteJournal(db_path) if at_hand else _NoStateAtHand(db_path)
    with opened as journal:
        runtime, _ = run_turns(
            agent_of(ok_tool(), failing_tool("f", ConnectionError("x"))),
            journal,
            Script(*steps),
            "go",
            "again",
        )
        state = runtime._sessions["s"].state
        assert state == fold(journal.events("s")) == journal.state("s")
        assert (journal._state_after("s", state.last_seq) is state) is at_hand


def test_the_sync_run_starts_a_session(journal: Journal) -> None:
    runtime = AgentRuntime(chat_agent(), journal, llm=Script(answer("hi")))
    result = runtime.run("hello")
    assert (result.status, result.answer) == ("completed", "hi")
    assert result.session_id.startswith("session-")
    assert [e.type for e in events_of(journal, result.session_id)] == [
        "session_started",
        "user_input",
        "action_proposed",
        "agent_completed",
    ]


def test_an_agent_without_a_model_is_refused(journal: Journal) -> None:
    with pytest.raises(ValueError, match="has no model"):
        AgentRuntime(chat_agent(), journal)


def test_a_tool_that_changes_its_args_does_not_change_the_record(journal: Journal) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    def meddle(args: dict[str, Any]) -> str:
        args["q"] = "changed"
        return "ok"

    call = propose(("t", {"q": "orig"}))
    events = run_events(Tool("t", meddle, "t", schema), steps=[call], journal=journal)
    assert events[2] == ActionCommitted(call_id="c1", tool="t", args={"q": "orig"}, result="ok")
    assert events[1] == proposed(call)


def test_a_call_interrupted_before_its_outcome_is_answered_not_run_again(
    journal: Journal,
) -> None:
    ran: list[str] = []
    pay = Tool("pay", lambda a: ran.append(a.q), "a payment", Args)
    runtime_for(agent_of(pay), journal, Script()).start("s")
    seq = journal.append("s", [UserInput(text="pay 90")])
    journal.append("s", [proposed(propose(("pay", {"q": "90"})))], expected_seq=seq + 1)
    # ... the process died here: the proposal is journaled, its call never decided.
    _, results = run_turns(agent_of(pay), journal, Script(answer("sorry")), "did it go through?")
    assert ran == []
    assert after_start(journal)[2:] == [
        ActionFailed(
            call_id="c1",
            tool="pay",
            kind="infrastructure",
            message="interrupted before its outcome was journaled; not run again, "
            "its effect is unknown",
            args={"q": "90"},
        ),
        UserInput(text="did it go through?"),
        proposed(answer("sorry")),
        AgentCompleted(answer="sorry"),
    ]
    assert results[-1].state.pending_calls == []


# -- a failing call repeated across turns ---------------------------------------------------

LOST = "user 7 not found"


def _lost_then_answer(q: str = "a") -> list[ModelResponse]:
    """One turn of a model that makes the same failing call, then gives up and answers."""
    return [propose(("f", {"q": q})), answer("sorry")]


def _identical_halt(tool: str, count: int, reading: str) -> AgentHalted:
    return AgentHalted(
        rule="identical_failures",
        reason=f"{tool} failed {count} times with the same arguments and the same error, "
        f"counted across turns (limit 3); {reading}",
    )


def test_the_same_failing_call_once_per_turn_halts_at_its_third_failure(
    journal: Journal,
) -> None:
    script = Script(*_lost_then_answer() * 5)
    tool = failing_tool("f", ToolError(LOST))
    _, results = run_turns(agent_of(tool), journal, script, *["try again"] * 5)
    assert [r.status for r in results] == ["completed", "completed", "halted"]
    events = after_start(journal)
    assert events[-2:] == [
        failed("f", "business", LOST),
        _identical_halt("f", 3, f"business: {LOST}"),
    ]
    states = itertools.accumulate(journal.events("s"), apply, initial=SessionState())
    assert max(state.consecutive_failures for state in states) == 1  # no streak to see


def test_a_guard_refusing_the_same_call_every_turn_halts_too(journal: Journal) -> None:
    script = Script(*[propose(("pay", {"amount": 500})), answer("sorry")] * 4)
    refusal = "amount 500 exceeds 100; propose at most 100"
    guarded = Tool(
        "pay",
        lambda a: "paid",
        "pay",
        Amount,
        guard=lambda a, s: refusal if a.amount > 100 else None,
    )
    _, results = run_turns(agent_of(guarded), journal, script, *["pay it"] * 4)
    assert [r.halt_rule for r in results] == [None, None, "identical_failures"]
    assert after_start(journal)[-1] == _identical_halt("pay", 3, f"guard: {refusal}")


@pytest.mark.parametrize(
    ("outcomes", "args", "rails", "halted_in_turn"),
    [
        # the same call succeeding in between clears its count
        ([LOST, LOST, None, LOST, LOST], "aaaaa", {}, None),
        # failing differently starts it again
        ([LOST, LOST, "moved", LOST, LOST], "aaaaa", {}, None),
        # another call has its own count: f(a) fails the third time in the fourth turn
        ([LOST] * 5, "aabaa", {}, 4),
        # no limit, as in sessions recorded before the setting existed
        ([LOST] * 5, "aaaaa", {"max_identical_failures": None}, None),
    ],
    ids=["a-commit-clears", "another-error", "other-args", "no-limit"],
)
def test_what_counts_as_identical_failures(
    journal: Journal,
    outcomes: list[str | None],
    args: str,
    rails: dict[str, Any],
    halted_in_turn: int | None,
) -> None:
    told = iter(outcomes)

    def find(a: Args) -> str:
        error = next(told)
        if error is None:
            return "found"
        raise ToolError(error)

    turns = [step for q in args for step in _lost_then_answer(q)]
    agent = agent_of(Tool("f", find, "finds a user", Args), rails=rails)
    _, results = run_turns(agent, journal, Script(*turns), *["again"] * len(args))
    halted = [n for n, r in enumerate(results, 1) if r.halt_rule == "identical_failures"]
    assert halted == ([] if halted_in_turn is None else [halted_in_turn])


def test_infrastructure_failures_are_left_to_the_breaker(journal: Journal) -> None:
    script = Script(*[propose(("f", {"q": "a"})), answer("sorry")] * 4)
    tool = failing_tool("f", ConnectionError("connection refused"), fallback="echo")
    run_turns(agent_of(tool, ok_tool()), journal, script, *["again"] * 4)
    state = journal.state("s")
    assert state.identical_failures == {}
    assert state.open_breakers == ["f"]
    assert state.status == "completed"  # the fourth turn's call went to the fallback


# -- timeouts: the call is abandoned ----------------------------------------------------------


def test_a_timed_out_sync_call_is_abandoned_and_its_late_result_never_journaled(
    journal: Journal,
) -> None:
    release, finished = threading.Event(), threading.Event()

    def slow(args: Args) -> str:
        release.wait(10)
        finished.set()
        return "late"

    tool = Tool("slow", slow, "slow", Args, timeout_s=0.01)
    runtime = runtime_for(agent_of(tool), journal, Script(propose(("slow", {"q": "a"}))))

    async def turn_then_let_the_thread_finish() -> list[Any]:
        await runtime.run_turn("s", "go")
        assert not finished.is_set()  # the turn ended while the thread runs on
        written = after_start(journal)
        release.set()
        assert await asyncio.to_thread(finished.wait, 10)
        await asyncio.sleep(0.05)  # time for anything that would record the late result
        return written

    events = asyncio.run(turn_then_let_the_thread_finish())
    assert events[2] == failed(
        "slow", "timeout", "TimeoutError: slow did not answer within 0.01 s", abandoned=True
    )
    assert events[-1] == DONE
    assert after_start(journal) == events  # what it returned late was dropped


def test_a_timed_out_async_call_is_cancelled(journal: Journal) -> None:
    seen: list[str] = []

    async def slow(args: Args) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "late"

    tool = Tool("slow", slow, "slow", Args, timeout_s=0.01)
    events = run_events(tool, steps=[propose(("slow", {"q": "a"}))], journal=journal)
    assert seen == ["cancelled"]
    assert isinstance(events[2], ActionFailed) and events[2].abandoned


def test_a_timeout_the_tool_raises_itself_is_not_abandoned(journal: Journal) -> None:
    tool = failing_tool("f", TimeoutError("upstream timed out"))
    events = run_events(tool, steps=[propose(("f", {"q": "a"}))], journal=journal)
    assert events[2] == failed("f", "timeout", "TimeoutError: upstream timed out")


# -- large results and the journal's event size limit -------------------------------------


def _big_tool(size: int) -> Tool:
    return Tool("big", lambda a: {"rows": "r" * size}, "returns a lot", Args)


def test_a_result_over_max_result_bytes_is_recorded_compacted(journal: Journal) -> None:
    call = propose(("big", {"q": "a"}))
    rails = {"max_result_bytes": 4096}
    events = run_events(_big_tool(100_000), steps=[call], journal=journal, rails=rails)
    result = {"rows": "r" * 100_000}
    assert events[2] == ok("big", "a", result=compact_result(result, 4096))
    recorded = events[2].result  # type: ignore[union-attr]
    assert recorded[COMPACTED_RESULT]["bytes"] == len(canonical_bytes(result))
    assert len(canonical_bytes(recorded)) <= 4096


def test_without_max_result_bytes_a_result_is_recorded_whole(journal: Journal) -> None:
    rails = {"max_result_bytes": None}
    events = run_events(
        _big_tool(100_000), steps=[propose(("big", {"q": "a"}))], journal=journal, rails=rails
    )
    assert events[2] == ok("big", "a", result={"rows": "r" * 100_000})


def test_an_event_over_the_journals_limit_stops_the_loop_with_one_clear_error(
    db_path: Path,
) -> None:
    with Journal.open(db_path, max_event_bytes=8192) as small:
        big = _big_tool(20_000)
        # a result: compacted by max_result_bytes, it fits
        run_turns(
            agent_of(big, rails={"max_result_bytes": 4096}),
            small,
            Script(propose(("big", {"q": "a"}))),
            "go",
        )
        assert small.state("s").status == "completed"
        # whole, it does not: the append is refused and nothing of it is written
        runtime = runtime_for(
            agent_of(big, rails={"max_result_bytes": None}),
            small,
            Script(propose(("big", {"q": "a"}))),
        )
        with pytest.raises(
            EventTooLargeError, match=r"^session t seq 3: the action_committed event is 20,"
        ):
            asyncio.run(runtime.run_turn("t", "go"))
        assert [e.type for e in events_of(small, "t")] == [
            "session_started",
            "user_input",
            "action_proposed",
        ]
        # a model output too large to record halts the session (rule error)
        runtime = runtime_for(agent_of(big), small, Script(answer("x" * 10_000)))
        result = asyncio.run(runtime.run_turn("u", "go"))
        assert (result.status, result.halt_rule) == ("failed", "error")
        assert result.halt_reason is not None
        assert result.halt_reason.startswith(
            "the model's output cannot be recorded: session u seq 2: the action_proposed event is"
        )


# -- sessions recorded before the settings existed ---------------------------------------


def test_a_session_recorded_before_the_settings_continues_as_it_ran(journal: Journal) -> None:
    old = [stored("session_started", 1, {"agent": "tests.loop_helpers:agent_of"}, seq=0)]
    journal.import_records("s", [("old", {**loads_strict(row.body)}) for row in old])
    run_turns(agent_of(ok_tool()), journal, Script(answer("")), "go")
    assert after_start(journal) == [ASK, proposed(answer("")), AgentCompleted(answer="")]
    assert journal.state("s").guardrails.empty_reply_retries is None
    # a new session of the same agent gets the new defaults
    run_turns(agent_of(ok_tool()), journal, Script(answer(""), answer()), "go", session_id="n")
    assert [e.type for e in events_of(journal, "n")][3] == "verification_failed"


# -- the executor: a coroutine that never waits sets no timer ---------------------------------


def _execute(fn: Any, timeout_s: float = 5.0) -> ToolOutcome:
    tool = Tool("t", fn, "t", Args)
    call = ToolCall(call_id="c", tool="t", args={"q": "a"})
    return asyncio.run(
        LiveToolExecutor().execute(tool, call, Args(q="a"), SessionState(), timeout_s)
    )


def test_an_async_tool_that_waits_gets_each_answer_and_returns() -> None:
    async def waits(args: Args) -> list[str]:
        seen = [args.q]
        for _ in range(3):
            await asyncio.sleep(0)
            seen.append(await asyncio.sleep(0.001, result="b"))
        return seen

    outcome = _execute(waits)
    assert (outcome.ok, outcome.result, outcome.abandoned) == (True, ["a", "b", "b", "b"], False)


class _AsyncCallable:
    """A tool written as a class: its ``__call__`` is a coroutine function."""

    async def __call__(self, args: Args) -> str:
        await asyncio.sleep(0)
        return f"{args.q}!"


async def _shout(args: Args) -> str:
    await asyncio.sleep(0)
    return f"{args.q}!"


@pytest.mark.parametrize(
    "fn",
    [_AsyncCallable(), lambda args: _shout(args)],
    ids=["async-callable-object", "function-returning-a-coroutine"],
)
def test_a_tool_whose_call_gives_a_coroutine_is_awaited(fn: Any) -> None:
    outcome = _execute(fn)
    assert (outcome.ok, outcome.result) == (True, "a!"), outcome.message


@pytest.mark.parametrize("wait_first", [False, True])
def test_an_async_tool_that_raises_fails_before_or_after_a_wait(wait_first: bool) -> None:
    async def raises(args: Args) -> str:
        if wait_first:
            await asyncio.sleep(0)
        raise LookupError("no such order")

    outcome = _execute(raises)
    assert (outcome.ok, outcome.kind, outcome.message) == (False, "business", "no such order")
    assert not outcome.abandoned


def test_an_async_tool_times_out_from_its_start_not_from_its_first_wait() -> None:
    async def busy_then_waits(args: Args) -> str:
        time.sleep(0.12)  # longer than the timeout, before its first wait
        await asyncio.sleep(0.01)  # well within a timeout counted from here
        return "late"

    outcome = _execute(busy_then_waits, timeout_s=0.1)
    assert (outcome.ok, outcome.kind, outcome.abandoned) == (False, "timeout", True)


def test_an_async_tool_cancelled_from_outside_is_cancelled_not_timed_out() -> None:
    seen: list[str] = []

    async def waits(args: Args) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "late"

    async def go() -> None:
        tool = Tool("t", waits, "t", Args)
        call = ToolCall(call_id="c", tool="t", args={"q": "a"})
        task = asyncio.create_task(
            LiveToolExecutor().execute(tool, call, Args(q="a"), SessionState(), 5.0)
        )
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert seen == ["cancelled"]
