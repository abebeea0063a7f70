"""Sessions recorded before a setting existed replay as they ran; new facts replay as recorded.

`session_started` v2 added ``max_identical_failures``, ``empty_reply_retries`` and
``max_result_bytes``; a v1 record upcasts to the values that reproduce how it ran, and a
replay runs it with them (the fixtures in ``fixtures/`` are all v1 and replay identical:
``pytest fixtures/``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from agentloop import ToolError
from journal import Journal, import_openai, predated_settings
from replay import Replayer, ReplayOptions, diff_records, session_records

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
from .openai_helpers import assistant, user, write_json


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
        result = Replayer(ReplayOptions(agent=agent_of(ok_tool()))).replay(v1, "old")
    assert result.identical, result.first_divergence


def test_a_saved_replay_of_an_old_session_replays_the_same_way_again(journal: Journal) -> None:
    _empty_reply_session(journal)  # v2, recording the old values: as a saved replay of a v1
    today = agent_of(ok_tool())
    assert today.guardrails.empty_reply_retries == 2
    result = Replayer(ReplayOptions(agent=today)).replay(journal, "old")
    assert result.identical, result.first_divergence  # it runs the rules as recorded


def test_an_import_replays_with_the_agents_rules(journal: Journal, tmp_path: Path) -> None:
    transcript = [{"messages": [user("hi"), assistant(""), user("well?"), assistant("ok")]}]
    import_openai(journal, [write_json(tmp_path / "t.json", transcript)])
    [summary] = journal.sessions()
    agent = replace(agent_of(ok_tool()), model=None)  # as the transcript, which names none
    result = Replayer(ReplayOptions(agent=agent)).replay(journal, summary.session_id)
    divergence = result.first_divergence  # the empty reply is sent back: no config of its own
    assert divergence is not None and divergence.actual is not None
    assert divergence.actual["stage"] == "empty_reply"


def test_an_abandoned_call_replays_as_recorded(journal: Journal) -> None:
    (slow,) = sleepy_tools(Gauge(), {"slow": 10.0}, timeout_s=0.01)
    agent = agent_of(slow)
    run_turns(agent, journal, Script(propose(("slow", {"q": "a"}))), "go")
    [failed] = [e.event for e in journal.events("s") if e.type == "action_failed"]
    assert failed.abandoned  # type: ignore[union-attr]
    result = Replayer(ReplayOptions(agent=agent)).replay(journal, "s")  # served from the recording
    assert result.identical, result.first_divergence


def test_a_session_the_new_rules_decided_replays_identically(journal: Journal) -> None:
    lost = failing_tool("f", ToolError("user 7 not found"))
    turn = [propose(("f", {"q": "a"})), answer("")]  # a failing call, then an empty reply
    agent = agent_of(lost)
    run_turns(agent, journal, Script(*[*turn, answer("sorry")] * 3), *["again"] * 3)
    state = journal.state("s")
    assert (state.halt_rule, state.rejections) == ("identical_failures", 2)
    result = Replayer(ReplayOptions(agent=agent)).replay(journal, "s")
    assert result.identical, result.first_divergence


def test_an_old_session_and_its_copy_by_newer_code_diff_identical(journal: Journal) -> None:
    _empty_reply_session(journal)
    journal.import_records(
        "v1", [(at, {**r, "session_id": "v1"}) for at, r in _as_v1(_records(journal, "old"))]
    )
    journal.append("copy", [item.event for item in journal.events("v1")])  # v3, upcast values
    assert [next(journal.events(s)).v for s in ("v1", "copy")] == [1, 3]
    assert diff_records(*[session_records(journal, s) for s in ("v1", "copy")]).identical
