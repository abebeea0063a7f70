"""Fork: a session's prefix copied with its lineage, then run on with the current code,
on recorded outputs while they fit and the agent's own model after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloop import AgentLoadError
from journal import (
    ActionCommitted,
    ActionProposed,
    AgentHalted,
    InvalidInputError,
    Journal,
    SessionNotFoundError,
    UserInput,
    VerificationFailed,
)
from replay import ReplayOptions, fingerprint, fork, record_of

from . import replay_helpers as rh
from .loop_helpers import Script, propose

FIXED, BUGGY = rh.FIXED, rh.BUGGY


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rh.demo_file(tmp_path_factory.mktemp("fork"))


@pytest.fixture
def journal(demo_db: Path) -> Iterator[Journal]:
    """A private copy of the demo journal (forks write)."""
    with rh.copy_all(demo_db, Journal.open(":memory:")) as target:
        yield target


def prints(journal: Journal, session_id: str, start: int = 1) -> list[str]:
    return [fingerprint(record_of(item)) for item in journal.events(session_id, start=start)]


@pytest.mark.parametrize("at", [0, 1, 3, 5, 7])
def test_forking_with_the_same_agent_follows_the_recording(journal: Journal, at: int) -> None:
    result = fork(journal, BUGGY, at, ReplayOptions(live_model=True))
    assert (result.forked_from, result.fork_seq) == (BUGGY, at)
    assert result.session_id == f"{BUGGY}.fork-1"
    assert prints(journal, result.session_id) == prints(journal, BUGGY)
    assert result.recorded_until == result.last_seq == 7
    assert result.status == "completed"
    summary = journal.require(result.session_id)
    assert (summary.forked_from, summary.fork_seq, summary.replay_of) == (BUGGY, at, None)
    started = next(journal.events(result.session_id)).event
    assert (started.forked_from, started.fork_seq) == (BUGGY, at)
    # the copied prefix keeps its recorded times
    original = [item.ts for item in journal.events(BUGGY, stop=at + 1)]
    assert [item.ts for item in journal.events(result.session_id, stop=at + 1)] == original


def test_the_fixed_agent_runs_on_from_where_the_recording_stops_fitting(journal: Journal) -> None:
    result = fork(journal, BUGGY, 3, ReplayOptions(agent=FIXED, live_model=True))
    assert result.recorded_until == 4  # the recorded proposal of $150 still fitted
    events = [item.event for item in journal.events(result.session_id)]
    recorded = [item.event for item in journal.events(BUGGY)]
    assert events[4] == recorded[4]
    assert events[5].type == "verification_failed"
    assert isinstance(events[6], ActionProposed)  # the agent's own model from here on
    assert events[6].calls[0].args == {"order_id": "2210", "amount": 100.0}
    assert isinstance(events[7], ActionCommitted) and events[7].result["amount"] == 100.0
    assert result.status == "completed" and result.last_seq == 9
    assert journal.require(result.session_id).agent == FIXED


def test_a_fork_inside_a_proposal_has_the_current_code_decide_its_calls(
    journal: Journal,
) -> None:
    """The recorded pay(90) is verified by the current (strict) guard, which refuses it,
    as a fork one event earlier would; nothing in the fork ran it, so it is not called
    interrupted."""
    rh.record(journal, "build_pay", ["pay 90"], session_id="p")
    agent = rh.build_pay_strict()
    agent.llm = Script(propose(("pay", {"amount": 30})), propose(text="paid 30"))
    result = fork(
        journal, "p", 4, ReplayOptions(agent=agent, live_model=True)
    )  # seq 4 proposed pay(90), never decided
    events = [item.event for item in journal.events(result.session_id)]
    refused = events[5]
    assert isinstance(refused, VerificationFailed) and refused.call_id == "call_4_0"
    assert refused.stage == "guard"
    assert isinstance(events[6], ActionProposed)
    assert events[6].calls[0].args == {"amount": 30}
    assert isinstance(events[7], ActionCommitted) and events[7].result == {"paid": 30}
    assert events[-1].answer == "paid 30"
    assert result.recorded_until == 4 and result.status == "completed"
    same = fork(
        journal, "p", 4, ReplayOptions(agent=rh.build_pay(), live_model=True)
    )  # the guard of the recording
    assert prints(journal, same.session_id) == prints(journal, "p")
    assert same.recorded_until == same.last_seq


def test_a_fork_whose_agent_has_no_model_stops_where_the_recording_stops_fitting(
    journal: Journal,
) -> None:
    rh.record(journal, "build_pay", ["pay 90"], session_id="p")
    plain = rh.build_plain()
    plain.reference = "tests.replay_helpers:build_plain"
    followed = fork(
        journal, "p", 3, ReplayOptions(agent=plain, live_model=True)
    )  # the recording fits to the end
    assert followed.status == "completed" and followed.recorded_until == 7
    strict = rh.build_pay_strict()
    strict.llm = None
    result = fork(journal, "p", 3, ReplayOptions(agent=strict, live_model=True))
    assert result.status == "halted"
    halt = list(journal.events(result.session_id))[-1].event
    assert isinstance(halt, AgentHalted) and halt.rule == "replay_stopped"
    assert halt.reason.startswith(
        "replay stopped at seq 6: the replay diverged from the recording at seq 5"
    )


def test_a_fork_feeds_the_later_recorded_inputs(journal: Journal) -> None:
    chat = "demo-travel-chat-s0"
    inputs = [i.event.text for i in journal.events(chat) if isinstance(i.event, UserInput)]
    assert len(inputs) == 4
    result = fork(journal, chat, 5, ReplayOptions(live_model=True))  # after the first turn's answer
    forked = [
        i.event.text for i in journal.events(result.session_id) if isinstance(i.event, UserInput)
    ]
    assert forked == inputs
    assert prints(journal, result.session_id) == prints(journal, chat)


def test_forks_get_fresh_ids(journal: Journal) -> None:
    first = fork(journal, BUGGY, 2, ReplayOptions(live_model=True))
    second = fork(journal, BUGGY, 2, ReplayOptions(live_model=True))
    assert (first.session_id, second.session_id) == (f"{BUGGY}.fork-1", f"{BUGGY}.fork-2")
    deeper = fork(journal, first.session_id, 3, ReplayOptions(live_model=True))
    assert journal.require(deeper.session_id).forked_from == first.session_id


@pytest.mark.parametrize("at", [-1, 8, 100])
def test_a_fork_point_outside_the_session_is_refused(journal: Journal, at: int) -> None:
    before = {s.session_id for s in journal.sessions()}
    with pytest.raises(InvalidInputError, match=f"cannot fork at seq {at}; it has seqs 0..7"):
        fork(journal, BUGGY, at, ReplayOptions(live_model=True))
    assert {s.session_id for s in journal.sessions()} == before


def test_fork_errors(journal: Journal) -> None:
    with pytest.raises(SessionNotFoundError):
        fork(journal, "nope", 0, ReplayOptions(live_model=True))
    with pytest.raises(AgentLoadError):
        fork(journal, BUGGY, 2, ReplayOptions(agent="no.such:thing", live_model=True))
