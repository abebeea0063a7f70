"""One home for each recorded fact: the runtime and the journal's captures compute the
prefix hash, a failure's kind and message, a proposal's output and the time of an event
with the same code, so a replay that recomputes a fact with "the other copy" cannot
disagree."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentloop
import journal
from agentloop import LiveToolExecutor, ModelResponse, ToolError
from capture import Recorder
from journal import ActionProposed, Journal, ToolCall, Usage, failure_of

from .loop_helpers import Script, agent_of, failing_tool, ok_tool, run_turns

HOSTS = {
    "prefix_hash": (agentloop.prefix_hash, journal.prefix_hash),
    "classify_error": (agentloop.classify_error, journal.failure_kind),
    "Clock": (agentloop.Clock, journal.Clock),
    "system_clock": (agentloop.system_clock, journal.system_clock),
}


def test_the_runtime_uses_the_journals_own_functions() -> None:
    for name, (runtime, recorded) in HOSTS.items():
        assert runtime is recorded, name


class Declined(Exception):
    kind = "business"


ERRORS = st.sampled_from(
    [ValueError, KeyError, LookupError, TimeoutError, RuntimeError, OSError, ToolError, Declined]
)


@given(ERRORS, st.text(max_size=400))
def test_a_tool_failure_is_recorded_alike_by_the_runtime_and_the_recorder(
    kind: type[Exception], text: str
) -> None:
    error = kind(text)
    tool = failing_tool("f", error)
    outcome = asyncio.run(
        LiveToolExecutor().execute(tool, ToolCall(call_id="c", tool="f", args={}), {}, None, 5.0)  # type: ignore[arg-type]
    )
    assert (outcome.kind, outcome.message) == failure_of(error)
    assert ToolError("x").kind == "business"


def test_the_prefix_hash_of_a_runtime_session_equals_the_recorders(tmp_path: Any) -> None:
    agent = agent_of(ok_tool("echo"), failing_tool("f", ValueError("no")))
    with Journal.open(tmp_path / "j.db") as opened:
        run_turns(agent, opened, Script(), "hi", session_id="runtime")
        shown = [tool.model_spec(max_leaves=10_000, max_depth=100) for tool in agent.tools]
        with Recorder(opened, "recorder") as recorder:
            recorder.start(system_prompt=agent.system_prompt, tools=shown)
        started = {s: next(iter(opened.events(s))).event for s in ("runtime", "recorder")}
    assert started["runtime"].system_prompt_hash == started["recorder"].system_prompt_hash


CALLS = st.lists(
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers() | st.text(max_size=5)),
    max_size=3,
)


@given(CALLS, st.text(max_size=20) | st.none())
def test_a_proposal_and_its_model_output_map_both_ways(
    arguments: list[dict[str, Any]], text: str | None
) -> None:
    proposal = ActionProposed(
        calls=[
            ToolCall(call_id=f"c{i}", tool="t", args=args).with_text()
            for i, args in enumerate(arguments)
        ],
        text=text,
        model="m",
        usage=Usage(input_tokens=3, output_tokens=2),
        latency_ms=1.5,
    )
    output = ModelResponse.of(proposal)
    assert [list(call.args.items()) for call in output.calls] == [
        list(call.as_given.items()) for call in proposal.calls
    ]
    assert output.as_proposal() == proposal
