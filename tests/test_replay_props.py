"""Properties of replay over random scripted sessions (random policies over a small tool
set): the recording replays identical; a changed guard, or a guard that now raises,
diverges at the first affected step; a tampered recorded proposal is detected."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    Journal,
    RecordedEvent,
    RepairApplied,
    VerificationFailed,
)
from replay import Replayer, ReplayOptions

from . import replay_helpers as rh

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 10**6)
inputs = st.lists(st.sampled_from(["go", "again", "more please"]), min_size=1, max_size=3)


def recorded(seed: int, texts: list[str]) -> Journal:
    journal = Journal.open(":memory:")
    rh.record(journal, "build_random", texts, seed=seed)
    return journal


def call_args(journal: Journal) -> dict[str, tuple[str, object]]:
    """call id -> (tool, args as proposed); the scripted model's ids are unique."""
    return {call.call_id: (call.tool, call.args) for _, call in rh.proposals(journal, "rec")}


def decided(item: RecordedEvent) -> str | None:
    """The call id of an event that shows a decision made at or after the guard."""
    event = item.event
    if isinstance(event, ActionCommitted | ActionFailed):
        return event.call_id
    if isinstance(event, VerificationFailed) and event.stage not in ("unknown_tool", "schema"):
        return event.call_id
    if isinstance(event, RepairApplied) and event.level == "storm":
        return event.call_id
    return None


def first_affected(journal: Journal) -> int | None:
    """The seq of the first decision about a payment above the strict limit."""
    calls = call_args(journal)
    for item in journal.events("rec"):
        call_id = decided(item)
        if call_id is None:
            continue
        tool, args = calls[call_id]
        if tool == "pay" and isinstance(args, dict) and args.get("amount", 0) > rh.LIMIT:
            return item.seq
    return None


@PROPERTY
@given(seed=seeds, texts=inputs)
def test_a_recorded_random_session_replays_identical(seed: int, texts: list[str]) -> None:
    with recorded(seed, texts) as journal:
        result = Replayer().replay(journal, "rec")
        assert result.identical, result.first_divergence
        assert result.replayed_events == result.recorded_events


@PROPERTY
@given(seed=seeds, texts=inputs)
def test_a_changed_guard_diverges_at_the_first_affected_step(seed: int, texts: list[str]) -> None:
    with recorded(seed, texts) as journal:
        expected = first_affected(journal)
        result = Replayer(ReplayOptions(agent="tests.replay_helpers:build_random_strict")).replay(
            journal, "rec"
        )
        if expected is None:
            assert result.identical, result.first_divergence
            return
        divergence = result.first_divergence
        assert divergence is not None and divergence.seq == expected
        assert divergence.actual is not None
        assert (divergence.actual["type"], divergence.actual["stage"]) == (
            "verification_failed",
            "guard",
        )


@PROPERTY
@given(seed=seeds, texts=inputs)
def test_a_guard_that_now_raises_diverges_at_that_step(seed: int, texts: list[str]) -> None:
    with recorded(seed, texts) as journal:
        expected = first_affected(journal)
        agent = rh.build_random()
        agent.tools = rh.tools("raising")
        agent.reference = "tests.replay_helpers:build_random"
        result = Replayer(ReplayOptions(agent=agent)).replay(journal, "rec")
        if expected is None:
            assert result.identical, result.first_divergence
            return
        divergence = result.first_divergence
        assert divergence is not None and divergence.seq == expected
        assert "KeyError" in divergence.reason
        assert result.replayed_events == expected + 1  # the failed session ends there


def committed_dict_calls(journal: Journal) -> Iterator[tuple[int, int, int, str]]:
    """(proposal seq, call index, commit seq, tool) of committed calls proposed as objects."""
    commits = {
        item.event.call_id: item.seq
        for item in journal.events("rec")
        if isinstance(item.event, ActionCommitted)
    }
    for item in journal.events("rec"):
        if isinstance(item.event, ActionProposed):
            for index, call in enumerate(item.event.calls):
                if isinstance(call.args, dict) and call.call_id in commits:
                    yield item.seq, index, commits[call.call_id], call.tool


@PROPERTY
@given(seed=seeds, texts=inputs, data=st.data())
def test_a_tampered_recorded_proposal_is_detected(
    seed: int, texts: list[str], data: st.DataObject
) -> None:
    with recorded(seed, texts) as journal:
        candidates = list(committed_dict_calls(journal))
        if not candidates:
            return
        proposal_seq, index, commit_seq, tool = data.draw(st.sampled_from(candidates))
        args = {"amount": 33} if tool == "pay" else {"q": "tampered"}
        with Journal.open(":memory:") as copy:
            rh.copy_session(journal, "rec", copy, edit=rh.with_call(index, proposal_seq, args=args))
            result = Replayer().replay(copy, "rec")
        divergence = result.first_divergence
        # The call's args no longer say what its recorded text says: the replay, which hands
        # the tool what the text says, differs at the tampered proposal itself.
        assert divergence is not None and divergence.seq == proposal_seq < commit_seq
        assert divergence.expected is not None and divergence.actual is not None
        assert divergence.expected["calls"][index]["args"] == args
        assert divergence.actual["calls"][index]["args"] != args
