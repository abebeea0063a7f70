"""Sessions recorded before a setting existed replay as they ran; new facts replay as recorded.

`session_started` v2 added ``max_identical_failures``, ``empty_reply_retries`` and
``max_result_bytes``; a v1 record upcasts to the values that reproduce how it ran, and a
replay runs it with them (the fixtures in ``fixtures/`` are all v1 and replay identical:
``pytest fixtures/``).
"""

from __future__ import annotations

from typing import Any

from agentloop import ToolError
from journal import Journal, predated_settings
from replay import Replayer

from .loop_helpers import (
    Gauge,
    Script,
    agent_of,
    answer,
    failing_tool,
    ok_tool,
    propose,
    run_turns,
    sleepy_tools,
)


def _records(journal: Journal, session_id: str) -> list[dict[str, Any]]:
    return [item.record() for item in journal.stored_events(session_id)]


def _as_v1(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The records as a v1 writer would have left them: no v2 settings, no hashes."""
    started, *rest = [{k: v for k, v in record.items() if k != "hash"} for record in records]
    guardrails = started["config"]["guardrails"]
    for name in predated_settings(1):
        del guardrails[name]
    return [(f"line {n}", r) for n, r in enumerate([{**started, "v": 1}, *rest], start=2)]


def _empty_reply_session(journal: Journal) -> None:
    """A session that ran before empty replies were sent back: its empty reply is the answer."""
    old = agent_of(ok_tool(), rails=predated_settings(1))
    run_turns(old, journal, Script(answer("")), "go", session_id="old")


def test_a_recording_older_than_a_setting_replays_as_it_ran(journal: Journal) -> None:
    _empty_reply_session(journal)
    with Journal.open(":memory:") as v1:
        v1.import_records("old", _as_v1(_records(journal, "old")))
        assert next(v1.events("old")).v == 1
        # today's agent sends empty replies back; the recording predates that, so it replays
        result = Replayer(agent=agent_of(ok_tool())).replay(v1, "old")
    assert result.identical, result.first_divergence


def test_a_recording_that_has_the_setting_is_compared_on_it(journal: Journal) -> None:
    _empty_reply_session(journal)  # v2: its session_started records the old values
    result = Replayer(agent=agent_of(ok_tool())).replay(journal, "old")
    assert result.first_divergence is not None
    assert result.first_divergence.seq == 0
    assert [change.path for change in result.first_divergence.changes] == [
        "config.guardrails.empty_reply_retries",
        "config.guardrails.max_identical_failures",
        "config.guardrails.max_result_bytes",
    ]


def test_an_abandoned_call_replays_as_recorded(journal: Journal) -> None:
    (slow,) = sleepy_tools(Gauge(), {"slow": 10.0}, timeout_s=0.01)
    agent = agent_of(slow)
    run_turns(agent, journal, Script(propose(("slow", {"q": "a"}))), "go")
    [failed] = [e.event for e in journal.events("s") if e.type == "action_failed"]
    assert failed.abandoned  # type: ignore[union-attr]
    result = Replayer(agent=agent).replay(journal, "s")  # served from the recording
    assert result.identical, result.first_divergence


def test_a_session_the_new_rules_decided_replays_identically(journal: Journal) -> None:
    lost = failing_tool("f", ToolError("user 7 not found"))
    turn = [propose(("f", {"q": "a"})), answer("")]  # a failing call, then an empty reply
    agent = agent_of(lost)
    run_turns(agent, journal, Script(*[*turn, answer("sorry")] * 3), *["again"] * 3)
    state = journal.state("s")
    assert (state.halt_rule, state.rejections) == ("identical_failures", 2)
    result = Replayer(agent=agent).replay(journal, "s")
    assert result.identical, result.first_divergence
