"""capture.Recorder: order, one append per call, exceptions as halts; the plain-loop example
replayed (replay.replay_loop) and diffed like any other session."""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop import ModelResponse
from capture import Recorder
from capture import recorder as journal_recorder
from capture.examples import plain_loop
from capture.examples.plain_loop import dispatch, record, run
from capture.output import Destination
from journal import (
    ActionProposed,
    AgentEvent,
    ConflictError,
    InvalidEventError,
    Journal,
    RecordingOrderError,
    SessionNotFoundError,
    ToolCall,
    Usage,
    UserInput,
    fold,
)
from journal.fold import apply
from journal.formats import Redactor
from replay import RecordedToolPort, Replayer, ReplayOptions, replay_loop

from .helpers import run_cli

QUESTION = "What's the weather in Lisbon and Oslo, in °F?"
INPUTS = [QUESTION, "And in Atlantis?"]
REPO = Path(__file__).resolve().parent.parent


class CountingJournal:
    """Stands for a journal and counts (and checks) every append that reaches it."""

    def __init__(self, inner: Journal) -> None:
        self.inner = inner
        self.appends: list[tuple[int | None, int]] = []

    def append(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: Any = None,
    ) -> int:
        self.appends.append((expected_seq, len(events)))
        return self.inner.append(session_id, events, expected_seq=expected_seq, ts=ts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def started(journal: Journal, session_id: str = "s1") -> Recorder:
    recorder = Recorder(journal, session_id)
    recorder.start(
        agent="app:run", model="m-1", system_prompt="Be brief.", tools=plain_loop.TOOL_SPECS
    )
    return recorder


def proposed(recorder: Recorder, *ids: str, tool: str = "get_weather") -> ActionProposed:
    return recorder.model_output(
        calls=[ToolCall(call_id=i, tool=tool, args={"city": "Oslo"}) for i in ids],
        usage={"input_tokens": 10, "output_tokens": 2},
    )


# -- the API ------------------------------------------------------------------------


def test_a_session_written_call_by_call_folds_like_any_other(journal: Journal) -> None:
    recorder = started(journal)
    recorder.user_input("Weather in Oslo and Lima?")
    recorder.model_output(
        ActionProposed(
            calls=[
                ToolCall(call_id="a", tool="get_weather", args={"city": "Oslo"}),
                ToolCall(call_id="b", tool="get_weather", args={"city": "Lima"}),
                ToolCall(call_id="c", tool="get_weather", args="{oops"),
            ],
            reasoning="two cities",
            usage=Usage(input_tokens=30, output_tokens=9, cached_tokens=4),
            cost=0.002,
        )
    )
    recorder.tool_result("a", {"celsius": 4.0}, duration_ms=3.5)
    recorder.tool_failure("b", TimeoutError("no answer in 5 s"))
    recorder.tool_rejected("c", "arguments are not JSON:\n fix them")
    recorder.model_output(text="Oslo: 4 °C.", model="m-2")
    recorder.final("Oslo: 4 °C.")
    events = [item.event for item in journal.events("s1")]
    assert [e.type for e in events] == [
        "session_started",
        "user_input",
        "action_proposed",
        "action_committed",
        "action_failed",
        "verification_failed",
        "action_proposed",
        "agent_completed",
    ]
    assert events[0].model_dump(include={"agent", "model", "system_prompt"}) == {
        "agent": "app:run",
        "model": "m-1",
        "system_prompt": "Be brief.",
    }
    assert [t.name for t in events[0].config.tools] == ["get_weather", "to_fahrenheit"]
    assert events[0].system_prompt_hash and events[0].metadata == {"captured_with": "recorder"}
    assert events[2].model == "m-1"  # the session's model by default
    assert events[3].model_dump(include={"args", "result", "duration_ms"}) == {
        "args": {"city": "Oslo"},
        "result": {"celsius": 4.0},
        "duration_ms": 3.5,
    }
    assert (events[4].kind, events[4].message) == ("timeout", "TimeoutError: no answer in 5 s")
    assert (events[5].stage, events[5].message) == ("schema", "arguments are not JSON: fix them")
    state = fold(journal.events("s1"))
    assert state == journal.state("s1") == recorder.state
    assert (state.status, state.steps, state.failures, state.tokens_in, state.tokens_cached) == (
        "completed",
        3,
        2,
        30,
        4,
    )


def test_results_are_converted_to_json_and_anything_else_is_refused(journal: Journal) -> None:
    class Reading(BaseModel):
        city: str
        celsius: float

    recorder = started(journal)
    proposed(recorder, "a", "b", "c")
    assert recorder.tool_result("a", Reading(city="Oslo", celsius=4)).result == {
        "city": "Oslo",
        "celsius": 4.0,
    }
    for bad in (float("nan"), object(), {"deep": [2**70]}):
        with pytest.raises(InvalidEventError, match="the result of get_weather is not JSON"):
            recorder.tool_result("b", bad)
    assert journal.last_seq("s1") == 2  # nothing written by the refusals
    kinds = [
        recorder.tool_failure(i, e).kind for i, e in (("b", KeyError("x")), ("c", OSError("y")))
    ]
    assert kinds == ["business", "infrastructure"]


@pytest.mark.parametrize(
    ("setup", "call", "message"),
    [
        (None, lambda r: r.user_input("hi"), "not started"),
        (lambda r: None, lambda r: r.start(), "started already"),
        (
            lambda r: proposed(r, "a"),
            lambda r: r.tool_result("zz", 1),
            "no model output proposed call 'zz'",
        ),
        (
            lambda r: (proposed(r, "a"), r.tool_result("a", 1)),
            lambda r: r.tool_result("a", 2),
            "call 'a' was answered already",
        ),
        (
            lambda r: (proposed(r, "a"), r.tool_failure("a", "boom")),
            lambda r: r.tool_rejected("a", "again"),
            "answered already",
        ),
        (
            lambda r: proposed(r, "a"),
            lambda r: r.tool_result("a", 1, tool="other"),
            "of tool 'other'",
        ),
        (
            lambda r: r.final("done"),
            lambda r: r.model_output(text="more"),
            "record the next user input",
        ),
        (lambda r: r.final("done"), lambda r: r.final("again"), "final answer already"),
        (
            lambda r: r.halt("budget", "out of money"),
            lambda r: r.user_input("hi"),
            "halted by rule budget",
        ),
        (
            lambda r: r.fail(RuntimeError("x")),
            lambda r: r.model_output(text="x"),
            "failed by rule error",
        ),
    ],
)
def test_calls_out_of_order_are_refused_and_write_nothing(
    journal: Journal, setup: Any, call: Any, message: str
) -> None:
    recorder = Recorder(journal, "s1")
    if setup is not None:
        recorder.start()
        recorder.user_input("hello")
        setup(recorder)
    before = (journal.last_seq("s1"), recorder.next_seq)
    with pytest.raises(RecordingOrderError, match=message):
        call(recorder)
    assert (journal.last_seq("s1"), recorder.next_seq) == before


def test_misuse_of_the_api_is_refused(journal: Journal) -> None:
    recorder = started(journal)
    with pytest.raises(TypeError, match="not both"):
        recorder.model_output(ActionProposed(text="a"), text="b")
    with pytest.raises(InvalidEventError, match="no function name"):
        Recorder(journal, "s2").start(tools=[{"type": "function", "function": {}}])
    with pytest.raises(SessionNotFoundError):
        Recorder.resume(journal, "nobody")
    assert journal.summary("s2") is None and journal.last_seq("s1") == 0


def test_repeated_call_ids_are_answered_one_by_one(journal: Journal) -> None:
    recorder = started(journal)
    proposed(recorder, "dup", "dup")
    recorder.tool_result("dup", 1)
    assert [c.call_id for c in recorder.pending] == ["dup"]
    recorder.tool_result("dup", 2)
    with pytest.raises(RecordingOrderError, match="answered already"):
        recorder.tool_result("dup", 3)
    proposed(recorder, "dup")  # a later output may reuse the id
    recorder.tool_result("dup", 4)


def test_unanswered_calls_are_allowed(journal: Journal) -> None:
    recorder = started(journal)
    recorder.user_input("hi")
    proposed(recorder, "a", "b")
    recorder.tool_result("a", 1)
    proposed(recorder, "c")  # the loop moved on without b
    with pytest.raises(RecordingOrderError, match="waiting: c"):
        recorder.tool_result("b", 2)
    recorder.final("ok")
    assert journal.state("s1").pending_calls == []


def test_each_call_is_exactly_one_append_with_the_expected_seq(journal: Journal) -> None:
    counting = CountingJournal(journal)
    record(counting, INPUTS, session_id="s1")  # type: ignore[arg-type]
    events = list(journal.events("s1"))
    assert counting.appends == [(seq, 1) for seq in range(len(events))]


@pytest.mark.parametrize("redacted", [False, True], ids=["as-written", "redacted"])
def test_the_recorder_folds_an_event_only_when_the_journal_did_not(
    journal: Journal, monkeypatch: pytest.MonkeyPatch, redacted: bool
) -> None:
    folds: list[str] = []

    def counted(state: Any, recorded: Any) -> Any:
        folds.append(recorded.event.type)
        return apply(state, recorded)

    monkeypatch.setattr(journal_recorder, "apply", counted)
    redactor = Redactor(patterns={"city": "Oslo"}) if redacted else None
    recorder = started(Destination(journal, redactor=redactor))  # type: ignore[arg-type]
    recorder.user_input("Weather in Oslo?")
    proposed(recorder, "c1")
    recorder.tool_result("c1", {"city": "Oslo", "temp_f": 41})
    recorder.final("41 °F in Oslo.")
    # the journal folded what it wrote; a redacted event is folded again, in the clear
    assert folds == ([e.event.type for e in journal.events("s1")] if redacted else [])
    assert recorder.state.last_seq == 4 and "Oslo" in recorder.state.model_dump_json()
    assert (recorder.state == journal.state("s1")) is not redacted


def test_a_concurrent_writer_is_a_conflict_and_nothing_is_lost(journal: Journal) -> None:
    recorder = started(journal)
    journal.append("s1", [UserInput(text="from elsewhere")], expected_seq=1)
    with pytest.raises(ConflictError):
        recorder.user_input("mine")
    assert [e.event.type for e in journal.events("s1")] == ["session_started", "user_input"]
    resumed = Recorder.resume(journal, "s1")
    resumed.user_input("mine")
    assert resumed.next_seq == 3 and resumed.state == journal.state("s1")


# -- the context manager -------------------------------------------------------------


def test_an_uncaught_exception_is_a_halt_with_its_cleaned_message(journal: Journal) -> None:
    with pytest.raises(RuntimeError), Recorder(journal, "s1") as recorder:
        recorder.start()
        recorder.user_input("hi")
        raise RuntimeError("no such\n   order\t7" + "!" * 400)
    state = journal.state("s1")
    assert (state.status, state.halt_rule) == ("failed", "error")
    assert state.halt_reason is not None and len(state.halt_reason) == 300
    assert state.halt_reason.startswith("RuntimeError: no such order 7!!!")
    assert state.halt_reason.endswith("…")


def test_the_context_manager_leaves_alone_what_it_cannot_or_need_not_record(
    journal: Journal,
) -> None:
    with pytest.raises(ValueError), Recorder(journal, "never") as recorder:
        raise ValueError("before start")
    assert journal.summary("never") is None
    with pytest.raises(ValueError), Recorder(journal, "halted") as recorder:
        recorder.start()
        recorder.halt("budget", "spent")
        raise ValueError("after the halt")
    assert journal.state("halted").halt_rule == "budget"
    with pytest.raises(KeyboardInterrupt), Recorder(journal, "interrupted") as recorder:
        recorder.start()
        raise KeyboardInterrupt
    assert journal.state("interrupted").status == "running"  # like a crash: nothing claimed
    with Recorder(journal, "fine") as recorder:
        recorder.start()
    assert journal.state("fine").status == "running"


def test_a_halt_that_cannot_be_written_never_hides_the_loops_exception(journal: Journal) -> None:
    with pytest.raises(RuntimeError) as raised, Recorder(journal, "s1") as recorder:
        recorder.start()
        journal.append("s1", [UserInput(text="another writer")], expected_seq=1)
        raise RuntimeError("the loop's own error")
    assert "could not record the halt" in raised.value.__notes__[0]


def test_journal_imports_nothing_above_it() -> None:
    for path in (REPO / "journal").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] not in {"agentloop", "replay", "tui"}, path
            if isinstance(node, ast.Import):
                assert all(
                    a.name.split(".")[0] not in {"agentloop", "replay", "tui"} for a in node.names
                )


