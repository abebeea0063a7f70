"""The model's context: built from the journal, compacted through context_compacted events."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import (
    COMPACTED_RESULT,
    Context,
    Tool,
    compact_result,
    estimate_tokens,
    plan_compaction,
    prefix_hash,
)
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    ContextCompacted,
    Guardrails,
    Journal,
    ToolCall,
    UserInput,
    canonical_bytes,
    fold,
)

from .loop_helpers import (
    Args,
    Script,
    after_start,
    agent_of,
    answer,
    events_of,
    failing_tool,
    ok_tool,
    propose,
    proposed,
    run_turns,
    runtime_for,
)
from .strategies import json_values

WORDS = "word " * 400


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_tokens_and_the_prefix_hash() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    spec = ok_tool().model_spec(max_leaves=10, max_depth=2)
    assert prefix_hash("p", [spec]) == prefix_hash("p", [spec])
    assert prefix_hash("p", [spec]) != prefix_hash("q", [spec])
    assert prefix_hash("p", [spec]) != prefix_hash("p", [])


def test_the_log_follows_the_events() -> None:
    context = Context()
    call = ToolCall(call_id="c1", tool="echo", args={"q": "a"})
    events = [
        UserInput(text="hi"),
        ActionProposed(calls=[call], text="looking"),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "a"}, result={"echo": "a"}),
        ActionProposed(text="hello"),
        AgentCompleted(answer="hello"),
    ]
    for seq, event in enumerate(events, 1):
        context.add(seq, event)
    context.scratch["note"] = "never sent"
    assert context.chat() == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"q":"a"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"echo":"a"}', "tool_call_id": "c1"},
        {"role": "assistant", "content": "hello"},
    ]
    assert plan_compaction(context, Guardrails(), 32_000) is None


def test_a_large_result_is_compacted_before_the_next_call(journal: Journal) -> None:
    big = Tool("big", lambda a: {"text": WORDS}, "big", Args)
    call = propose(("big", {"q": "a"}))
    model = Script(call, answer("ok"))
    rails = {"compact_result_tokens": 100, "compact_summary_tokens": 20}
    run_turns(agent_of(big, rails=rails), journal, model, "x")
    result = {"text": WORDS}
    summary = '[result compacted from ~503 tokens] -> {"text":"' + "word " * 13 + "wo…"
    assert after_start(journal) == [
        UserInput(text="x"),
        proposed(call),
        ActionCommitted(call_id="c1", tool="big", args={"q": "a"}, result=result),
        ContextCompacted(from_seq=3, to_seq=3, summary=summary, tokens_before=503, tokens_after=20),
        proposed(answer("ok")),
        AgentCompleted(answer="ok"),
    ]
    assert model.requests[1].messages[-1] == {
        "role": "tool",
        "content": summary,
        "tool_call_id": "c1",
    }


def test_a_run_of_identical_failures_becomes_one_frame(journal: Journal) -> None:
    call = propose(("f", {"q": "a"}))
    model = Script(call, call, answer("gave up"))
    run_turns(agent_of(failing_tool("f", ValueError("no stock"))), journal, model, "x")
    frame = ContextCompacted(
        from_seq=2,
        to_seq=5,
        summary="2 calls to f failed the same way: error (business): no stock",
        tokens_before=22,
        tokens_after=15,
    )
    lost = ActionFailed(
        call_id="c1", tool="f", kind="business", message="no stock", args={"q": "a"}
    )
    assert after_start(journal) == [
        UserInput(text="x"),
        proposed(call),
        lost,
        proposed(call),
        lost,
        frame,
        proposed(answer("gave up")),
        AgentCompleted(answer="gave up"),
    ]
    assert model.requests[2].messages == [
        {"role": "user", "content": "x"},
        {"role": "system", "content": f"[summary of steps 2..5] {frame.summary}"},
    ]


@pytest.mark.parametrize(("setting", "folded"), [(None, False), (3, False), (2, True)])
def test_the_failure_run_fold_is_a_recorded_setting(
    journal: Journal, setting: int | None, folded: bool
) -> None:
    call = propose(("f", {"q": "a"}))
    agent = agent_of(
        failing_tool("f", ValueError("no stock")), rails={"compact_failure_run": setting}
    )
    model = Script(call, call, answer("gave up"))
    run_turns(agent, journal, model, "x")
    events = events_of(journal)
    assert events[0].config.guardrails.compact_failure_run == setting  # type: ignore[union-attr]
    assert bool([e for e in events if isinstance(e, ContextCompacted)]) is folded
    assert (len(model.requests[2].messages) == 2) is folded


def test_different_failures_are_not_folded_together(journal: Journal) -> None:
    calls = [propose(("f", {"q": "a"})), propose(("g", {"q": "a"}))]
    tools = failing_tool("f", ValueError("no stock")), failing_tool("g", ValueError("closed"))
    run_turns(agent_of(*tools), journal, Script(*calls, answer()), "x")
    assert not [e for e in events_of(journal) if isinstance(e, ContextCompacted)]


def _chatty(journal: Journal, turns: int) -> tuple[Script, list[Any]]:
    """Turns of one 200-character call each against a 400-token window."""
    steps: list[Any] = []
    for turn in range(turns):
        steps += [propose(("echo", {"q": f"{turn}" + "y" * 200})), answer(f"answer {turn}")]
    model = Script(*steps)
    agent = agent_of(ok_tool(), model_settings={"context_window": 400})
    run_turns(agent, journal, model, *[f"question {t}" for t in range(turns)])
    return model, events_of(journal)


def test_window_pressure_compacts_the_earlier_turns(journal: Journal) -> None:
    model, events = _chatty(journal, 4)
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    assert compactions, "the window filled up"
    for compaction in compactions:
        assert compaction.tokens_after is not None and compaction.tokens_before is not None
        assert compaction.tokens_after < compaction.tokens_before
        # the current turn is never summarised: the range ends before its user input
        seq = events.index(compaction)
        current = max(i for i in range(seq) if isinstance(events[i], UserInput))
        assert compaction.to_seq < current
    last = model.requests[-1].messages
    assert roles(last)[0] == "system" and last[0]["content"].startswith("[summary of steps ")
    assert "user" in roles(last)
    window = 400 * Guardrails().compact_early
    assert all(
        sum(estimate_tokens(m["content"]) for m in request.messages) < 2 * window
        for request in model.requests
    )


def test_pressure_from_the_current_turn_alone_summarises_its_earlier_steps(
    journal: Journal,
) -> None:
    """The earlier turn becomes one frame; then the current turn's earlier steps follow,
    while its user message and its latest step stay as they are."""
    steps = [propose(("echo", {"q": "x" * 300})), answer("a")]
    steps += [propose(("echo", {"q": f"{i}" + "y" * 300})) for i in range(4)] + [answer("b")]
    agent = agent_of(ok_tool(), model_settings={"context_window": 400})
    model = Script(*steps)
    run_turns(agent, journal, model, "first", "second")
    events = events_of(journal)
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    assert compactions[0].from_seq == 1 and compactions[0].to_seq == 5  # the first turn
    second = max(i for i, e in enumerate(events) if isinstance(e, UserInput))
    assert all(c.from_seq > second for c in compactions[1:])  # never the user message
    assert all((c.tokens_after or 0) < (c.tokens_before or 0) for c in compactions)
    last = model.requests[-1].messages
    assert [m["role"] for m in last][-2:] == ["assistant", "tool"]  # the latest step, whole
    assert any(m["role"] == "user" and m["content"] == "second" for m in last)


def test_resume_rebuilds_the_same_context(journal: Journal) -> None:
    _chatty(journal, 3)
    live = runtime_for(agent_of(ok_tool()), journal, Script())
    asyncio.run(live.run_turn("s", "one more"))
    resumed = runtime_for(agent_of(ok_tool()), journal, Script())
    resumed.resume("s")
    assert resumed._sessions["s"].context.chat() == live._sessions["s"].context.chat()
    assert resumed._sessions["s"].state == fold(journal.events("s"))


def test_an_urgent_window_compacts_the_earlier_steps_of_a_long_current_turn() -> None:
    from agentloop.context import Context, plan_compaction
    from journal import ActionCommitted, ActionProposed, Guardrails, ToolCall, UserInput

    context = Context()
    context.add(1, UserInput(text="collect everything"))
    seq = 2
    for page in range(4):
        call = ToolCall(call_id=f"c{page}", tool="fetch", args={"page": page})
        context.add(seq, ActionProposed(calls=[call]))
        context.add(seq + 1, ActionCommitted(call_id=f"c{page}", tool="fetch", result="x" * 2000))
        seq += 2
    rails = Guardrails()
    compaction = plan_compaction(context, rails, window_tokens=2000)
    assert compaction is not None
    assert (compaction.from_seq, compaction.to_seq) == (2, 7)  # pages 0-2; page 3 stays
    context.add(seq, compaction)
    assert [m.role for m in context.messages] == ["user", "system", "assistant", "tool"]
    assert context.messages[-1].content == "x" * 2000
    assert (compaction.tokens_after or 0) < (compaction.tokens_before or 0)


# -- results too large to record whole --------------------------------------------------------

limits = st.integers(1024, 6000)


@settings(max_examples=200)
@given(
    result=json_values
    | st.text(min_size=1000, max_size=5000)
    | st.lists(st.text(min_size=50, max_size=300), min_size=5, max_size=40),
    limit=limits,
)
def test_a_compacted_result_fits_its_limit_and_keeps_its_size_digest_and_start(
    result: Any, limit: int
) -> None:
    recorded = compact_result(result, limit)
    body = canonical_bytes(result)
    if len(body) <= limit:
        assert recorded is result
        return
    stand_in = recorded[COMPACTED_RESULT]
    assert list(recorded) == [COMPACTED_RESULT]
    assert len(canonical_bytes(recorded)) <= limit
    assert stand_in["bytes"] == len(body)
    assert stand_in["sha256"] == hashlib.sha256(body).hexdigest()
    text = result if isinstance(result, str) else body.decode()
    assert text.startswith(stand_in["head"])
    assert compact_result(recorded, limit) is recorded  # a replay keeps a recorded stand-in


@settings(max_examples=50)
@given(text=st.text(alphabet='\x00\x1f"\\é😀a', min_size=3000, max_size=6000), limit=limits)
def test_escapes_and_wide_characters_never_push_a_stand_in_over_its_limit(
    text: str, limit: int
) -> None:
    recorded = compact_result(text, limit)
    assert len(canonical_bytes(recorded)) <= limit
    assert len(recorded[COMPACTED_RESULT]["head"]) > 0


def test_without_a_limit_a_result_is_kept_whole() -> None:
    big = {"rows": ["x" * 1000] * 100}
    assert compact_result(big, None) is big


# -- counts kept from step to step ------------------------------------------------------------


def _first_oversized(context: Context, limit: int) -> Any:
    return next(
        (m for m in context.messages if m.role == "tool" and estimate_tokens(m.content) > limit),
        None,
    )


def test_the_counts_kept_between_steps_match_a_count_from_scratch() -> None:
    context = Context()
    call = ToolCall(call_id="c1", tool="fetch", args={"page": 1})
    events = [
        UserInput(text="collect"),
        ActionProposed(calls=[call], text="fetching"),
        ActionFailed(call_id="c1", tool="fetch", kind="business", message="not yet"),
        # the same call answered again: the earlier answer grows in place, past the limit
        ActionCommitted(call_id="c1", tool="fetch", args={"page": 1}, result="x" * 400),
        ActionProposed(calls=[call.model_copy(update={"call_id": "c2"})]),
        ActionCommitted(call_id="c2", tool="fetch", args={"page": 1}, result="small"),
        ContextCompacted(from_seq=3, to_seq=3, summary="[compacted] x", tokens_before=107),
        UserInput(text="more"),
    ]
    for seq, event in enumerate(events, 1):
        context.add(seq, event)
        for limit in (50, 3000, 50):  # a look with another limit starts over
            assert context.oversized_result(limit) is _first_oversized(context, limit)
            assert context.tokens() == sum(m.tokens() for m in context.messages)
    assert context.oversized_result(50) is None  # the grown answer was compacted
