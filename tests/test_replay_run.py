"""Replay (the `Replayer` API): identical re-runs, first divergences, cut recordings, the
recorded ports and their pairing rule, live tools, saving, and the normalisation rules."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import (
    AgentLoadError,
    AgentRuntime,
    ModelRequest,
    Tool,
    TrustList,
    UntrustedReferenceError,
    counter_ids,
)
from agentloop.examples import SCENARIOS, Scenario
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentHalted,
    HaltSession,
    Journal,
    RecordedEvent,
    SessionStarted,
    SessionState,
    ToolCall,
    UserInput,
    import_file,
)
from replay import (
    DEFAULT_RULES,
    DivergenceError,
    NormalizationRules,
    RecordedClock,
    RecordedLLM,
    RecordedTools,
    RecordingExhausted,
    Replayer,
    ReplayOptions,
    ReplayResult,
    compare,
    normalize,
    record_of,
)

from . import replay_helpers as rh
from .loop_helpers import Script, fixed_clock, propose

FIXED = rh.FIXED


@pytest.fixture(scope="module")
def demo_journal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journal]:
    """Every demo scenario (seed 0) recorded once for the module."""
    with Journal.open(rh.demo_file(tmp_path_factory.mktemp("demo"))) as journal:
        yield journal


@pytest.fixture
def mem() -> Iterator[Journal]:
    with Journal.open(":memory:") as journal:
        yield journal


def replay(journal: Journal, session_id: str, **options: Any) -> ReplayResult:
    return Replayer(ReplayOptions(**options)).replay(journal, session_id)


# -- identical -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_demo_session_replays_identical(demo_journal: Journal, scenario: Scenario) -> None:
    session_id = f"demo-{scenario.name}-s0"
    result = replay(demo_journal, session_id)
    assert result.verdict == "identical", result.first_divergence
    assert result.first_divergence is None
    assert result.recording_complete
    assert (
        result.replayed_events == result.recorded_events == demo_journal.summary(session_id).events
    )
    assert result.agent == scenario.reference
    assert not result.unrecorded_calls and not result.live_differences
    assert not result.saved
    assert demo_journal.summary(result.replay_session_id) is None


def test_a_replay_needs_no_model_and_runs_no_tool(mem: Journal) -> None:
    rh.STOCK["a"] = 1
    rh.record(mem, "build_random", ["go"], seed=3)

    def boom(args: object) -> None:
        raise AssertionError("a recorded replay ran a tool")

    agent = rh.build_plain()
    agent.tools = [
        Tool(t.name, boom, t.description, t.args, guard=t.guard, parallel_safe=t.parallel_safe)
        for t in agent.tools
    ]
    agent.reference = "tests.replay_helpers:build_random"
    assert agent.llm is None
    assert replay(mem, "rec", agent=agent).identical


# -- the fixed twin of the buggy refund agent ----------------------------------------------


def test_the_fixed_refund_agent_diverges_where_its_guard_now_rejects(demo_journal: Journal) -> None:
    session_id = "demo-refund-buggy-s0"
    recorded = list(demo_journal.events(session_id))
    refund_seq = next(
        item.seq
        for item in recorded
        if isinstance(item.event, ActionCommitted) and item.event.tool == "issue_refund"
    )
    result = replay(demo_journal, session_id, agent=FIXED)
    divergence = result.first_divergence
    assert result.verdict == "diverged" and divergence is not None
    assert divergence.seq == refund_seq
    assert divergence.expected is not None and divergence.actual is not None
    assert divergence.expected["type"] == "action_committed"
    assert divergence.actual["type"] == "verification_failed"
    assert divergence.actual["stage"] == "guard"
    assert "propose a refund of at most $100" in divergence.actual["message"]
    changes = {change.path: change for change in divergence.changes}
    assert set(changes) == {"type", "stage", "message", "args", "result"}
    assert (changes["type"].expected, changes["type"].actual) == (
        "action_committed",
        "verification_failed",
    )
    assert changes["stage"].kind == "added" and changes["stage"].actual == "guard"
    assert changes["result"].kind == "removed"
    assert changes["result"].expected == {"amount": 150.0, "refund_id": "rf-2210-1"}
    assert "got verification_failed (guard: amount ($150) exceeds" in divergence.reason
    # everything before the refund matched: the session start too, though the agent differs
    assert result.agent == FIXED


def test_replay_or_raise(demo_journal: Journal) -> None:
    assert Replayer().replay_or_raise(demo_journal, "demo-refund-buggy-s0").identical
    with pytest.raises(DivergenceError, match=r"diverged at seq 5: expected action_committed"):
        Replayer(ReplayOptions(agent=FIXED)).replay_or_raise(demo_journal, "demo-refund-buggy-s0")
    try:
        Replayer(ReplayOptions(agent=FIXED)).replay_or_raise(demo_journal, "demo-refund-buggy-s0")
    except DivergenceError as error:
        assert error.result.first_divergence is not None
        assert error.result.first_divergence.seq == 5


def test_results_are_frozen(demo_journal: Journal) -> None:
    result = replay(demo_journal, "demo-refund-buggy-s0", agent=FIXED)
    with pytest.raises(AttributeError):
        result.verdict = "identical"
    with pytest.raises(AttributeError):
        result.first_divergence.seq = 0
    with pytest.raises(TypeError):
        Replayer(FIXED)


# -- recordings without an ending ----------------------------------------------------------


def test_a_cut_recording_replays_identical_up_to_its_end(mem: Journal) -> None:
    rh.record(mem, "build_pay", ["pay 90"], session_id="p")
    total = mem.require("p").events
    for stop in range(1, total):
        cut = rh.copy_session(mem, "p", mem, new_id=f"cut-{stop}", stop=stop)
        result = replay(mem, cut)
        assert result.identical, (stop, result.first_divergence)
        assert not result.recording_complete
        assert result.recorded_events == stop


def test_a_cut_recording_still_diverges_inside_its_prefix(mem: Journal) -> None:
    rh.record(mem, "build_pay", ["pay 90"], session_id="p")
    cut = rh.copy_session(mem, "p", mem, new_id="cut", stop=6)
    result = replay(mem, cut, agent="tests.replay_helpers:build_pay_strict")
    assert result.first_divergence is not None and result.first_divergence.seq == 5


def test_a_truncated_jsonl_import_replays_identical(mem: Journal, tmp_path: Path) -> None:
    rh.record(mem, "build_pay", ["pay 90"], session_id="p")
    path = rh.write_export(mem, "p", tmp_path / "p.jsonl", keep=5)
    with Journal.open(tmp_path / "other.db") as other:
        imported = import_file(other, path)
        assert imported.new_events == 5
        result = replay(other, imported.session_id)
    assert result.identical and not result.recording_complete


# -- running past the recording, exceptions -------------------------------------------------


def test_needing_more_proposals_than_recorded_is_a_divergence(mem: Journal) -> None:
    rh.record(mem, "build_pay", ["pay 10"], session_id="p")
    # the recording ends with a halt the code does not reproduce (an operator stopped it
    # after the first commit): the code asks the model once more than was recorded
    rh.copy_session(mem, "p", mem, new_id="stopped", stop=4)
    mem.append("stopped", [AgentHalted(rule="cancelled", reason="operator")], expected_seq=4)
    result = replay(mem, "stopped")
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 4
    assert "recording exhausted at seq 4" in divergence.reason
    assert divergence.actual is not None and divergence.actual["rule"] == "replay_stopped"
    assert result.replayed_events == 5


def test_the_recorded_llm_never_blocks_when_exhausted() -> None:
    llm = RecordedLLM([])
    with pytest.raises(RecordingExhausted, match="recording exhausted at seq 7"):
        llm.next_response(7)
    assert llm.exhausted and llm.served == 0
    request = ModelRequest(session_id="s", seq=7, system_prompt="", tools=[], messages=[])
    with pytest.raises(HaltSession) as stopped:  # the loop ends the session by this rule
        asyncio.run(llm.complete(request))
    assert stopped.value.rule == "replay_stopped"
    assert stopped.value.reason.startswith("replay stopped at seq 7: recording exhausted")
    assert llm.stopped_at == 7


def test_a_recorded_model_failure_is_replayed_as_it_happened(mem: Journal) -> None:
    agent = rh.build_pay()
    agent.reference = "tests.replay_helpers:build_pay"
    script = Script(propose(("echo", {"q": "x"})), ConnectionError("the API is down"))
    runtime = AgentRuntime(agent, mem, llm=script, clock=fixed_clock, ids=counter_ids("m"))
    runtime.start("m")
    asyncio.run(runtime.run_turn("m", "pay 10"))
    last = list(mem.events("m"))[-1].event
    assert isinstance(last, AgentHalted) and "the API is down" in last.reason
    result = replay(mem, "m")
    assert result.identical, result.first_divergence


def test_an_exception_in_the_new_agent_code_is_a_divergence_at_that_step(mem: Journal) -> None:
    rh.record(mem, "build_pay", ["pay 90"], session_id="p")
    result = replay(mem, "p", agent="tests.replay_helpers:build_pay_raising")
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.expected is not None and divergence.expected["type"] == "action_committed"
    assert divergence.actual is not None
    assert (divergence.actual["type"], divergence.actual["rule"]) == ("agent_halted", "error")
    assert "KeyError" in divergence.reason and "no limit configured for 90" in divergence.reason
    assert divergence.reason.startswith("the agent's code raised")
    # the old code is fine with the same recording
    assert replay(mem, "p", agent="tests.replay_helpers:build_pay").identical


def test_an_exception_outside_the_loop_is_reported_not_raised(
    mem: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    rh.record(mem, "build_pay", ["pay 10"], session_id="p")

    def broken(self: object, *args: object) -> None:
        raise RuntimeError("compaction bug")

    monkeypatch.setattr("agentloop.runtime.AgentRuntime._observe", broken)
    result = replay(mem, "p")
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 2
    assert divergence.actual is None
    assert "RuntimeError: compaction bug" in divergence.reason


def test_no_agent_reference_and_none_given_is_a_clear_error(mem: Journal) -> None:
    agent = rh.build_pay()
    runtime = AgentRuntime(agent, mem, clock=fixed_clock, ids=counter_ids("n"))
    runtime.run("pay 10", session_id=runtime.start("anon"))
    with pytest.raises(AgentLoadError, match="records no agent reference; name one with --agent"):
        replay(mem, "anon")
    assert replay(mem, "anon", agent="tests.replay_helpers:build_pay").identical


def test_a_missing_session_is_an_error(mem: Journal) -> None:
    from journal import SessionNotFoundError

    with pytest.raises(SessionNotFoundError):
        replay(mem, "nope")


# -- the recorded tools: pairing ------------------------------------------------------------


def _outcomes(*specs: tuple[str, dict[str, object], object]) -> list[RecordedEvent]:
    """Recorded commits of (tool, args, result), all with the same call id."""
    return [
        RecordedEvent(
            "s",
            seq,
            "2026-01-01T00:00:00.000000Z",
            1,
            "",
            ActionCommitted(call_id="call_0", tool=tool, args=args, result=result),
        )
        for seq, (tool, args, result) in enumerate(specs, 3)
    ]


def _serve(tools: RecordedTools, tool: str, args: dict[str, object]) -> object:
    spec = {t.name: t for t in rh.tools()}[tool]
    outcome = asyncio.run(
        tools.execute(
            spec, ToolCall(call_id="call_0", tool=tool, args=args), args, SessionState(), 1.0
        )
    )
    return outcome.result if outcome.ok else ("failed", outcome.message)


def test_recorded_tools_pair_by_position_and_args_never_by_call_id() -> None:
    recorded = _outcomes(
        ("stock", {"q": "a"}, {"level": 1}),
        ("stock", {"q": "b"}, {"level": 2}),
        ("stock", {"q": "a"}, {"level": 3}),
    )
    tools = RecordedTools(recorded)
    # the model reordered the calls: b first; a then gets the first a, then the second a
    assert _serve(tools, "stock", {"q": "b"}) == {"level": 2}
    assert _serve(tools, "stock", {"q": "a"}) == {"level": 1}
    assert _serve(tools, "stock", {"q": "a"}) == {"level": 3}
    assert _serve(tools, "stock", {"q": "a"})[0] == "failed"
    assert [(c.tool, c.args) for c in tools.unrecorded] == [("stock", {"q": "a"})]


def test_a_call_with_unrecorded_arguments_gets_a_visible_failure() -> None:
    tools = RecordedTools(_outcomes(("echo", {"q": "a"}, {"echo": "a"})))
    failed = _serve(tools, "echo", {"q": "zz"})
    assert failed == ("failed", "replay: the recording never ran echo with these arguments")


def _two_reads(seq_ids: tuple[str, str]) -> list[ToolCall]:
    return [
        ToolCall(call_id=seq_ids[0], tool="lookup", args={"q": "a"}),
        ToolCall(call_id=seq_ids[1], tool="lookup", args={"q": "bbb"}),
    ]


def _record_reads(journal: Journal, session_id: str, ids: tuple[str, str]) -> None:
    agent = rh.build_pay()
    agent.reference = "tests.replay_helpers:build_pay"
    script = Script(
        propose(*_two_reads(ids)),
        propose(*_two_reads(ids)[::-1]),
        propose(text="done"),
    )
    runtime = AgentRuntime(agent, journal, llm=script, clock=fixed_clock, ids=counter_ids("r"))
    runtime.start(session_id)
    asyncio.run(runtime.run_turn(session_id, "pay 1"))


def test_a_transcript_whose_call_ids_repeat_replays_identical(mem: Journal) -> None:
    _record_reads(mem, "same-ids", ("call_0", "call_0"))
    commits = [i.event for i in mem.events("same-ids") if isinstance(i.event, ActionCommitted)]
    assert {c.call_id for c in commits} == {"call_0"} and len(commits) == 4
    assert replay(mem, "same-ids").identical


def test_calls_reordered_between_recording_and_replay_get_their_own_results(
    mem: Journal,
) -> None:
    _record_reads(mem, "rec", ("c1", "c1"))
    # the model now answers the first proposal with its calls in the other order
    rh.copy_session(mem, "rec", mem, new_id="swapped", edit=_swap_first_proposal)
    result = replay(mem, "swapped")
    replayed = _replayed_commits(mem, "swapped")
    # every call got the result recorded for its own tool + arguments
    assert all(commit.result["q"] == commit.args["q"] for commit in replayed)
    assert [c.args["q"] for c in replayed[:2]] == ["bbb", "a"]
    # and the replay shows where the order changed: the first commit after the proposal
    assert result.first_divergence is not None and result.first_divergence.seq == 3
    assert [c.path for c in result.first_divergence.changes] == ["args.q", "result.n", "result.q"]


def _swap_first_proposal(item: RecordedEvent) -> ActionProposed | None:
    event = item.event
    if item.seq == 2 and isinstance(event, ActionProposed):
        return event.model_copy(update={"calls": event.calls[::-1]})
    return event


def _replayed_commits(journal: Journal, session_id: str) -> list[ActionCommitted]:
    with Journal.open(":memory:") as scratch:
        rh.copy_session(journal, session_id, scratch)
        Replayer(save=True).replay(scratch, session_id)
        return [
            item.event
            for item in scratch.events(f"{session_id}.replay-1")
            if isinstance(item.event, ActionCommitted)
        ]


# -- live tools ------------------------------------------------------------------------------


@pytest.fixture
def stock_session(mem: Journal) -> Iterator[Journal]:
    rh.STOCK.clear()
    rh.STOCK.update(a=5, b=7)
    agent = rh.build_pay()
    agent.reference = "tests.replay_helpers:build_pay"
    script = Script(
        propose(("stock", {"q": "a"}), ("echo", {"q": "b"})),
        propose(("stock", {"q": "b"})),
        propose(text="done"),
    )
    runtime = AgentRuntime(agent, mem, llm=script, clock=fixed_clock, ids=counter_ids("k"))
    runtime.start("stock")
    asyncio.run(runtime.run_turn("stock", "pay 1"))
    yield mem
    rh.STOCK.clear()


@pytest.mark.parametrize("live", [True, ["stock"]], ids=["all", "named"])
def test_live_tools_run_for_real_and_report_what_differs(
    stock_session: Journal, live: object
) -> None:
    assert replay(stock_session, "stock", live_tools=live).identical
    rh.STOCK["a"] = 6
    result = replay(stock_session, "stock", live_tools=live)
    [difference] = result.live_differences
    assert (difference.tool, difference.args) == ("stock", {"q": "a"})
    assert (difference.recorded, difference.live) == ({"level": 5}, {"level": 6})
    assert difference.recorded_seq == 3
    assert result.first_divergence is not None and result.first_divergence.seq == 3
    assert [c.path for c in result.first_divergence.changes] == ["result.level"]
    # tools not named live still come from the recording
    assert replay(stock_session, "stock", live_tools=["echo"]).identical


def test_recorded_tools_ignore_the_world(stock_session: Journal) -> None:
    rh.STOCK["a"] = 99
    assert replay(stock_session, "stock").identical


# -- saving ----------------------------------------------------------------------------------


def test_save_stores_the_replay_with_replay_of(demo_journal: Journal) -> None:
    result = Replayer(save=True).replay(demo_journal, "demo-research-s0")
    assert result.saved and result.identical
    summary = demo_journal.require(result.replay_session_id)
    assert summary.replay_of == "demo-research-s0"
    assert summary.events == result.replayed_events
    # recorded times: the saved replay is stamped like the recording
    original = [i.ts for i in demo_journal.events("demo-research-s0")]
    assert [i.ts for i in demo_journal.events(result.replay_session_id)] == original
    again = Replayer(save=True).replay(demo_journal, "demo-research-s0")
    assert again.replay_session_id != result.replay_session_id
    # a saved replay replays identical too
    assert Replayer().replay(demo_journal, result.replay_session_id).identical


# -- the comparison and its rules --------------------------------------------------------------


def test_default_rules_drop_exactly_the_documented_volatile_fields() -> None:
    assert dict(DEFAULT_RULES.ignore) == {
        "*": ("session_id", "seq", "ts", "hash", "v"),
        "session_started": ("agent", "code_version", "replay_of", "forked_from", "fork_seq"),
        "action_proposed": ("latency_ms", "request.digest"),
        "model_call_failed": ("latency_ms", "request.digest"),
        "action_committed": ("duration_ms", "result_text"),
        "action_failed": ("duration_ms",),
        "agent_halted": ("error.raised_at",),
    }
    record = {"type": "action_committed", "seq": 3, "ts": "t", "duration_ms": 2.0, "args": {}}
    assert normalize(record) == {"type": "action_committed", "args": {}}


def test_the_rule_set_is_extensible(mem: Journal) -> None:
    rh.record(mem, "build_pay", ["pay 90"], session_id="p")
    strict = "tests.replay_helpers:build_pay_strict"
    rules = DEFAULT_RULES.extended({"action_committed": ["result.paid"], "*": ["nothing.here"]})
    assert rules.paths_for("action_committed") == (
        "session_id",
        "seq",
        "ts",
        "hash",
        "v",
        "nothing.here",
        "duration_ms",
        "result_text",
        "result.paid",
    )
    assert DEFAULT_RULES.paths_for("action_committed") == (
        "session_id",
        "seq",
        "ts",
        "hash",
        "v",
        "duration_ms",
        "result_text",
    )
    record = {"type": "action_committed", "result": {"paid": 1, "id": 2}}
    assert normalize(record, rules) == {"type": "action_committed", "result": {"id": 2}}
    assert record["result"] == {"paid": 1, "id": 2}  # the input is not changed
    # a wider rule set makes a difference disappear
    recorded = list(mem.events("p"))
    replayed = [
        RecordedEvent(
            i.session_id,
            i.seq,
            i.ts,
            i.v,
            i.hash,
            i.event.model_copy(update={"result": {"paid": 1}}),
        )
        if isinstance(i.event, ActionCommitted) and i.event.tool == "pay"
        else i
        for i in recorded
    ]
    assert compare(recorded, replayed) is not None
    assert compare(recorded, replayed, rules) is None
    ignore_all = NormalizationRules({"*": ("session_id", "seq", "ts", "hash", "type", "args")})
    assert isinstance(ignore_all, NormalizationRules)
    assert (
        Replayer(ReplayOptions(rules=rules, agent=strict)).replay(mem, "p").first_divergence
        is not None
    )


def test_record_of_puts_the_envelope_beside_the_payload(demo_journal: Journal) -> None:
    item = next(demo_journal.events("demo-refund-buggy-s0", start=1, stop=2))
    assert record_of(item) == {
        "type": "user_input",
        "text": item.event.text,
        "session_id": "demo-refund-buggy-s0",
        "seq": 1,
        "ts": item.ts,
        "v": 1,
        "hash": item.hash,
    }
    assert isinstance(item.event, UserInput)


def test_the_recorded_clock_gives_each_seq_its_recorded_time(demo_journal: Journal) -> None:
    events = list(demo_journal.events("demo-refund-buggy-s0"))
    clock = RecordedClock(events)
    from journal.canonical import format_ts

    assert [format_ts(clock(i.seq)) for i in events] == [i.ts for i in events]
    assert clock(len(events) + 5) == clock(len(events) - 1)
    with pytest.raises(RecordingExhausted):
        RecordedClock([])(0)


def test_a_failure_recorded_as_action_failed_is_served_as_a_failure(mem: Journal) -> None:
    rh.record(mem, "build_random", ["go", "again"], seed=3)
    failed = [i for i in mem.events("rec") if isinstance(i.event, ActionFailed)]
    assert failed, "seed 3 records a failing call"
    assert replay(mem, "rec").identical


@pytest.mark.parametrize(
    "reference",
    ["os:system", "subprocess:run", "builtins:eval", "click.termui:edit", "tui.cli:main"],
)
def test_a_recording_cannot_name_code_off_the_trust_list(tmp_path: Path, reference: str) -> None:
    with Journal.open(tmp_path / "j.db") as journal:
        journal.append("evil", [SessionStarted(agent=reference), UserInput(text="hi")])
        with pytest.raises(UntrustedReferenceError, match="not on the trust list"):
            Replayer().replay(journal, "evil")


@pytest.mark.parametrize(
    ("reference", "why"),
    [
        ("os:system", "part of the standard library"),
        ("subprocess:run", "part of the standard library"),
        ("builtins:eval", "part of the standard library"),
        ("agentloop.examples.refund:Field", "defined in pydantic.fields"),
        ("agentloop.examples.refund:__builtins__", "dunder names are not allowed"),
        ("agentloop.examples.refund:build_fixed; rm -rf /", "not of the form module:factory"),
    ],
)
def test_a_reference_still_passes_the_formal_checks_when_trusted_or_given(
    tmp_path: Path, reference: str, why: str
) -> None:
    """The trust list comes first; what it lets through (or the user names) is still checked."""
    with Journal.open(tmp_path / "j.db") as journal:
        journal.append("evil", [SessionStarted(agent=reference), UserInput(text="hi")])
        everything = TrustList(patterns=("*",))
        with pytest.raises(AgentLoadError, match=why):
            Replayer(ReplayOptions(trust=everything)).replay(journal, "evil")
        with pytest.raises(AgentLoadError, match=why):
            Replayer(ReplayOptions(agent=reference)).replay(journal, "evil")