# -- the example loop, replayed ------------------------------------------------------


@pytest.fixture
def weather(journal: Journal) -> str:
    return record(journal, INPUTS, session_id="weather")


def test_the_example_loop_journals_five_kinds_of_call(journal: Journal, weather: str) -> None:
    types = [item.event.type for item in journal.events(weather)]
    assert set(types) == {
        "session_started",
        "user_input",
        "action_proposed",
        "action_committed",
        "action_failed",
        "agent_completed",
    }
    assert journal.state(weather).status == "completed"
    source = Path(plain_loop.__file__).read_text(encoding="utf-8")
    assert sum(f"# {n}" in source for n in range(1, 6)) == 5


def test_the_example_session_replays_identical(journal: Journal, weather: str) -> None:
    result = replay_loop(journal, weather, run)
    assert result.identical, result.first_divergence
    assert (result.recorded_events, result.replayed_events) == (15, 15)
    assert result.recording_complete and not result.unrecorded_calls


def test_a_changed_loop_diverges_at_the_step_it_changed(journal: Journal, weather: str) -> None:
    def rounding(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> object:
        def rounded(name: str, args: Any) -> Any:
            result = tools(name, args)
            return {k: round(v) if isinstance(v, float) else v for k, v in result.items()}

        return run(llm, rounded, recorder, inputs)

    result = replay_loop(journal, weather, rounding)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 3
    assert divergence.reason == "action_committed differs in result.celsius"
    assert [(c.path, c.expected, c.actual) for c in divergence.changes] == [
        ("result.celsius", 21.5, 22)
    ]


class DoubleCheck:
    """A changed loop: it asks the model once more before each final answer."""

    def __init__(self, recorder: Recorder, llm: Any) -> None:
        self.recorder, self.llm = recorder, llm

    def final(self, answer: str) -> Any:
        self.recorder.model_output(self.llm([]))
        return self.recorder.final(answer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.recorder, name)


def double_checking(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> object:
    return run(llm, tools, DoubleCheck(recorder, llm), inputs)


def test_asking_the_model_for_more_than_was_recorded_names_the_step(journal: Journal) -> None:
    session = record(journal, [QUESTION], session_id="one-turn")
    result = replay_loop(journal, session, double_checking)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 9
    assert divergence.reason == (
        "recording exhausted at seq 9: the code asked for model output #4, the recording has 3"
    )
    assert divergence.expected is not None and divergence.expected["type"] == "agent_completed"
    assert divergence.actual is not None and divergence.actual["rule"] == "replay_stopped"


def test_running_on_past_the_recording_is_a_divergence(journal: Journal, weather: str) -> None:
    def insistent(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> object:
        run(llm, tools, recorder, [*inputs, "One more: in Lima?"])
        return None

    result = replay_loop(journal, weather, insistent)
    assert result.first_divergence is not None and result.first_divergence.seq == 15
    assert result.first_divergence.reason == "the replay went on past the end of the recording"


def test_a_recorded_crash_replays_identical_and_a_fix_shows_where(journal: Journal) -> None:
    def fragile(name: str, args: Any) -> Any:
        if args.get("city") == "Oslo":
            raise SystemError("weather service down")
        return dispatch(name, args)

    def crashing(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> object:
        recorder.start(agent="tests.test_recorder:crashing", model="m")
        recorder.user_input(inputs[0])
        reply = recorder.model_output(llm([{"role": "user", "content": inputs[0]}]))
        for call in reply.calls:  # no try: a tool error escapes the loop
            recorder.tool_result(call.call_id, tools(call.tool, call.args))
        return None

    with pytest.raises(SystemError), Recorder(journal, "crash") as recorder:
        crashing(plain_loop.scripted_model, fragile, recorder, [QUESTION])
    state = journal.state("crash")
    assert (state.status, state.halt_reason) == ("failed", "SystemError: weather service down")
    assert replay_loop(journal, "crash", crashing).identical
    fixed = replay_loop(
        journal, "crash", crashing, ReplayOptions(live_tools=True), tool_port=dispatch
    )
    assert fixed.first_divergence is not None and fixed.first_divergence.seq == 4
    assert fixed.first_divergence.reason == "expected agent_halted, got action_committed"


def test_tools_recorded_by_default_live_on_request(journal: Journal, weather: str) -> None:
    same = replay_loop(
        journal, weather, run, ReplayOptions(live_tools=["to_fahrenheit"]), tool_port=dispatch
    )
    assert same.identical and not same.live_differences

    def changed(name: str, args: Any) -> Any:
        return {"fahrenheit": 0.0} if name == "to_fahrenheit" else dispatch(name, args)

    moved = replay_loop(
        journal, weather, run, ReplayOptions(live_tools=["to_fahrenheit"]), tool_port=changed
    )
    assert [(d.tool, d.recorded, d.live, d.recorded_seq) for d in moved.live_differences] == [
        ("to_fahrenheit", {"fahrenheit": 70.7}, {"fahrenheit": 0.0}, 6),
        ("to_fahrenheit", {"fahrenheit": 39.2}, {"fahrenheit": 0.0}, 7),
    ]
    assert moved.first_divergence is not None and moved.first_divergence.seq == 6
    port = RecordedToolPort(list(journal.events(weather)), Recorder(journal), live_tools=True)
    with pytest.raises(ValueError, match="given no tool_port"):
        port("get_weather", {"city": "Oslo"})


def test_the_session_is_ordinary_for_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "loops.db"
    with Journal.open(db) as journal:
        record(journal, INPUTS, session_id="weather")
    listed = run_cli("sessions", "--db", db, "--json")
    assert listed.exit_code == 0
    [summary] = json.loads(listed.stdout)
    assert (summary["agent"], summary["status"]) == (
        "capture.examples.plain_loop:run",
        "completed",
    )
    assert run_cli("verify", "--db", db).exit_code == 0
    assert "get_weather" in run_cli("show", "weather", "--db", db).stdout
    exported = tmp_path / "weather.jsonl"
    assert run_cli("export", "weather", "--db", db, "-o", exported).exit_code == 0
    replayed = run_cli("replay", exported, "--json")
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    assert run_cli("replay", "weather", "--db", db, "--save").exit_code == 0
    diffed = run_cli("diff", "weather", "weather.replay-1", "--db", db)
    assert diffed.exit_code == 0 and "identical" in diffed.stdout
    with Journal.open(db) as journal:
        assert Replayer().replay(journal, "weather").identical
    # a fork re-runs the loop from its start, keeps it with its lineage
    forked = run_cli("fork", "weather", "--at", "3", "--db", db, "--json")
    assert forked.exit_code == 0, forked.stdout + forked.stderr
    fork = json.loads(forked.stdout)
    assert (fork["forked_from"], fork["fork_seq"], fork["status"]) == ("weather", 3, "completed")
    with Journal.open(db) as journal:
        head = next(iter(journal.events(fork["session_id"]))).event
        assert (head.forked_from, head.fork_seq, head.replay_of) == ("weather", 3, None)
        assert fork["last_seq"] == journal.require("weather").last_seq


# -- a crash, raised again only from the call it came out of --------------------------------


class ModelDown(Exception):
    """The model API failed."""


class LoopFailed(Exception):
    """The loop's own error, raised from the model API's."""


WEATHER_CALL = ToolCall(call_id="c1", tool="weather", args={"city": "Oslo"})


def crashing_loop(*, bug: bool = False, wraps: bool = False, retries: bool = False) -> Any:
    """A loop that asks the model, runs its one call, and asks again; ``bug`` reads a key
    the result does not have, ``wraps`` raises the model's error as its own, ``retries``
    asks once more instead."""

    def run(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> None:
        recorder.start(agent="tests.loop:run", model="m")
        for text in inputs:
            recorder.user_input(text)
            reply = recorder.model_output(llm(text))
            for call in reply.calls:
                result = tools(call.tool, call.args)
                recorder.tool_result(call.call_id, result)
                if bug:
                    result["humidity"]  # KeyError: the result has none
            for attempt in range(2):
                try:
                    reply = recorder.model_output(llm(text))
                    break
                except ModelDown as error:
                    if retries and attempt == 0:
                        continue
                    if wraps:
                        raise LoopFailed("no answer") from error
                    raise
            recorder.final(reply.text or "")

    return run


def crashed(journal: Journal, session_id: str, *, model_fails: bool, **loop: bool) -> str:
    """Record a session of `crashing_loop` that ends by an exception."""
    replies = iter([ModelResponse(calls=[WEATHER_CALL]), ModelResponse(text="4 °C")])

    def model(text: str) -> ModelResponse:
        reply = next(replies)
        if model_fails and not reply.calls:
            raise ModelDown("503 from the model API")
        return reply

    with pytest.raises(Exception), Recorder(journal, session_id) as recorder:  # noqa: B017
        crashing_loop(**loop)(model, lambda tool, args: {"celsius": 4}, recorder, ["Oslo?"])
    assert journal.state(session_id).halt_rule == "error"
    return session_id


def test_a_crash_of_the_loops_own_line_is_not_raised_again_once_fixed(journal: Journal) -> None:
    """The question a replay answers: is it fixed now? The fixed loop goes on past it."""
    session = crashed(journal, "bug", model_fails=False, bug=True)
    assert replay_loop(journal, session, crashing_loop(bug=True)).identical
    fixed = replay_loop(journal, session, crashing_loop())
    divergence = fixed.first_divergence
    assert divergence is not None and divergence.seq == 4
    assert divergence.reason.startswith("the recording stops here (error), the code goes on")


@pytest.mark.parametrize("wraps", [False, True], ids=["raised", "raised-as-its-own"])
def test_a_model_api_error_is_raised_again_by_the_model_call_once(
    journal: Journal, wraps: bool
) -> None:
    """The model call raises the API's error (not the loop's own made of it), once: a loop
    that now retries goes on past the recording's end."""
    session = crashed(journal, "down", model_fails=True, wraps=wraps)
    result = replay_loop(journal, session, crashing_loop(wraps=wraps))
    assert result.identical, result.first_divergence
    retrying = replay_loop(journal, session, crashing_loop(wraps=wraps, retries=True))
    divergence = retrying.first_divergence
    assert divergence is not None and divergence.seq == 4
    assert divergence.reason.startswith("the recording stops here (error), the code goes on")


def test_a_crash_around_a_call_stops_the_replay_saying_the_result_was_never_journaled(
    journal: Journal,
) -> None:
    """``check(llm(...))`` raised after the model answered: the answer was never journaled,
    so no replay can tell whether the code (changed or not) would crash again."""

    def check(reply: ModelResponse) -> ModelResponse:
        raise ValueError("an answer without a city")

    def checking(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> None:
        recorder.start(agent="tests.loop:checking", model="m")
        recorder.user_input(inputs[0])
        recorder.model_output(check(llm(inputs[0])))

    with pytest.raises(ValueError), Recorder(journal, "checked") as recorder:
        checking(lambda text: ModelResponse(text="4 °C"), None, recorder, ["Oslo?"])
    divergence = replay_loop(journal, "checked", checking).first_divergence
    assert divergence is not None and divergence.seq == 2
    assert divergence.reason == (
        "replay stopped at seq 2: the recording holds nothing of what llm(inputs[0]) returned: "
        "the session crashed in check(llm(inputs[0])) (ValueError: an answer without a city) "
        "before it was journaled"
    )
